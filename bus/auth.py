"""Run secret, frame signatures and replay rejection.

Every frame after the signature is authenticated with HMAC-SHA256 keyed by a
per-run secret that lives in a file readable only by its owner. Each sender
numbers its messages (incarnation, sequence); a receiver rejects any pair it
has already seen, so a captured message cannot be replayed.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from collections import OrderedDict
from pathlib import Path

from autocomp_zmq.protocols.envelope import ProtocolError

SECRET_BYTES = 32


class SecretError(RuntimeError):
    pass


def create_secret(path: Path) -> bytes:
    """Write a fresh random secret to `path` with mode 0600 (fails if it exists)."""
    return write_secret(path, secrets.token_bytes(SECRET_BYTES))


def write_secret(path: Path, key: bytes) -> bytes:
    """Write `key` to `path` with mode 0600 (fails if it exists)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex() + "\n")
    return key


def load_secret(path: Path) -> bytes:
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise SecretError(f"cannot read the run secret {path}: {exc.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretError(f"run secret {path} is readable by others; chmod 600 it")
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise SecretError(f"run secret {path} is not a hex string") from None
    if len(key) < 16:
        raise SecretError(f"run secret {path} is too short ({len(key)} bytes)")
    return key


class Signer:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def sign(self, frames: list[bytes]) -> bytes:
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for frame in frames:  # length prefixes: moving bytes between frames changes the MAC
            mac.update(len(frame).to_bytes(8, "big"))
            mac.update(frame)
        return mac.digest()

    def verify(self, signature: bytes, frames: list[bytes]) -> bool:
        return hmac.compare_digest(signature, self.sign(frames))


class ReplayGuard:
    """Remembers the highest sequence number seen per (sender, incarnation)."""

    def __init__(self, max_senders: int = 65536) -> None:
        self._last: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._max = max_senders

    def check(self, sender: str, incarnation: int, seq: int) -> None:
        key = (sender, incarnation)
        last = self._last.get(key)
        if last is not None and seq <= last:
            raise ProtocolError(f"replayed or reordered message from {sender} (seq {seq} <= {last})")
        self._last[key] = seq
        self._last.move_to_end(key)
        while len(self._last) > self._max:
            self._last.popitem(last=False)
