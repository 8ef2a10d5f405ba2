"""Workloads of gemmini-sim: the benchmark shapes come from hw_runners/gemmini_sim/problems/problems.toml,
semantics (arguments, numpy reference, compulsory traffic) from the family
classes below, and any other size by its name (gemm-IxJxK, conv3x3-P-C) within
the limits that keep an evaluation feasible. Inputs are seeded; several input
sets per evaluation cover full-range int8 (saturation), sparse data and small
values (exact sums)."""
from __future__ import annotations

import functools
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autocomp_zmq.hw_runners.base import Problem, ProblemSizeError

INPUT_SETS = ("full-range", "sparse", "small-values")
PROBLEMS = Path(__file__).with_name("problems")   # the target descriptor's problems directory
KERNEL_ROLES = ("naive", "baseline", "tuned", "hwloop")   # every family names one kernel of each
# Parametric sizes stay feasible: the naive kernel issues about 4 instructions per 16x16 tile product
# (about 3 us each to record and replay), and every input set is held in memory several times.
MAX_ELEMENTS = 1 << 24           # per array
MAX_TILE_PRODUCTS = 1 << 20      # about 15 s per evaluation of the naive kernel


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
    pattern: str                      # the parametric name, in words (gemm-IxJxK)
    regex: str                        # and as a regular expression, one group per dim
    tolerance: tuple[float, float] = (0.0, 0.0)   # (atol, rtol): built-in int8 families are exact
    sizes_note = "any sizes >= 1"   # what the parametric name takes, in words
    config: str | None = "int8-16x16"   # the Gemmini configuration it runs on (configs/; None: any, chosen by option)

    def name(self, dims: dict[str, int]) -> str: ...
    def tile_products(self, d: dict[str, int]) -> int: ...   # 16x16x16 products the naive kernel computes

    def dims_of(self, name: str) -> dict[str, int] | None:
        """The sizes a parametric name gives (written as name() writes it), or None."""
        m = re.fullmatch(self.regex, name)
        if not m:
            return None
        dims = dict(zip(self.dim_names, map(int, m.groups()), strict=True))
        return dims if self.name(dims) == name else None

    def size_limit(self, d: dict[str, int]) -> str | None:
        """Why these sizes cannot be evaluated, or None."""
        if min(d.values()) < 1:
            return f"{', '.join(self.dim_names)} must each be at least 1"
        for a in self.args(d):
            if math.prod(a.shape) > MAX_ELEMENTS:
                return (f"{a.name} would hold {math.prod(a.shape):,} elements; at most {MAX_ELEMENTS:,} per array "
                        "keep an evaluation feasible")
        if self.tile_products(d) > MAX_TILE_PRODUCTS:
            return (f"these sizes take {self.tile_products(d):,} 16x16x16 tile products; at most "
                    f"{MAX_TILE_PRODUCTS:,} keep an evaluation under about 15 s")
        return None
    def args(self, d: dict[str, int]) -> list[ArgSpec]: ...
    def macs(self, d: dict[str, int]) -> int: ...
    def reduction_length(self, d: dict[str, int]) -> int: ...
    def reference(self, d: dict[str, int], inputs: list[np.ndarray]) -> np.ndarray: ...

    def defines(self, d: dict[str, int]) -> list[str]:
        return [f"-DAUTOCOMP_{self.key.upper()}"] + [f"-D{k}={v}" for k, v in d.items()]

    def signature(self, d: dict[str, int]) -> str:
        """The entry point's C declaration (what `autocomp_body` puts a kernel's body under)."""
        return _spec(PROBLEMS)["families"][self.key]["signature"]

    def prototype(self, d: dict[str, int]) -> str:
        """The entry point's declaration, if gemmini.h does not make it (it does for the built-in families)."""
        return ""

    def harness_macros(self, d: dict[str, int], names: list[str] | None = None) -> dict[str, str | int]:
        """The macros Autocomp's harness for this problem defines around its kernel (harnesses/<type>/testN.c),
        so that kernels written against that harness (its sols/*_gemmini_baseline.c read their sizes and array
        names from them) compile unchanged. `names`: the entry point's argument names (default the family's)."""
        return {}

    def harness_header(self, d: dict[str, int], names: list[str] | None = None) -> str:
        """harness_macros as #define lines. One named like an argument is left out: the parameter must win."""
        names = names or [a.name for a in self.args(d)]
        return "".join(f"#define {k} {v}\n" for k, v in self.harness_macros(d, names).items() if k not in names)

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
            if np.dtype(a.dtype).kind == "f":
                out.append(_float_inputs(rng, a.shape, kind, small))
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


def _float_inputs(rng: np.random.Generator, shape: tuple[int, ...], kind: str, small: int) -> np.ndarray:
    """float32 inputs: uniform in [-1, 1] (full-range), 90% zeros (sparse), or small integers whose sums are
    exact in float32 (small-values), so that these show accumulation errors no rounding can hide."""
    if kind == "small-values":
        return rng.integers(-small, small + 1, size=shape).astype(np.float32)
    x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    if kind == "sparse":
        x[rng.random(shape) >= 0.1] = 0
    return x


def _saturate(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


class Gemm(Family):
    key = "gemm"
    dim_names = ("I", "J", "K")
    pattern, regex = "gemm-IxJxK", r"gemm-([0-9]+)x([0-9]+)x([0-9]+)"

    def tile_products(self, d):
        return math.ceil(d["I"] / 16) * math.ceil(d["J"] / 16) * math.ceil(d["K"] / 16)

    def name(self, d):
        return f"gemm-{d['I']}x{d['J']}x{d['K']}"

    def args(self, d):
        return [ArgSpec("A", np.int8, (d["I"], d["K"])), ArgSpec("B", np.int8, (d["K"], d["J"])),
                ArgSpec("C", np.int8, (d["I"], d["J"]), output=True)]

    def macs(self, d):
        return d["I"] * d["J"] * d["K"]

    def reduction_length(self, d):
        return d["K"]

    def harness_macros(self, d, names=None):
        a, b, c = names or [a.name for a in self.args(d)]
        # harnesses/exo/testN.c and harnesses/gemm/testN.c: no bias (D) and no transposes, as in this family
        return {"MAT_DIM_I": d["I"], "MAT_DIM_J": d["J"], "MAT_DIM_K": d["K"],
                "A_MATRIX_NAME": a, "B_MATRIX_NAME": b, "C_MATRIX_NAME": c, "OUTPUT_MATRIX_NAME": "C_MATRIX_NAME",
                "A_TRANSPOSE": 0, "B_TRANSPOSE": 0, "NO_BIAS": 1, "REPEATING_BIAS": 0, "SUB_BIAS": 0,
                "ACTIVATION": "NO_ACTIVATION", "A_ROWS": "MAT_DIM_I", "A_COLS": "MAT_DIM_K",
                "B_ROWS": "MAT_DIM_K", "B_COLS": "MAT_DIM_J"}

    def reference(self, d, inputs):
        a, b = inputs
        # float64 products of int8 sum exactly up to 2**53, far beyond K * 2**14
        return _saturate(np.rint(a.astype(np.float64) @ b.astype(np.float64)))


class Conv3x3(Family):
    key = "conv3x3"
    dim_names = ("P", "C")
    pattern, regex = "conv3x3-P-C", r"conv3x3-([0-9]+)-([0-9]+)"

    def tile_products(self, d):
        return 4 * d["P"] * math.ceil(d["P"] / 16) * 9 * math.ceil(d["C"] / 16) ** 2

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

    def harness_macros(self, d, names=None):
        inp, w, bias, out = names or [a.name for a in self.args(d)]
        # harnesses/exo-conv/testN.c (P, C and K are the family's own -D macros). NO_BIAS is 0: these convs add
        # the bias; that harness's NO_BIAS 1 is a leftover of its GEMM harness that neither its reference
        # (tiled_conv_auto with the bias) nor its kernels read, and a kernel honouring it would be wrong there too.
        return {"N": 4, "R": 3, "S": 3, "Q": d["P"], "STRIDE": 1, "INP_ROWS": d["P"] + 2, "INP_COLS": d["P"] + 2,
                "INP_MATRIX_NAME": inp, "WEIGHT_MATRIX_NAME": w, "BIAS_MATRIX_NAME": bias, "OUTPUT_MATRIX_NAME": out,
                "A_TRANSPOSE": 0, "B_TRANSPOSE": 0, "NO_BIAS": 0, "REPEATING_BIAS": 0, "SUB_BIAS": 0,
                "ACTIVATION": "NO_ACTIVATION"}

    def reference(self, d, inputs):
        inp, w, bias = inputs
        p, c = d["P"], d["C"]
        win = np.lib.stride_tricks.sliding_window_view(inp, (3, 3), axis=(1, 2))  # n,p,q,c,r,s
        cols = win.transpose(0, 1, 2, 4, 5, 3).reshape(4 * p * p, 9 * c).astype(np.float64)
        out = cols @ w.reshape(9 * c, c).astype(np.float64) + bias.astype(np.float64)
        return _saturate(np.rint(out)).reshape(4, p, p, c)


FAMILIES: dict[str, Family] = {f.key: f for f in (Gemm(), Conv3x3())}
# TinyMPC's ADMM families (fp32-4x4) add themselves to FAMILIES
import autocomp_zmq.hw_runners.gemmini_sim.admm  # noqa: E402,F401


@functools.cache
def _spec(directory: Path) -> dict:
    return tomllib.loads((directory / "problems.toml").read_text())


def family_problem(target: str, directory: Path, fam: Family, dims: dict[str, int], tags=()) -> Problem:
    """The family's problem at these sizes, with the family's kernels that handle them (a kernel that
    needs sizes in multiples of something says so under [families.KEY.needs] in problems.toml)."""
    meta = _spec(directory)["families"][fam.key]
    needs = meta.get("needs", {})
    kernels = {role: directory / meta[role] for role in KERNEL_ROLES
               if role in meta and all(dims[k] % m == 0 for k, m in needs.get(role, {}).items())}
    desc = meta["description"] + " Entry point: " + meta["signature"] + "." + \
        (" Sizes: " + ", ".join(f"{k}={v}" for k, v in dims.items()) + "." if dims else "")
    return Problem(name=fam.name(dims), target=target, family=fam.key, dims=dims, description=desc,
                   kernels=kernels, tags=tuple(tags))


@functools.cache
def load_problems(target: str, directory: Path) -> tuple[Problem, ...]:
    """The benchmark problems of problems.toml in directory (the target descriptor's problems directory)."""
    spec = _spec(directory)
    return tuple(family_problem(target, directory, fam, dict(zip(fam.dim_names, entry["dims"], strict=True)),
                                entry.get("tags", ()))
                 for key, fam in FAMILIES.items() for entry in spec.get(key, []))


def parametric_problem(target: str, directory: Path, name: str) -> Problem | None:
    """A family's problem named by its pattern at any size within the limits (ProblemSizeError beyond them),
    or None when the name follows no family's pattern."""
    for fam in FAMILIES.values():
        dims = fam.dims_of(name)
        if dims is not None:
            why = fam.size_limit(dims)
            if why:
                raise ProblemSizeError(f"{name}: {why}")
            return family_problem(target, directory, fam, dims)
    return None
