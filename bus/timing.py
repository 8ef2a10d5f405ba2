"""Every timing constant of the transport in one injectable object, so that
fault tests can run with millisecond heartbeats."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BusTiming:
    heartbeat_s: float = 1.0        # both sides send a heartbeat this often
    suspect_after: int = 3          # missed heartbeats before a peer is suspect
    dead_after: int = 10            # missed heartbeats before a peer is dead
    reconnect_min_s: float = 1.0    # first reconnect delay; doubles each failure...
    reconnect_max_s: float = 32.0   # ...up to this, with jitter
    handshake_timeout_s: float = 5.0

    @property
    def dead_s(self) -> float:
        return self.heartbeat_s * self.dead_after

    @property
    def suspect_s(self) -> float:
        return self.heartbeat_s * self.suspect_after
