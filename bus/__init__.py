"""Transport between the coordinator (one ROUTER) and agents (one DEALER each).

Knows frames, signatures, liveness, reconnection and credit; knows nothing of
kernels, plans or search: job payloads are opaque maps here."""
from autocomp_zmq.bus.auth import ReplayGuard, Signer, create_secret, load_secret
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.bus.wire import Codec, Message

__all__ = ["BusTiming", "Codec", "Message", "ReplayGuard", "Signer", "create_secret", "load_secret"]
