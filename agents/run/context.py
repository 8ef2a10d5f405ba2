"""What a run looks up once, in the coordinator's process, and hands on instead of looking things up again by
name: its options, the target (built with its --target-option values) and descriptor, the ISA profile, the
problem as the target loaded it and as it travels on the wire, the menu, the models by role and their prices,
the store it replays from, the search policy's class and the kernel it starts from. Built by
agents/run/execute.py after the checks that fail fast, before anything is created."""
from __future__ import annotations

from dataclasses import dataclass

from autocomp_zmq.agents.engine.candidates import Translation
from autocomp_zmq.agents.engine.policy import SearchPolicy
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.rundir import RunLock
from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.agents.workers.llm.pricing import PriceBook
from autocomp_zmq.agents.workers.llm.specs import ModelSpec
from autocomp_zmq.hw_runners.base import IsaProfile, Target, TargetInfo
from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.protocols.jobs import MenuOption, ProblemRef


@dataclass(frozen=True)
class RunContext:
    cfg: RunConfig
    target: Target
    info: TargetInfo
    profile: IsaProfile
    problem: Problem          # the target's, with its kernels and references
    wire_problem: ProblemRef           # what every job carries
    menu: list[MenuOption]
    specs: dict[str, list[ModelSpec]]
    prices: PriceBook
    replay: RunStore | None         # --replay: the recorded run whose answers are replayed
    policy: type[SearchPolicy]
    initial_code: str
    continued: dict | None = None   # --continue-from: the other run's final beam (agents/run/continuation.py)
    translation: Translation | None = None   # --translate-iters: reference and menu (agents/run/translation.py)

    def modes(self) -> dict:
        """The search modes' arguments of the policy's constructor, only those a run uses (a plug-in policy that
        takes none of them is built as before)."""
        return {**({"continued": tuple(self.continued["kernels"])} if self.continued else {}),
                **({"translation": self.translation} if self.translation else {})}


@dataclass(frozen=True)
class Resumed:
    """What a resumed run brings from its directory: its lock, its store and the kernel it started from."""
    lock: RunLock
    store: RunStore
    initial_code: str


@dataclass(frozen=True)
class Display:
    """How the run shows its progress: `live` a table (None: when the output is a terminal), `plain` a line every
    few seconds otherwise."""
    live: bool | None = None
    plain: bool = True


__all__ = ["Display", "Resumed", "RunContext"]
