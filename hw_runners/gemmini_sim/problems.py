"""Workloads of gemmini-sim: shapes come from problems/gemmini-sim/problems.toml,
semantics (arguments, numpy reference, compulsory traffic) from the family
classes below. Inputs are seeded; several input sets per evaluation cover
full-range int8 (saturation), sparse data and small values (exact sums)."""
from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hw_runners.base import Problem
INPUT_SETS = ("full-range", "sparse", "small-values")
KERNEL_ROLES = ("naive", "baseline", "tuned", "hwloop")   # every family names one kernel of each


@dataclass(frozen=True)
class ArgSpec:
    name: str
    dtype: type
    shape: tuple[int, ...]
    output: bool = False

    @property
    def nbytes(self) -> int:
        return int(np.dtype(self.dtype).itemsize * math.prod(self.shape))


class Family:
    """Semantics shared by all problems of one kind."""
    key: str
    dim_names: tuple[str, ...]

    def name(self, dims: dict[str, int]) -> str: ...
    def args(self, d: dict[str, int]) -> list[ArgSpec]: ...
    def macs(self, d: dict[str, int]) -> int: ...
    def reduction_length(self, d: dict[str, int]) -> int: ...
    def reference(self, d: dict[str, int], inputs: list[np.ndarray]) -> np.ndarray: ...

    def defines(self, d: dict[str, int]) -> list[str]:
        return [f"-DAUTOCOMP_{self.key.upper()}"] + [f"-D{k}={v}" for k, v in d.items()]

    def compulsory_bytes(self, d: dict[str, int]) -> tuple[int, int]:
        """(bytes every schedule must read, bytes it must write)."""
        args = self.args(d)
        return sum(a.nbytes for a in args if not a.output), sum(a.nbytes for a in args if a.output)

    def make_inputs(self, d: dict[str, int], seed: int, kind: str) -> list[np.ndarray]:
        rng = np.random.default_rng([seed, INPUT_SETS.index(kind), *d.values()])
        # "small" values keep most sums inside int8 so accumulation errors cannot hide behind saturation
        small = max(1, round(math.sqrt(150 / math.sqrt(self.reduction_length(d)))))
        out = []
        for a in self.args(d):
            if a.output:
                continue
            if a.dtype is np.int8:
                lo, hi = (-small, small + 1) if kind == "small-values" else (-128, 128)
            else:  # int32 bias
                lo, hi = (-64, 65) if kind == "small-values" else (-(1 << 20), 1 << 20)
            x = rng.integers(lo, hi, size=a.shape, dtype=a.dtype)
            if kind == "sparse":
                x[rng.random(a.shape) >= 0.1] = 0
            out.append(x)
        return out


def _saturate(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


class Gemm(Family):
    key = "gemm"
    dim_names = ("I", "J", "K")

    def name(self, d):
        return f"gemm-{d['I']}x{d['J']}x{d['K']}"

    def args(self, d):
        return [ArgSpec("A", np.int8, (d["I"], d["K"])), ArgSpec("B", np.int8, (d["K"], d["J"])),
                ArgSpec("C", np.int8, (d["I"], d["J"]), output=True)]

    def macs(self, d):
        return d["I"] * d["J"] * d["K"]

    def reduction_length(self, d):
        return d["K"]

    def reference(self, d, inputs):
        a, b = inputs
        # float64 products of int8 sum exactly up to 2**53, far beyond K * 2**14
        return _saturate(np.rint(a.astype(np.float64) @ b.astype(np.float64)))


class Conv3x3(Family):
    key = "conv3x3"
    dim_names = ("P", "C")

    def name(self, d):
        return f"conv3x3-{d['P']}-{d['C']}"

    def defines(self, d):
        return ["-DAUTOCOMP_CONV3X3", f"-DP={d['P']}", f"-DC={d['C']}", f"-DK={d['C']}"]

    def args(self, d):
        p, c = d["P"], d["C"]
        return [ArgSpec("inp", np.int8, (4, p + 2, p + 2, c)), ArgSpec("weights", np.int8, (3, 3, c, c)),
                ArgSpec("bias", np.int32, (1, c)), ArgSpec("output", np.int8, (4, p, p, c), output=True)]

    def macs(self, d):
        return 4 * d["P"] * d["P"] * d["C"] * 9 * d["C"]

    def reduction_length(self, d):
        return 9 * d["C"]

    def reference(self, d, inputs):
        inp, w, bias = inputs
        p, c = d["P"], d["C"]
        win = np.lib.stride_tricks.sliding_window_view(inp, (3, 3), axis=(1, 2))  # n,p,q,c,r,s
        cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(4 * p * p, 9 * c).astype(np.float64)
        out = cols @ w.reshape(9 * c, c).astype(np.float64) + bias.astype(np.float64)
        return _saturate(np.rint(out)).reshape(4, p, p, c)


FAMILIES: dict[str, Family] = {f.key: f for f in (Gemm(), Conv3x3())}


@functools.cache
def load_problems(target: str, directory: Path) -> tuple[Problem, ...]:
    """The problems of problems.toml in directory (the target descriptor's problems directory)."""
    spec = tomllib.loads((directory / "problems.toml").read_text())
    problems = []
    for key, fam in FAMILIES.items():
        meta = spec["families"][key]
        kernels = {role: directory / meta[role] for role in KERNEL_ROLES}
        for entry in spec.get(key, []):
            dims = dict(zip(fam.dim_names, entry["dims"], strict=True))
            desc = meta["description"] + " Entry point: " + meta["signature"] + ". Sizes: " + \
                ", ".join(f"{k}={v}" for k, v in dims.items()) + "."
            problems.append(Problem(name=fam.name(dims), target=target, family=key, dims=dims,
                                    description=desc, kernels=kernels, tags=tuple(entry.get("tags", ()))))
    return tuple(problems)
