"""What a running search looks after between two coordinator steps: the progress display, the local agent
processes (restarted when they end; supervisor.py), the run directory (a warning if it is removed) and the run
store's write-ahead log (moved into run.db every 30 s)."""
from __future__ import annotations

import time
from pathlib import Path

import structlog

from autocomp_zmq.agents.engine.coordinator import Coordinator
from autocomp_zmq.agents.run.supervisor import Supervisor

log = structlog.get_logger("agents.run")


class RunWatch:
    """Progress callback that also restarts local agents that ended (unless the run is stopping), notices every few
    seconds that the run directory was removed, and every 30 s moves the store's write-ahead log into run.db."""

    def __init__(self, run_dir: Path, update, agents: Supervisor | None = None, stopping=lambda: False) -> None:
        self.run_dir, self.update, self.next_check, self.warned = run_dir, update, 0.0, False
        self.agents, self.stopping = agents, stopping
        self.next_checkpoint = time.monotonic() + 30.0

    def __call__(self, coord: Coordinator) -> None:
        self.update(coord)
        if self.agents is not None and not self.stopping():   # an interrupted run's agents may end with it
            self.agents.poll(coord.router.alive())
        now = time.monotonic()
        if now >= self.next_checkpoint:   # run.db itself, not only its write-ahead log, keeps up with the run
            self.next_checkpoint = now + 30.0
            coord.store.checkpoint(final=False)
        if not self.warned and now >= self.next_check:
            self.next_check = now + 2.0
            if not (self.run_dir / "run.db").exists():
                self.warned = True
                log.error("run_directory_removed", run_dir=str(self.run_dir),
                          note="the run goes on; its results will be written to a fallback directory")
