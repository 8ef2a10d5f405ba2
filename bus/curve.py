"""CurveZMQ keys for encrypting TCP links between hosts (pyzmq's zmq.auth
writes and reads the certificate files). The HMAC run secret still
authenticates every message; CURVE adds confidentiality on the wire."""
from __future__ import annotations

from pathlib import Path

import zmq.auth


def create_server_keys(directory: Path) -> tuple[bytes, bytes]:
    """Write server.key (public) and server.key_secret (mode 0600) under directory."""
    directory.mkdir(parents=True, exist_ok=True)
    public_file, secret_file = zmq.auth.create_certificates(str(directory), "server")
    Path(secret_file).chmod(0o600)
    return load_keys(Path(secret_file))


def load_keys(path: Path) -> tuple[bytes, bytes | None]:
    """(public, secret) from a certificate file; secret is None for a public-only file."""
    return zmq.auth.load_certificate(str(path))


def load_public_key(path: Path) -> bytes:
    return load_keys(path)[0]
