"""Transport between the coordinator (one ROUTER) and agents (one DEALER each).

Knows frames, signatures, liveness, reconnection and credit; knows nothing of
kernels, plans or search: job payloads are opaque maps here."""
from bus.auth import ReplayGuard, Signer, create_secret, load_secret
from bus.timing import BusTiming
from bus.wire import Codec, Message

__all__ = ["BusTiming", "Codec", "Message", "ReplayGuard", "Signer", "create_secret", "load_secret"]
