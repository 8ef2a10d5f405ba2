"""gemmini-sim's Gemmini configurations, as data: configs/<name>.toml holds each one's array (DIM, element and
accumulator types) and every Gemmini timing parameter with the Scala configuration parameter it comes from.
This module owns reading them, choosing one per problem (the problem's own, else `--target-option
config=NAME`, else the default) and the compiler flag that builds the shim and the replayer for it (the C side
is compile-time: csrc/include/gemmini_params.h selects the configuration's header)."""
from __future__ import annotations

import dataclasses
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig, array_latency

DIRECTORY = Path(__file__).with_name("configs")
DEFAULT = "int8-16x16"
# not Gemmini's parameters but the SoC's (memory system, Rocket core) or the simulator's: the same in every
# configuration, TimingConfig's defaults
PLATFORM = ("dma_latency", "cpu_issue_cycles", "library_hwloop", "library_block_cycles", "library_conv_block_cycles",
            "scalar_call_cycles", "scalar_add_cycles", "scalar_negate_cycles", "max_instructions")
_TYPES = {"int8": np.int8, "int32": np.int32, "float32": np.float32}


@dataclass(frozen=True)
class GemminiConfig:
    name: str
    scala: str                      # the Scala configuration it describes
    description: str
    dim: int                        # systolic array rows = columns
    elem: type                      # scratchpad element (numpy type)
    acc: type                       # accumulator element
    define: str | None              # the C macro that selects its gemmini_params header (None: the default)
    timing: TimingConfig
    sources: dict[str, str]         # parameter -> the Scala fact behind it

    @property
    def is_float(self) -> bool:
        return np.dtype(self.elem).kind == "f"

    @property
    def cflags(self) -> list[str]:
        return [f"-D{self.define}"] if self.define else []

    @property
    def macs_per_cycle(self) -> int:
        return self.dim * self.dim

    @property
    def array_latency(self) -> int:
        """csrc/timing.c array_latency at this DIM (TimingConfig.array_latency is the 16x16 array's)."""
        return array_latency(self.timing, self.dim)

    def with_overrides(self, overrides: dict[str, int]) -> "GemminiConfig":
        """This configuration with some timing parameters replaced (the target's `timing` option)."""
        if not overrides:
            return self
        return dataclasses.replace(self, timing=TimingConfig.from_dict({**dataclasses.asdict(self.timing),
                                                                        **overrides}))


def _load(path: Path) -> GemminiConfig:
    data = tomllib.loads(path.read_text())
    where = f"{path.name}"

    def entry(table: dict, key: str) -> tuple:
        e = table.get(key)
        if not isinstance(e, dict) or set(e) != {"value", "source"} or not str(e["source"]).strip():
            raise ValueError(f"{where}: {key} must be {{value = ..., source = \"the Scala parameter\"}}")
        return e["value"], e["source"]

    sources, values = {}, {}
    for key in ("dim", "elem", "acc"):
        values[key], sources[key] = entry(data, key)
    timing = data.get("timing", {})
    for key in timing:
        if key in PLATFORM:
            raise ValueError(f"{where}: timing.{key} is the platform's, not Gemmini's: it is TimingConfig's default")
        values[key], sources[key] = entry(timing, key)
    missing = {f.name for f in dataclasses.fields(TimingConfig)} - set(PLATFORM) - set(timing)
    if missing:
        raise ValueError(f"{where}: no value for {', '.join(sorted(missing))}")
    if values["elem"] not in _TYPES or values["acc"] not in _TYPES:
        raise ValueError(f"{where}: elem and acc are among {', '.join(_TYPES)}")
    return GemminiConfig(name=data["name"], scala=data["scala"], description=data["description"],
                         dim=int(values["dim"]), elem=_TYPES[values["elem"]], acc=_TYPES[values["acc"]],
                         define=data.get("define"), sources=sources,
                         timing=TimingConfig.from_dict({k: timing[k]["value"] for k in timing}))


@functools.cache
def configs() -> dict[str, GemminiConfig]:
    found = {p.stem: _load(p) for p in sorted(DIRECTORY.glob("*.toml"))}
    for stem, cfg in found.items():
        if cfg.name != stem:
            raise ValueError(f"configs/{stem}.toml names itself {cfg.name!r}")
    return found


def names() -> tuple[str, ...]:
    return tuple(configs())


def get(name: str) -> GemminiConfig:
    try:
        return configs()[name]
    except KeyError:
        raise ValueError(f"unknown gemmini-sim configuration {name!r} (known: {', '.join(configs())})") from None


def choose(problem_config: str | None, option: str | None) -> GemminiConfig:
    """The configuration a problem runs on: its own when it names one (the option may not contradict it),
    else the target's `config` option, else the default."""
    if problem_config and option and problem_config != option:
        raise ValueError(f"this problem runs on the {problem_config} configuration; --target-option "
                         f"config={option} names another (leave the option out for this problem)")
    return get(problem_config or option or DEFAULT)
