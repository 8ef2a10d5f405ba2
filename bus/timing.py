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
    # A new connection must finish the ZMTP handshake (and pass the gate) within this, libzmq's
    # ZMQ_HANDSHAKE_IVL (30 s by default): until then a stranger's half-sent handshake command can
    # hold up to MAX_FRAME_BYTES of the coordinator's memory. Legitimate handshakes take milliseconds.
    connect_handshake_s: float = 5.0
    # An agent that gets no WELCOME this many times in a row warns that its secret or CURVE
    # server key is probably wrong (before that, a slow or restarting coordinator is likelier).
    warn_after_failed_handshakes: int = 3
    # At most one warning line per kind of trouble this often: rejected messages on the
    # coordinator (one line per reason, with the count since the last) and an agent's "no welcome".
    warn_interval_s: float = 10.0
    # An agent gives up (and its process exits) after this many refused handshakes in a row (the
    # coordinator's end answered, and refused it: a wrong secret, CURVE key or version cannot heal)...
    max_refused: int = 5
    # ...or after this long without reaching any coordinator (none there, or its run has ended).
    unreachable_s: float = 600.0

    @property
    def dead_s(self) -> float:
        return self.heartbeat_s * self.dead_after

    @property
    def suspect_s(self) -> float:
        return self.heartbeat_s * self.suspect_after
