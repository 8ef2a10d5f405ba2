"""Row-kernel schedules of the cuda heuristic: softmax over the last dimension, LayerNorm and RMSNorm. Memory-bound
kernels, so the knobs are those that set how often a row crosses HBM and how many bytes are in flight: the method
(three passes over the row, two with online / streaming statistics, or one with the whole row in registers),
BLOCK (columns per step of the looped methods), rows per program (short rows), num_warps, num_stages (loads of
the next step in flight), a persistent grid, and fast math (exp2 and a reciprocal; rsqrt).

SOFTMAX and NORM are the two families (namespaces with the interface codegen.py lists); the kernels are in
rows_body.py.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, replace

from autocomp_zmq.hw_runners.cuda.heuristic import rows_body

SMS = 132
BLOCKS = (256, 512, 1024, 2048, 4096, 8192)
WARPS = (1, 2, 4, 8, 16)
ROWS = (1, 2, 4, 8, 16)
MAX_PER_THREAD = 64        # fp32 row elements per thread: beyond, the row spills out of the registers
METHODS = {"softmax": ("three-pass", "online", "row"), "layernorm": ("three-pass", "two-pass", "row"),
           "rmsnorm": ("two-pass", "row")}
READS = {"three-pass": 3, "online": 2, "two-pass": 2, "row": 1}     # times each row is read from HBM


@dataclass(frozen=True)
class Schedule:
    family: str = "softmax"
    method: str = "three-pass"     # three-pass | online (softmax) | two-pass (norms) | row
    block: int = 1024              # columns per loop step; 0 for `row`, whose block is the row (a power of two)
    rows: int = 1                  # rows per program
    num_warps: int = 4
    num_stages: int = 2            # software pipelining of the column (and persistent row) loops; 1: none
    persistent: bool = False       # a grid of a few programs per SM looping over row blocks
    fast_math: bool = False        # softmax: exp2 of pre-scaled inputs and one reciprocal per row; norms: rsqrt


def _p2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def default(w) -> Schedule:
    """A first Triton kernel that follows the naive CUDA's passes (max, sum, normalise; mean, variance,
    normalise; sum of squares, normalise) but coalesced: one program per row, 1024 columns per step, 4 warps."""
    return Schedule(family=w.family, method=METHODS[w.kind][0],
                    block=max(256, min(1024, _p2(w.sizes["COLS"]))))


def per_thread(s: Schedule, w) -> float:
    width = _p2(w.sizes["COLS"]) if s.method == "row" else s.block
    return s.rows * width / (32 * s.num_warps)


def has_loop(s: Schedule) -> bool:
    return s.method != "row" or s.persistent


def fits(s: Schedule, w) -> bool:
    cols = w.sizes["COLS"]
    width_ok = s.block == 0 if s.method == "row" else (s.block in BLOCKS and s.block <= max(256, _p2(cols)))
    return (s.family == w.family and s.method in METHODS[w.kind] and width_ok and s.rows in ROWS
            and s.rows <= max(1, w.sizes["ROWS"]) and s.num_warps in WARPS and 1 <= s.num_stages <= 4
            and (s.num_stages == 1 or has_loop(s)) and _p2(cols) * s.rows <= 65536
            and 1 <= per_thread(s, w) <= MAX_PER_THREAD)


def _warps(s: Schedule, w) -> Schedule:
    """`s` with the fewest warps that keep its tile in registers: at most 32 fp32 values per thread for a whole row
    (the exponentials or centred values double it), 64 for a loop step."""
    limit = 32 if s.method == "row" else MAX_PER_THREAD
    while per_thread(s, w) > limit and s.num_warps < 16:
        s = replace(s, num_warps=s.num_warps * 2)
    while per_thread(s, w) < 1 and s.num_warps > 1:
        s = replace(s, num_warps=s.num_warps // 2)
    return s


def _method(s: Schedule, w, method: str) -> Schedule:
    if method == "row":
        return _warps(replace(s, method="row", block=0, num_stages=1 if not s.persistent else s.num_stages), w)
    return _warps(replace(s, method=method, block=s.block or max(256, min(2048, _p2(w.sizes["COLS"])))), w)


def candidates(mutation: str, s: Schedule, w) -> list[Schedule]:
    methods = METHODS[w.kind]
    fewer = [m for m in methods if READS[m] < READS[s.method]]
    if mutation == "method":          # fewer trips of each row through HBM
        return [_method(s, w, m) for m in fewer]
    if mutation == "row":
        return [_method(s, w, "row")] if "row" in fewer else []
    if mutation == "online":          # one streaming pass for the statistics instead of two
        return [_method(s, w, m) for m in fewer if m in ("online", "two-pass")]
    if mutation == "block":           # wider steps: more 16-byte loads in flight per thread
        if s.method == "row":
            return []
        return [_warps(replace(s, block=b), w) for b in (s.block * 2, s.block // 2)]
    if mutation == "warps":
        return [replace(s, num_warps=n) for n in (s.num_warps * 2, s.num_warps // 2)]
    if mutation == "rows":            # short rows: several per program amortize the launch and the weights
        return [_warps(replace(s, rows=r), w) for r in (s.rows * 2, s.rows // 2)]
    if mutation == "stages":
        if not has_loop(s):
            return []
        return [replace(s, num_stages=n) for n in (s.num_stages + 1, s.num_stages - 1)]
    if mutation == "persistent":
        return [replace(s, persistent=True)]
    if mutation == "fast":
        return [replace(s, fast_math=True)]
    if mutation == "config":          # known-good points with no more trips through HBM than now: the row in
        # registers over 8-16 warps (Triton's softmax tutorial), alone or persistent, or the fewest-pass loop
        row = _warps(replace(s, method="row", block=0, rows=1, num_stages=1, persistent=False,
                             num_warps=max(4, min(16, _p2(w.sizes["COLS"]) // 512))), w)
        looped = [m for m in methods if m != "row"][-1]
        out = [row, replace(row, persistent=True, num_stages=2),
               _warps(replace(s, method=looped, block=4096, rows=1, num_warps=8, num_stages=2), w)]
        return [c for c in out if READS[c.method] <= READS[s.method]]
    return []


OPTIONS = {
    "row-in-registers": "row",
    "online-softmax": "online",
    "warp-reduce": "warps",
    "occupancy": "warps",
    "grid-shape": "rows",
    "vectorize": "block",
    "ilp-unroll": "block",
    "async-pipeline": "stages",
    "persistent": "persistent",
    "fast-math": "fast",
    "autotune": "config",
    "fuse-ops": "method",           # fewer passes: the statistics and the output from fewer reads of the input
}

SAFER = ({"persistent": False}, {"fast_math": False}, {"num_stages": 1}, {"rows": 1}, {"num_warps": 4})
ERROR_FIRST = {"wrong_result": ({"fast_math": False}, {"persistent": False}),
               "resources": ({"num_stages": 1}, {"rows": 1})}


def normalize(s: Schedule, w) -> Schedule:
    """`s` without settings that do nothing in it (pipelining stages where no loop is left), so equal kernels have
    equal schedules."""
    return s if has_loop(s) else replace(s, num_stages=1)


def _reads(s, w) -> float:
    return READS[s.method] - 1.0      # extra trips of each row through HBM


SCORES = {
    "method": lambda f, s, w: 0.5 + 0.5 * _reads(s, w) + 0.4 * f["gap"],
    "row": lambda f, s, w: 0.5 + 0.5 * _reads(s, w) + 0.4 * f["gap"],
    "online": lambda f, s, w: 0.4 + 0.4 * _reads(s, w) + 0.3 * f["gap"],
    "block": lambda f, s, w: 0.2 + 0.3 * f["gap"],
    "warps": lambda f, s, w: 0.2 + 0.3 * f["gap"] + 0.3 * f["low_occupancy"],
    "rows": lambda f, s, w: 0.15 + (0.6 if w.sizes["COLS"] <= 1024 else 0.0),
    "stages": lambda f, s, w: 0.2 + 0.3 * f["gap"],
    "persistent": lambda f, s, w: 0.15 + 0.3 * f["gap"] * min(1.0, w.sizes["ROWS"] / (8 * SMS)),
    "fast": lambda f, s, w: 0.1 + 0.4 * f["compute"],
    "config": lambda f, s, w: 0.3 + 0.3 * f["gap"],
}


def describe(s: Schedule, w=None) -> str:
    how = {"three-pass": "three passes over each row", "online": "online max/sum pass then a normalising pass",
           "two-pass": "a statistics pass then a normalising pass", "row": "the whole row in registers"}[s.method]
    width = "" if s.method == "row" else f", {s.block} columns per step"
    extra = [t for flag, t in ((s.persistent, "persistent"), (s.fast_math, "fast math")) if flag]
    return (f"{how}{width}, {s.rows} row(s) per program, {s.num_warps} warps, {s.num_stages} stage(s)"
            + "".join(", " + t for t in extra))


def guess(code: str, w) -> Schedule | None:
    """Another author's kernel: a whole row per program when it loads next_power_of_2 of the row length."""
    if "next_power_of_2" in (code or "") and "triton" in code:
        return _method(default(w), w, "row")
    return None


def render(s: Schedule, w) -> str:
    return rows_body.render(s, w, describe(s, w))


def _namespace(family: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(Schedule=Schedule, default=default, fits=fits, candidates=candidates,
                                 normalize=normalize, OPTIONS=OPTIONS, SAFER=SAFER, ERROR_FIRST=ERROR_FIRST,
                                 SCORES=SCORES, describe=describe, guess=guess, render=render, name=family)


SOFTMAX = _namespace("softmax")
NORM = _namespace("norm")
