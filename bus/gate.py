"""The connection gate: a peer proves it knows the run secret during the ZMTP
handshake, before libzmq accepts a single message from it.

Why at the handshake: libzmq hands a multipart message to the application only
once every frame of it has arrived, and ZMQ_MAXMSGSIZE bounds single frames,
not their number. Any check on messages therefore runs after a stranger has
made the coordinator buffer as much as it cared to send. A refused handshake
closes the connection before any message is read.

How: without CURVE, agents use the PLAIN mechanism with a password derived
from the secret by HMAC (the secret never travels; the password does, in
clear, so on an untrusted network use CURVE). With CURVE, every agent uses a
client key pair derived from the secret, and the handshake proves possession
of its private half without sending it. A ZAP handler (ZeroMQ RFC 27), one
thread per zmq context, checks either for every Router of that context, each
under its own ZAP domain. Messages are still signed and checked one by one
(bus/wire.py): the gate only keeps strangers off the socket.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass

import zmq
from zmq.utils import z85

from autocomp_zmq.bus.limits import RejectLog

USERNAME = b"autocomp-agent"
ZAP_ENDPOINT = "inproc://zeromq.zap.01"   # fixed by RFC 27: one handler per context


def _derive(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, b"autocomp gate v1 " + purpose, hashlib.sha256).digest()


def plain_password(key: bytes) -> bytes:
    return _derive(key, b"plain").hex().encode()


def client_curve_keys(key: bytes) -> tuple[bytes, bytes]:
    """(public, secret), Z85-encoded: every 32-byte string is a valid Curve25519 secret key."""
    secret = z85.encode(_derive(key, b"curve client"))
    return zmq.curve_public(secret), secret


def authenticate_client(sock: zmq.Socket, key: bytes, curve_server_key: bytes | None = None) -> None:
    """Set the credentials a gated Router expects on a socket that will connect to it."""
    if curve_server_key:
        public, secret = client_curve_keys(key)
        sock.curve_serverkey = curve_server_key
        sock.curve_publickey = public
        sock.curve_secretkey = secret
    else:
        sock.plain_username = USERNAME
        sock.plain_password = plain_password(key)


@dataclass(frozen=True)
class _Policy:
    password: bytes
    curve_public: bytes          # raw 32 bytes, as ZAP presents client keys
    rejects: RejectLog

    def admits(self, mechanism: bytes, credentials: list[bytes]) -> bool:
        if mechanism == b"PLAIN" and len(credentials) == 2:
            return (hmac.compare_digest(credentials[0], USERNAME)
                    & hmac.compare_digest(credentials[1], self.password))
        if mechanism == b"CURVE" and len(credentials) == 1:
            return hmac.compare_digest(credentials[0], self.curve_public)
        return False


class _Handler(threading.Thread):
    """Answers the ZAP requests of one context until that context is terminated."""

    def __init__(self, ctx: zmq.Context) -> None:
        super().__init__(name="bus-zap", daemon=True)
        self.ctx = ctx
        self.policies: dict[bytes, _Policy] = {}
        self.sock = ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        try:
            self.sock.bind(ZAP_ENDPOINT)      # here, so that a clash surfaces in the caller
        except zmq.ZMQError as exc:
            self.sock.close()
            raise RuntimeError(f"another ZAP handler already serves this zmq context ({exc})") from None

    def run(self) -> None:
        try:
            while True:
                self.sock.send_multipart(self._answer(self.sock.recv_multipart()))
        except zmq.ContextTerminated:
            pass
        finally:
            self.sock.close()
            with _lock:
                if _handlers.get(id(self.ctx)) is self:
                    del _handlers[id(self.ctx)]

    def _answer(self, request: list[bytes]) -> list[bytes]:
        # [version, request id, domain, address, routing id, mechanism, *credentials]
        if len(request) < 6 or request[0] != b"1.0":
            return [b"1.0", request[1] if len(request) > 1 else b"", b"500", b"malformed ZAP request", b"", b""]
        _, request_id, domain, address, _, mechanism, *credentials = request
        policy = self.policies.get(domain)
        if policy is not None and policy.admits(mechanism, credentials):
            return [b"1.0", request_id, b"200", b"OK", b"agent", b""]
        if policy is not None:
            policy.rejects.add("bad_credentials", address.decode("ascii", "replace") or "unknown",
                               detail=mechanism.decode("ascii", "replace")[:20])
        return [b"1.0", request_id, b"400", b"wrong run secret", b"", b""]


_handlers: dict[int, _Handler] = {}       # id(context) -> handler; the handler keeps its context alive
_lock = threading.Lock()


def guard(sock: zmq.Socket, key: bytes, rejects: RejectLog, curve_secret_key: bytes | None = None) -> bytes:
    """Make a server socket, before it binds, admit only peers that know `key`. Returns its ZAP
    domain, to pass to release() when the socket closes."""
    domain = f"autocomp-{secrets.token_hex(8)}".encode()
    curve_public = z85.decode(client_curve_keys(key)[0]) if zmq.has("curve") else b""
    policy = _Policy(plain_password(key), curve_public, rejects)
    with _lock:
        handler = _handlers.get(id(sock.context))
        if handler is None:
            handler = _handlers[id(sock.context)] = _Handler(sock.context)
            handler.start()
        handler.policies[domain] = policy
    sock.zap_domain = domain
    if curve_secret_key:
        sock.curve_server = True
        sock.curve_secretkey = curve_secret_key
    else:
        sock.plain_server = True
    return domain


def release(ctx: zmq.Context, domain: bytes) -> None:
    with _lock:
        handler = _handlers.get(id(ctx))
        if handler is not None:
            handler.policies.pop(domain, None)
