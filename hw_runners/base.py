"""The one small interface every target implements, and the target registry.

A target knows its problems, evaluates a candidate kernel for one of them and
points at its prompt pack (prompts/<target>/). Targets register themselves
with @register("name"); nothing else in the product names a target.
"""
from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"   # prompts/<target>/ holds each target's pack


class UnknownTargetError(KeyError):
    pass


class UnknownProblemError(KeyError):
    pass


@dataclass(frozen=True)
class Problem:
    """A workload of a target, with its starting (naive) kernel and references."""
    name: str
    target: str
    family: str
    dims: dict[str, int]
    description: str
    kernels: dict[str, Path]      # role ("naive", "tuned", "hwloop", ...) -> source file
    tags: tuple[str, ...] = ()

    def kernel_source(self, role: str = "naive") -> str:
        return self.kernels[role].read_text()


@dataclass
class EvalResult:
    """Outcome of evaluating one candidate. `correct` is False whenever anything failed;
    `error` then says why in words fit for a repair prompt."""
    correct: bool
    cycles: int | None = None
    latency_unit: str = "cycles"
    utilization: float | None = None
    roofline_fraction: float | None = None
    bound: str | None = None
    error: str | None = None
    error_kind: str | None = None   # policy | compile | crash | timeout | limit | wrong_result | sandbox
    feedback: dict[str, Any] = field(default_factory=dict)
    feedback_text: str = ""
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    sandbox: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def failure(cls, kind: str, message: str, **extra: Any) -> "EvalResult":
        return cls(correct=False, error=message, error_kind=kind, **extra)


class Target(abc.ABC):
    """A hardware target: a simulator or a device runner."""
    name: ClassVar[str]

    @abc.abstractmethod
    def problems(self) -> list[Problem]: ...

    def problem(self, name: str) -> Problem:
        for p in self.problems():
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.problems())
        raise UnknownProblemError(f"target {self.name!r} has no problem {name!r}; known: {known}")

    @abc.abstractmethod
    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        """Compile, run, check and measure `code` for `problem` in a sandbox; time_limit_s replaces the
        target's own limit on the kernel's run time."""


_REGISTRY: dict[str, type[Target]] = {}


def register(name: str):
    def deco(cls: type[Target]) -> type[Target]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls
    return deco


def target_names() -> list[str]:
    from hw_runners import load_builtin_targets
    load_builtin_targets()
    return sorted(_REGISTRY)


def get_target(name: str, **options: Any) -> Target:
    from hw_runners import load_builtin_targets
    load_builtin_targets()
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise UnknownTargetError(f"unknown target {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None
    return cls(**options)
