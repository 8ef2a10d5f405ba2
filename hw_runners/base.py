"""The one small interface every target implements, its descriptor, and the
target registry.

A target knows its problems and evaluates a candidate kernel for one of them.
What the rest of the product needs to know about it is declared as data, in
the target.toml of its home directory (by default the folder of the module
that defines the target class: hw_runners/<target>/ for the built-in ones,
which also hold their problems and offline heuristic): its prompt pack
(prompts/<target>/ for the built-in ones), optimization menu, problems
directory, kernel language, code fence,
entry point, latency unit, how many evaluators a host runs, its sandbox
profile and its offline heuristic agent. The registry (registry.py) finds
each target by its target.toml (`class = "module:Class"`), its [command]
table, or the `autocomp_zmq.targets` entry-point group, and imports its
class only when it is used; nothing else in the product names a target.
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import functools
import inspect
import os
import tomllib

import psutil

from autocomp_zmq.protocols.jobs import EvalReport, ProblemDefinition

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"   # prompts/common/: the target-neutral prompt text


class UnknownTargetError(KeyError):
    pass


class UnknownProblemError(KeyError):
    pass


class ProblemSizeError(ValueError):
    """A parametric problem name (e.g. gemm-IxJxK) with sizes the target's kernels cannot handle; the
    message says what they need, in one line."""


class DescriptorError(ValueError):
    """A target.toml that is missing or does not say what the product needs."""


EVALUATOR_UNITS = ("cores", "devices")


class UnknownIsaError(ValueError):
    """An ISA profile the target does not declare."""


@dataclass(frozen=True)
class IsaProfile:
    """What kernels may use on a target, declared as [isa.NAME] in its target.toml: the calls it rejects,
    the problem kernel a run starts from, the problem kernel whose latency is reported as the upper
    bound, the menu options and prompt sections it shows (menu options and sections name their profiles)."""
    name: str
    description: str = ""
    forbid: tuple[str, ...] = ()        # names a kernel may not use (rejected before compiling)
    start: str | None = None            # problem kernel role a run starts from (None: "naive")
    bound: str | None = None            # problem kernel role whose latency is the upper bound
    bound_name: str = ""                # how feedback names that bound ("the hardware loop")
    examples: tuple[Path, ...] | None = None   # the pack's examples under this profile (None: all)
    # what the target itself reads of the profile (`settings = {...}`), e.g. trainium-sim's NKI dialect and
    # the platform it simulates; the product passes them through without interpreting them
    settings: tuple[tuple[str, Any], ...] = ()

    def setting(self, name: str, default: Any = None) -> Any:
        return dict(self.settings).get(name, default)


DEFAULT_ISA = IsaProfile("full", "everything the target offers")


@dataclass(frozen=True)
class TargetInfo:
    """A target's descriptor (its target.toml), with paths resolved against its home directory."""
    name: str
    home: Path
    description: str
    language: str
    code_fence: str                 # the fence of code blocks in prompts and answers (c, python, ...)
    entry_point: str                # the function every kernel defines
    latency_unit: str               # what results' latency counts: cycles, us, ...
    evaluators: str                 # one evaluator per "cores" or per "devices" of a host
    sandbox: str                    # how candidate code is confined, in words (shown by `targets`)
    problems: Path                  # the target's problem files
    menu: Path                      # the optimization menu (menu.toml)
    isa: Path
    rules: Path
    examples: tuple[Path, ...] = ()
    heuristic: str | None = None    # "module:Class" of the offline planner/coder, if the target has one
    kernel_suffix: str = ".c"       # file name ending of a kernel (a run's best kernel is best<suffix>)
    isa_profiles: tuple[IsaProfile, ...] = (DEFAULT_ISA,)   # the first is the default
    device: str = ""                # what prompts call the machine ("Gemmini, a 16x16 ... accelerator")
    correctness: str = "the same results as the reference"   # how prompts state what correct means here
    fence_tags: tuple[str, ...] = ()   # code-fence tags accepted in answers besides code_fence (cpp, py, ...)
    hardware: str = ""              # what it has run on, in words: a simulator, or "never run on ..." (`targets`)

    def isa_profile(self, name: str | None = None) -> IsaProfile:
        """The ISA profile `name` ("" or None: the default); UnknownIsaError names the ones there are."""
        if not name:
            return self.isa_profiles[0]
        for profile in self.isa_profiles:
            if profile.name == name:
                return profile
        raise UnknownIsaError(f"target {self.name!r} has no ISA profile {name!r}; it has "
                              + ", ".join(p.name for p in self.isa_profiles))

    @classmethod
    def load(cls, home: Path, name: str) -> "TargetInfo":
        path = home / "target.toml"
        try:
            meta = tomllib.loads(path.read_text())
            pack = meta.get("pack", {})
            pack_dir = (home / pack.get("dir", ".")).resolve()     # pack files are relative to it
            info = cls(name=name, home=home, description=meta.get("description", ""), language=meta["language"],
                       code_fence=meta["code_fence"], entry_point=meta.get("entry_point", "solution"),
                       latency_unit=meta["latency_unit"], evaluators=meta.get("evaluators", "cores"),
                       sandbox=meta["sandbox"], problems=(home / meta["problems"]).resolve(),
                       menu=pack_dir / pack["menu"], isa=pack_dir / pack["isa"], rules=pack_dir / pack["rules"],
                       examples=tuple(pack_dir / e for e in pack.get("examples", [])),
                       heuristic=meta.get("heuristic"), kernel_suffix=meta.get("kernel_suffix", "." + meta["code_fence"]),
                       isa_profiles=_isa_profiles(pack_dir, meta.get("isa", {})),
                       device=meta.get("device", f"the {name} target"),
                       correctness=meta.get("correctness", "the same results as the reference"),
                       fence_tags=tuple(meta.get("fence_tags", ())), hardware=meta.get("hardware", ""))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise DescriptorError(f"target {name!r} has no usable descriptor {path}: {exc}") from None
        except KeyError as exc:
            raise DescriptorError(f"target {name!r}: {path} does not declare {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise DescriptorError(f"target {name!r}: bad [isa] tables in {path}: {exc}") from None
        if info.evaluators not in EVALUATOR_UNITS:
            raise DescriptorError(f"target {name!r}: evaluators must be one of {', '.join(EVALUATOR_UNITS)}, "
                                  f"not {info.evaluators!r} ({path})")
        return info



def _isa_profiles(pack_dir: Path, tables: dict) -> tuple[IsaProfile, ...]:
    """[isa.NAME] tables in declaration order (the first is the default), or the one implicit 'full'."""
    if not tables:
        return (DEFAULT_ISA,)
    profiles = []
    for name, t in tables.items():
        unknown = set(t) - {"description", "forbid", "start", "bound", "bound_name", "examples", "settings"}
        if unknown:
            raise ValueError(f"[isa.{name}] has unknown keys {sorted(unknown)}")
        examples = t.get("examples")
        profiles.append(IsaProfile(name, t.get("description", ""), tuple(t.get("forbid", ())), t.get("start"),
                                   t.get("bound"), t.get("bound_name", t.get("bound") or ""),
                                   None if examples is None else tuple(pack_dir / e for e in examples),
                                   tuple(sorted(dict(t.get("settings", {})).items()))))
    return tuple(profiles)


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
    isa: str = ""                 # the ISA profile kernels are judged under ("": the target's default)
    # what the target evaluates against when the family's name is not enough (a parametric size or a
    # user's problem file): target-specific, built by the target itself
    semantics: Any = dataclasses.field(default=None, compare=False, repr=False)
    definition: ProblemDefinition | None = None   # the user's problem file it came from, if any

    def kernel_source(self, role: str = "naive") -> str:
        return self.kernels[role].read_text()

    def start_role(self, profile: "IsaProfile") -> str:
        """The kernel a run starts from: a problem file's own starting kernel, else the profile's start."""
        return "start" if "start" in self.kernels else profile.start or "naive"


# A target's verdict is the evaluator's answer on the wire, one type for both (protocols/jobs.py).
EvalResult = EvalReport
RESULT_TEXT_LIMITS = {"error": 8000, "stdout": 4000, "stderr": 8000, "feedback_text": 8000}   # keep results < 64 KiB


def bounded(result: EvalResult) -> EvalResult:
    """Whatever a kernel wrote, a result stays small (it travels on the bus and into prompts): texts are
    cut in the middle to their limits, sandbox notes capped."""
    for name, limit in RESULT_TEXT_LIMITS.items():
        text = getattr(result, name) or ""
        if len(text) > limit:
            setattr(result, name, text[:limit // 2] + f"\n[... {len(text) - limit:,} characters omitted ...]\n"
                    + text[-limit // 2:])
    result.sandbox = [note[:200] for note in result.sandbox[:16]]
    return result


class Target(abc.ABC):
    """A hardware target: a simulator or a device runner."""
    name: ClassVar[str]
    # the directory of target.toml; None: the folder of the module of the class that sets `name` (home_of)
    home: ClassVar[Path | None] = None

    @classmethod
    def info(cls) -> TargetInfo:
        return _info(cls)

    def local_evaluators(self) -> int:
        """How many evaluators this host runs by default: one per core, or one per device."""
        if self.info().evaluators == "devices":
            return len(self.devices())
        return psutil.cpu_count(logical=True) or os.cpu_count() or 1

    def devices(self) -> list[str]:
        """The accelerator devices of this host (targets whose evaluators are per device override this)."""
        return []

    @abc.abstractmethod
    def problems(self) -> list[Problem]: ...

    def problem(self, name: str, isa: str | None = None) -> Problem:
        """The problem `name`, judged under ISA profile `isa` (None or "": the default; UnknownIsaError):
        one of problems(), else a parametric name (ProblemSizeError for sizes the kernels cannot handle)."""
        profile = self.info().isa_profile(isa).name
        for p in self.problems():
            if p.name == name:
                return dataclasses.replace(p, isa=profile)
        found = self.parametric(name)
        if found is not None:
            return dataclasses.replace(found, isa=profile)
        known = ", ".join(p.name for p in self.problems())
        patterns = self.name_patterns()
        also = f"; or any {', '.join(patterns)}" if patterns else ""
        raise UnknownProblemError(f"target {self.name!r} has no problem {name!r}; known: {known}{also}")

    def parametric(self, name: str) -> Problem | None:
        """A problem named by a pattern of name_patterns() (e.g. gemm-100x100x100), or None if the name
        follows none; raises ProblemSizeError for sizes the target's kernels cannot handle."""
        return None

    def name_patterns(self) -> list[str]:
        """The parametric problem names this target accepts besides problems(), e.g. ["gemm-IxJxK"]."""
        return []

    def problem_from_definition(self, definition: ProblemDefinition) -> Problem:
        """The problem a user's problem file defines (hw_runners/problemfile.py reads and checks the common
        fields); raises problemfile.DefinitionError naming the file and the field."""
        from autocomp_zmq.hw_runners.problemfile import DefinitionError
        raise DefinitionError(f"{definition.path}: target: {self.name} does not take problem files")

    def profile_for(self, code: str) -> str | None:
        """The ISA profile a kernel evaluated on its own (`launch.py eval` without --isa) is judged under; None:
        the default. A target whose profiles are dialects of its language names the one the kernel is written in."""
        return None

    def judge(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
              time_limit_s: float | None = None, full: bool = False) -> EvalResult:
        """What evaluators run: the checks every target shares (the ISA profile's forbid list, on the source),
        then the target's own evaluate(). `full` is passed on only when asked for: only a target whose reports
        can say `sampled` is ever asked, so a target that always compares every element need not accept it."""
        from autocomp_zmq.hw_runners.isa_check import violation
        info = self.info()
        profile = info.isa_profile(problem.isa)
        why = violation(code, profile.forbid, info.code_fence, profile.name, profile.description)
        if why:
            return EvalResult.failure("policy", why)
        return self.evaluate(problem, code, seed=seed, trace_path=trace_path, time_limit_s=time_limit_s,
                             **({"full": True} if full else {}))

    @abc.abstractmethod
    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        """Compile, run, check and measure `code` for `problem` in a sandbox; time_limit_s replaces the
        target's own limit on the kernel's run time. A target whose profiles forbid operations also checks,
        here, that the kernel executed none of them (judge() has checked the source). A target that compares
        only a sample of a large output says so in the report (`sampled`) and accepts `full=True`, which
        compares every element."""


@functools.cache
def _info(cls: type[Target]) -> TargetInfo:
    return TargetInfo.load(home_of(cls), cls.name)


def home_of(cls: type[Target]) -> Path:
    """Where a target's target.toml is: its `home`, else the folder of the class that names the target (a
    subclass of a built-in target, such as a benchmark's, keeps its parent's descriptor)."""
    if cls.home:
        return Path(cls.home)
    owner = next((k for k in cls.__mro__ if "name" in vars(k) and k is not Target), cls)
    return Path(inspect.getfile(owner)).resolve().parent


def target_names() -> list[str]:
    """Every target's name (hw_runners/registry.py: nothing is imported)."""
    from autocomp_zmq.hw_runners import registry
    return registry.target_names()


def target_class(name: str) -> type[Target]:
    """A target's class, its module imported on first use (UnknownTargetError: unknown or unusable)."""
    from autocomp_zmq.hw_runners import registry
    return registry.target_class(name)


def target_info(name: str) -> TargetInfo:
    """The descriptor of a registered target, without instantiating it."""
    return target_class(name).info()


def get_target(name: str, **options: Any) -> Target:
    return target_class(name)(**options)
