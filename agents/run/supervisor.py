"""Supervision of the agent processes a run starts on its own host (agents/run/localagents.py says which). It owns
each launch slot (the command, environment and log file of one process) and the process now in it: a process that
ends while the run goes on (a segfault, an OOM kill, a crash) is started again with the same command, appending to
the same log after a line that marks the restart (`agent_restarted`); a slot restarted `RestartLimit.restarts`
times within `RestartLimit.window_s` is given up. When a role the run needs is left with no process to serve it
(no other slot of that service, no live agent connected from elsewhere), `Supervisor.failed` says why, with the end
of the process's log, and the run stops. The run's progress callback polls it, in the coordinator's thread; the
jobs a dead agent held are requeued by the coordinator, not here. Stopping ends every process, restarted ones
included, and nothing is restarted once stopping began."""
from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from autocomp_zmq.agents.run.rundir import private_open
from autocomp_zmq.bus.transport import Peer

log = structlog.get_logger("agents.run")

TAIL_LINES = 20          # of a given-up process's log, in the error that stops the run


@dataclass(frozen=True)
class RestartLimit:
    """How often one launch slot may be restarted: at most `restarts` times within any `window_s` seconds."""
    restarts: int = 3
    window_s: float = 300.0


def may_restart(restarted_at: Sequence[float], now: float, limit: RestartLimit) -> bool:
    """Whether a slot whose earlier restarts happened at the (monotonic) times `restarted_at` may be restarted once
    more at `now`: fewer than `limit.restarts` of them lie within the last `limit.window_s` seconds."""
    return sum(1 for t in restarted_at if now - t < limit.window_s) < limit.restarts


def how_it_ended(returncode: int) -> str:
    """A process's end in words: `exit status 1`, or `signal SIGKILL` (Popen reports a signal as -number)."""
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"


def log_tail(path: Path, lines: int = TAIL_LINES, max_bytes: int = 65536) -> str:
    """The last `lines` lines of a log file (whatever its bytes), or why it could not be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - max_bytes))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Launch:
    """One launch slot: what starts its process, what the process serves, and its restarts."""
    role: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    impl: str | None = None           # the agent implementation (heuristic, llm, ...); None for an evaluator
    models: tuple[str, ...] = ()      # the hosted models an LLM agent serves
    target: str | None = None         # an evaluator's target
    proc: subprocess.Popen | None = None
    restarted_at: list[float] = field(default_factory=list)
    given_up: str | None = None       # how its last process ended, once the slot is given up

    @property
    def service(self) -> tuple:
        """What the slot offers the run: slots alike in this are interchangeable."""
        return (self.role, self.target) if self.role == "evaluator" else (self.role, self.impl, self.models)

    def describe(self) -> str:
        return self.role if self.role == "evaluator" else f"{self.role} ({self.impl})"

    def start(self, note: str | None = None) -> subprocess.Popen:
        with private_open(self.log_path) as logf:
            if note:
                logf.write(note.encode())
                logf.flush()
            self.proc = subprocess.Popen(self.argv, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=self.env)
        return self.proc

    def served_by(self, peer: Peer) -> bool:
        """Whether a connected agent offers what this slot's process did."""
        if peer.role != self.role:
            return False
        if self.role == "evaluator":
            return peer.target == self.target
        return peer.impl == self.impl and set(self.models) <= set(peer.models)


class Supervisor:
    """The run's local agent processes. `start` launches them; `poll` (from the run's progress callback) restarts
    those that ended and sets `failed` when a role is left unserved; `stop` ends them all."""

    def __init__(self, launches: list[Launch], limit: RestartLimit = RestartLimit(),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.launches, self.limit, self.clock = launches, limit, clock
        self.failed: str | None = None     # why the run must stop: a role no process serves any more
        self.stopping = False
        self._host = socket.gethostname()
        self._ended_pids: set[int] = set()   # processes of ours that ended: their peers serve nothing

    def start(self) -> "Supervisor":
        try:
            for launch in self.launches:
                launch.start()
        except OSError:
            self.stop(grace_s=0)
            raise
        return self

    def processes(self) -> list[subprocess.Popen]:
        return [launch.proc for launch in self.launches if launch.proc is not None]

    def poll(self, peers: Iterable[Peer] = ()) -> str | None:
        """Restart every process that ended (within the limit), give up those past it, and return (and keep in
        `failed`) why the run cannot go on, if it cannot. `peers`: the agents the coordinator holds alive, which
        may serve a role whose local slots were given up."""
        if self.stopping or self.failed:
            return self.failed
        for launch in self.launches:
            code = launch.proc.poll() if launch.proc is not None and not launch.given_up else None
            if code is None:
                continue
            self._ended_pids.add(launch.proc.pid)
            self._restart(launch, how_it_ended(code))
        self.failed = self._unserved(list(peers))
        return self.failed

    def _restart(self, launch: Launch, how: str) -> None:
        now = self.clock()
        if not may_restart(launch.restarted_at, now, self.limit):
            launch.given_up = how
            log.error("agent_given_up", agent=launch.describe(), role=launch.role, ended=how,
                      log=str(launch.log_path), restarts=len(launch.restarted_at), limit=self.limit.restarts,
                      window_s=self.limit.window_s)
            return
        launch.restarted_at.append(now)
        count = len(launch.restarted_at)
        note = (f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} the process ended ({how}); restarted by the run "
                f"(restart {count}) ---\n")
        try:
            launch.start(note)
        except OSError as exc:
            launch.given_up = f"{how}, and it could not be started again: {exc}"
            log.error("agent_given_up", agent=launch.describe(), role=launch.role, ended=launch.given_up,
                      log=str(launch.log_path))
            return
        log.warning("agent_restarted", agent=launch.describe(), role=launch.role, ended=how, restarts=count,
                    log=str(launch.log_path), pid=launch.proc.pid)

    def _unserved(self, peers: list[Peer]) -> str | None:
        live_services = {launch.service for launch in self.launches if not launch.given_up}
        for launch in self.launches:
            if not launch.given_up or launch.service in live_services:
                continue
            if any(launch.served_by(p) and p.state != "dead"
                   and not (p.host == self._host and p.pid in self._ended_pids) for p in peers):
                continue      # an agent started elsewhere serves the role
            window = f"{self.limit.window_s:g} s"
            return (f"the local {launch.describe()} agent ended ({launch.given_up}) after "
                    f"{len(launch.restarted_at)} restarts (at most {self.limit.restarts} within {window}), and no "
                    f"other agent serves the {launch.role} role; the last lines of its log {launch.log_path}:\n"
                    f"{log_tail(launch.log_path)}")
        return None

    def stop(self, grace_s: float = 3.0) -> None:
        """End every process (restarted ones included); nothing is restarted from now on."""
        self.stopping = True
        stop_agents(self.processes(), grace_s)


def stop_agents(procs: list[subprocess.Popen], grace_s: float = 3.0) -> None:
    """Wait up to grace_s for the processes to end by themselves (the run told them it is over), then terminate
    the rest, and kill those that outlast that."""
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            p.kill()
