"""The options of a run: one dataclass whose field names are the command-line flags (with underscores)
and the keys of a --config TOML file, checked for type and range with one-line errors, and the rules
for what a resumed run may change."""
from __future__ import annotations

import tomllib
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

EVALUATORS_PER_CORE = 4        # more evaluators than this per core only queue for the CPU


class ConfigError(ValueError):
    """An option has a wrong type or value, or cannot change on resume; the message says which and why."""


def option(default: Any = None, help: str = "", *flags: str, metavar: str | None = None, factory=None,
           shown: str | None = None):
    """A run option, declared once: its default, its help, extra flags (e.g. "-T") and metavar feed the
    command line (launch.py builds `run` from these), the TOML keys and the worker command line."""
    meta = {"help": help, "flags": flags, "metavar": metavar, "shown": shown}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


N, S, X = "N", "S", "X"


@dataclass
class RunConfig:
    target: str = option("gemmini-sim", "Hardware target (a --problem-file sets it).", "-t", metavar="NAME")
    problem: str = option("gemm-512x512x512", "Problem to optimize: a name the target knows (`problems` lists "
                                              "them; parametric names such as gemm-100x100x100 too), or one of "
                                              "--problems-dir.", "-p", metavar="NAME")
    problem_file: str | None = option(None, "Optimize the problem this file defines (TOML: signature, dims, tensors, "
                                            "reference, starting kernel; see the README); sets --problem and "
                                            "--target.", metavar="FILE")
    problems_dir: str | None = option(None, "A directory of problem files (*.toml): --problem names one of them.",
                                      metavar="DIR")
    kernel: str | None = option(None, "Starting kernel: a file, or builtin:ROLE for one of the problem's own kernels "
                                      "(none: a problem file's own, else the ISA profile's start, else the problem's "
                                      "naive kernel).",
                                metavar="FILE")
    isa: str | None = option(None, "ISA profile of the target: what kernels may use (gemmini-sim: full, or fine for "
                                   "the paper's rules: no loop FSMs or library calls, the hardware loop as the upper "
                                   "bound); none: the target's default.", metavar="PROFILE")
    reuse: str | None = option(None, "Reuse a recorded optimization trace: its plans, adapted to this problem, are "
                                     "the first iterations' plans. auto: the most similar workload in the schedule "
                                     "library (same target and ISA profile); or a RUN_DIR.", metavar="auto|RUN_DIR")
    schedule_library: str | None = option(None, "Directory of recorded optimization traces (written at the end of "
                                                "every run, read by --reuse auto).", metavar="DIR",
                                          shown="$AUTOCOMP_SCHEDULE_LIBRARY, else the user's data directory")
    out: str | None = option(None, "Run directory to create (none: runs/PROBLEM-TIME).", "-o", metavar="DIR")
    search: str = option("beam", "Search policy: beam (the paper's beam search) or one a plug-in registers in the "
                                 "autocomp_zmq.policies entry-point group.", metavar="NAME")
    iterations: int = option(8, "Beam-search iterations.", "-T", metavar=N)
    beam: int = option(4, "Beam width.", "-B", metavar=N)
    plans: int = option(4, "Plans per beam candidate.", "-N", metavar=N)
    codes: int = option(2, "Code candidates per plan.", "-K", metavar=N)
    dropout: float = option(0.3, "Menu dropout as the keep-probability of each option.", metavar="P")
    seed: int = option(0, "Seed of every random choice of the search.", metavar=N)
    model: list[str] = option(help="Planning model (repeatable: ensembling).", metavar="SPEC",
                              factory=lambda: ["heuristic"])
    code_model: list[str] = option(help="Coding model (repeatable).", metavar="SPEC", factory=list,
                                   shown="same as --model")
    model_allocation: str = option("even", "How plan and code samples are split among ensembled models: even (the "
                                           "paper's: models take turns) or bandit (Thompson sampling: samples shift "
                                           "toward the models whose candidates entered the beam).", metavar="POLICY")
    evaluators: int | None = option(None, "Local evaluator processes (none: one per core; 0: remote workers "
                                          "only).", metavar=N)
    planners: int = option(1, "Local heuristic planner processes.", metavar=N)
    coders: int = option(1, "Local heuristic coder processes.", metavar=N)
    repairers: int = option(1, "Local heuristic repairer processes.", metavar=N)
    max_repairs: int = option(1, "Repair attempts per failed candidate.", metavar=N)
    patience: int = option(3, "Stop after this many iterations without improvement.", metavar=N)
    max_evals: int | None = option(None, "Stop after this many evaluations.", metavar=N)
    stop_roofline: float | None = option(None, "Stop once the best reaches this fraction of roofline.", metavar=X)
    max_cost: float | None = option(None, "Hard cap in USD on model calls: a call starts only if its worst case "
                                          "(its prompt and --max-tokens at the model's price) and that of every call "
                                          "in flight fit under it.", metavar="USD")
    prices: str | None = option(None, "TOML file of model prices (USD per million tokens: input, output, cached_input, "
                                      "cache_write) merged over genai-prices' table, model by model.", metavar="FILE",
                                shown="$AUTOCOMP_PRICES, else none")
    max_tokens: int = option(32000, "Output tokens (reasoning included) a model call may use: a call first asks for "
                                    "half, and asks once more with all of it if its answer was cut off.", metavar=N)
    bind: str = option("tcp://127.0.0.1:*", "Coordinator endpoint, e.g. tcp://0.0.0.0:5555 for remote workers.",
                       metavar="ENDPOINT")
    curve: bool = option(False, "Encrypt links with CurveZMQ (keys in RUN_DIR/curve).")
    replay: str | None = option(None, "Answer model jobs only from this recorded run (no network).",
                                metavar="RUN_DIR")
    temperature: float | None = option(None, "Sampling temperature for the models.", metavar=X)
    reasoning_effort: str | None = option(None, "low, medium or high: OpenAI reasoning effort; for Anthropic models "
                                                "extended thinking with a budget of 2k, 8k or 24k tokens.",
                                          metavar="LEVEL")
    call_timeout_s: float = option(600.0, "Seconds per model call.", metavar=S)
    call_retries: int = option(4, "Retries of a model call on 429/5xx/timeouts (with backoff, Retry-After).",
                               metavar=N)
    preflight: bool = option(True, "Check that every model endpoint answers before starting.")
    check_start: bool = option(True, "Evaluate the starting kernel before agents start, to fail fast.")
    heartbeat_s: float = option(1.0, "Heartbeat interval of the bus.", metavar=S)
    eval_lease_s: float = option(600.0, "Seconds an evaluator may hold a job; past it the evaluation is a "
                                        "timeout verdict.", metavar=S)
    llm_lease_s: float | None = option(None, "Seconds a model agent may hold a job (none: long enough for every "
                                             "retry of a call, so that a slow call is not paid twice).", metavar=S)

    @property
    def model_lease_s(self) -> float:
        """A model job's lease: every try of its call (timeout x (retries + 1)) plus the SDK's backoff
        between tries (at most about a minute in all), unless set explicitly."""
        if self.llm_lease_s is not None:
            return self.llm_lease_s
        return self.call_timeout_s * (self.call_retries + 1) + 60.0

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(RunConfig)
        for f in fields(self):
            setattr(self, f.name, _typed(f.name, getattr(self, f.name), hints[f.name]))
        self._check_ranges()

    def _check_ranges(self) -> None:
        cap = max_local_evaluators()
        checks = [
            (all(v >= 1 for v in (self.iterations, self.beam, self.plans, self.codes)),
             "iterations, beam, plans and codes must each be >= 1"),
            (0 < self.dropout <= 1, f"dropout is the keep-probability of each menu option, in (0, 1], "
                                    f"not {self.dropout}"),
            (self.evaluators is None or 0 <= self.evaluators <= cap,
             f"evaluators must be between 0 and {cap} on this host ({EVALUATORS_PER_CORE} per core), not "
             f"{self.evaluators}; start workers on other hosts for more"),
            (all(1 <= n <= 64 for n in (self.planners, self.coders, self.repairers)),
             "planners, coders and repairers must each be between 1 and 64"),
            (self.max_evals is None or self.max_evals >= 1,
             f"max_evals must be >= 1 (the starting kernel is an evaluation too), not {self.max_evals}"),
            (self.patience >= 1, "patience must be >= 1"),
            (self.max_repairs >= 0, "max_repairs must be >= 0"),
            (self.max_cost is None or self.max_cost >= 0, "max_cost must be >= 0"),
            (all(t > 0 for t in (self.heartbeat_s, self.eval_lease_s, self.model_lease_s, self.call_timeout_s)),
             "heartbeat_s, eval_lease_s, llm_lease_s and call_timeout_s must be > 0"),
            (self.call_retries >= 0, "call_retries must be >= 0"),
            (self.max_tokens >= 1024, f"max_tokens must be >= 1024 (a call first asks for half), not {self.max_tokens}"),
            (self.temperature is None or 0 <= self.temperature <= 2, "temperature must be between 0 and 2"),
            (self.reasoning_effort in (None, "low", "medium", "high"),
             f"reasoning_effort must be low, medium or high, not {self.reasoning_effort!r}"),
            (bool(self.model), "at least one --model is needed"),
            (self.model_allocation in ("even", "bandit"),
             f"model_allocation must be even or bandit, not {self.model_allocation!r}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @classmethod
    def from_toml(cls, path: Path) -> dict:
        """The keys of a config file, by name and type (values are checked when the config is built)."""
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from None
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            hints = [f"{k} (did you mean {LEGACY_KEYS[k]}?)" if k in LEGACY_KEYS else k for k in unknown]
            raise ConfigError(f"unknown keys in {path}: {', '.join(hints)}; the keys are the flags of `run` "
                              f"with underscores: {', '.join(sorted(known))}")
        return data

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


LEGACY_KEYS = {"models": "model", "code_models": "code_model"}   # names used by runs made before 0.2


def from_saved(saved: dict) -> dict:
    """A configuration stored by an earlier run, with its keys renamed to today's."""
    return {LEGACY_KEYS.get(k, k): v for k, v in saved.items() if LEGACY_KEYS.get(k, k) in _FIELD_NAMES}


def max_local_evaluators() -> int:
    return EVALUATORS_PER_CORE * (psutil.cpu_count(logical=True) or 1)


# -- resume ---------------------------------------------------------------------------------------
# A resumed run keeps its search (so that stored results replay job for job) and its security
# settings (so that its remote workers reconnect); it may extend its budget and change local processes.
EXTENDABLE = ("iterations", "max_evals", "max_cost", "patience")
LOCAL = ("evaluators", "planners", "coders", "repairers", "preflight", "check_start", "schedule_library", "prices",
         "max_tokens")   # max_tokens: a run whose answers were cut off may continue with a larger limit
SECURITY = ("bind", "curve")


def resume_config(saved: dict, given: dict) -> RunConfig:
    """The saved configuration with the options given on the command line that a resume may change;
    any other option that differs from the saved one is an error naming it."""
    merged = from_saved(saved)
    for key, value in given.items():
        if key in EXTENDABLE or key in LOCAL:
            merged[key] = value
            continue
        if merged.get(key) == value:
            continue
        flag = "--" + key.replace("_", "-")
        if key in SECURITY:
            raise ConfigError(f"{flag} {value} conflicts with the resumed run's {key} {merged.get(key)!r}: a "
                              "resumed run keeps its endpoint and encryption so that its workers reconnect")
        raise ConfigError(f"{flag} cannot change on resume (the run has {key} = {merged.get(key)!r}): it would "
                          f"change the search; only {', '.join('--' + k.replace('_', '-') for k in EXTENDABLE)} "
                          "can extend a run")
    return RunConfig(**{k: v for k, v in merged.items() if k in _FIELD_NAMES})


_FIELD_NAMES = {f.name for f in fields(RunConfig)}


def base_type(hint: Any) -> Any:
    """The type inside an optional hint (int | None -> int); any other hint as it is."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _typed(name: str, value: Any, hint: Any) -> Any:
    """value checked against the field's type hint; ints are accepted where floats are expected."""
    if value is None:
        if type(None) in typing.get_args(hint):
            return None
        raise ConfigError(f"{name} needs a value")
    base = base_type(hint)
    origin = typing.get_origin(base)
    if origin is list:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) \
                or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{name} must be a list of strings, not {value!r}")
        return list(value)
    if base is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, not {value!r}")
        return value
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
        return value
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name} must be a number, not {value!r}")
        return float(value)
    if base is str and not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, not {value!r}")
    return value


# -- the command line -----------------------------------------------------------------------------
WORKER_OPTIONS = ("heartbeat_s", "call_timeout_s", "call_retries", "temperature", "reasoning_effort", "max_tokens")


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def default_of(name: str) -> Any:
    f = _FIELDS[name]
    return f.default_factory() if f.default_factory is not MISSING else f.default


def shown_default(name: str) -> str:
    """How --help shows a default: none, on/off, or the value."""
    value = default_of(name)
    if _FIELDS[name].metadata.get("shown"):
        return _FIELDS[name].metadata["shown"]
    if isinstance(value, list):
        return ", ".join(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def option_specs(names: tuple[str, ...] | None = None) -> list[tuple[str, Any, dict]]:
    """(name, type, metadata) of the options, in declaration order: what a CLI builds its flags from."""
    hints = typing.get_type_hints(RunConfig)
    return [(f.name, hints[f.name], dict(f.metadata)) for f in fields(RunConfig) if names is None or f.name in names]


def as_args(cfg: RunConfig, names: tuple[str, ...]) -> list[str]:
    """The command-line arguments that give another process these options of cfg (workers)."""
    args: list[str] = []
    for name in names:
        value = getattr(cfg, name)
        if value is None:
            continue
        if isinstance(value, bool):
            args.append(flag(name) if value else "--no-" + flag(name)[2:])
        elif isinstance(value, list):
            for item in value:
                args += [flag(name), str(item)]
        else:
            args += [flag(name), str(value)]
    return args


_FIELDS = {f.name: f for f in fields(RunConfig)}
