"""The options of a run: one dataclass whose field names are the command-line flags (with underscores)
and the keys of a --config TOML file, checked for type and range with one-line errors, and the rules
for what a resumed run may change."""
from __future__ import annotations

import tomllib
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import psutil

EVALUATORS_PER_CORE = 4        # more evaluators than this per core only queue for the CPU


class ConfigError(ValueError):
    """An option has a wrong type or value, or cannot change on resume; the message says which and why."""


@dataclass
class RunConfig:
    target: str = "gemmini-sim"
    problem: str = "gemm-512x512x512"
    kernel: str | None = None            # starting kernel file; default: the problem's naive kernel
    out: str | None = None               # run directory; default: runs/<problem>-<time>
    iterations: int = 8
    beam: int = 4
    plans: int = 4
    codes: int = 2
    dropout: float = 0.3                 # keep-probability of each menu option
    seed: int = 0
    model: list[str] = field(default_factory=lambda: ["heuristic"])
    code_model: list[str] = field(default_factory=list)   # default: same as model
    evaluators: int | None = None        # None: one per core; 0: only remote workers
    planners: int = 1
    coders: int = 1
    repairers: int = 1
    max_repairs: int = 1
    patience: int = 3
    max_evals: int | None = None
    stop_roofline: float | None = None
    bind: str = "tcp://127.0.0.1:*"
    curve: bool = False                  # encrypt links with CurveZMQ (keys in RUN_DIR/curve)
    heartbeat_s: float = 1.0
    eval_lease_s: float = 600.0
    llm_lease_s: float = 600.0
    max_cost: float | None = None        # USD; calls in flight count against it
    temperature: float | None = None     # passed to models that accept it
    reasoning_effort: str | None = None  # low | medium | high, for OpenAI reasoning models
    call_timeout_s: float = 600.0        # per model call
    call_retries: int = 4                # the SDK's retries on 429/5xx/timeouts
    replay: str | None = None            # answer model jobs only from this recorded run directory
    preflight: bool = True               # check that every model endpoint answers before agents start
    check_start: bool = True             # evaluate the starting kernel here before agents start (fail fast)

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
            (all(t > 0 for t in (self.heartbeat_s, self.eval_lease_s, self.llm_lease_s, self.call_timeout_s)),
             "heartbeat_s, eval_lease_s, llm_lease_s and call_timeout_s must be > 0"),
            (self.call_retries >= 0, "call_retries must be >= 0"),
            (self.temperature is None or 0 <= self.temperature <= 2, "temperature must be between 0 and 2"),
            (self.reasoning_effort in (None, "low", "medium", "high"),
             f"reasoning_effort must be low, medium or high, not {self.reasoning_effort!r}"),
            (bool(self.model), "at least one --model is needed"),
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
LOCAL = ("evaluators", "planners", "coders", "repairers", "preflight", "check_start")
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


def _typed(name: str, value: Any, hint: Any) -> Any:
    """value checked against the field's type hint; ints are accepted where floats are expected."""
    args = typing.get_args(hint)
    if value is None:
        if type(None) in args:
            return None
        raise ConfigError(f"{name} needs a value")
    base = next((a for a in args if a is not type(None)), hint) if args and type(None) in args else hint
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
