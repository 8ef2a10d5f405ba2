"""What each menu option does to a gemmini-sim schedule (its mutation), the candidate schedules it
yields (block sizes re-chosen with the cost model of model.py for the changed schedule, best
first), and how strongly the evaluator's feedback and the model point at it."""
from __future__ import annotations

import math
from dataclasses import replace
from itertools import product

from autocomp_zmq.hw_runners.gemmini_sim.heuristic.conv import ConvSchedule
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.gemm import GemmSchedule
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.machine import DIM, tiles
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.model import conv_cycles, gemm_cycles

Schedule = GemmSchedule | ConvSchedule

# menu option id -> mutation name, per problem family (options not listed do not apply)
OPTION_MUTATIONS = {
    "gemm": {"tile-sizes": "tile", "loop-reorder": "loop_order", "double-buffer-spad": "double_buffer",
             "double-buffer-acc": "double_acc", "panel-reuse": "panel", "acc-k-reduction": "k_resident",
             "hoist-invariants": "panel", "software-pipeline": "prefetch", "wide-mvin": "wide_mvin",
             "cut-intrinsics": "wide", "bank-separation": "split_banks", "weight-reuse": "weight_reuse",
             "spread-stores": "spread", "mvin-ids": "hoist", "remove-fences": "hoist",
             "loop-ws": "hardware_loop", "loop-ws-blocks": "fsm_block"},
    "conv3x3": {"tile-sizes": "tile", "acc-k-reduction": "tile", "loop-reorder": "weight_reuse",
                "panel-reuse": "weight_resident", "hoist-invariants": "weight_resident",
                "double-buffer-spad": "double_buffer", "double-buffer-acc": "double_acc",
                "software-pipeline": "prefetch", "bias-broadcast": "prefetch", "conv-input-reuse": "input_reuse",
                "wide-mvin": "wide_mvin", "cut-intrinsics": "wide", "bank-separation": "split_banks",
                "weight-reuse": "weight_reuse", "full-array-rows": "weight_reuse", "spread-stores": "spread",
                "mvin-ids": "hoist", "remove-fences": "hoist",
                "loop-conv-ws": "hardware_loop", "conv-flatten-loop-ws": "hardware_loop"},
}

# flag changes of each mutation: the first is the mutation itself, the others are variants
FLAGS = {
    "double_buffer": [{"double_buffer": True}, {"double_buffer": True, "prefetch": True}],
    "prefetch": [{"double_buffer": True, "prefetch": True},
                 {"double_buffer": True, "prefetch": True, "double_acc": True, "spread_stores": True}],
    "double_acc": [{"double_acc": True}, {"double_acc": True, "spread_stores": True}],
    "spread": [{"double_acc": True, "spread_stores": True}],
    "wide_mvin": [{"wide_mvin": True}, {"wide_mvin": True, "wide_mvout": True}],
    "wide": [{"wide_mvin": True, "wide_mvout": True}],
    "split_banks": [{"split_banks": True}],
    "weight_resident": [{"weight_resident": True}, {"weight_resident": True, "input_reuse": True}],
    "input_reuse": [{"input_reuse": True}, {"input_reuse": True, "weight_resident": True}],
}


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def largest_divisor(n: int, cap: int) -> int:
    return max(k for k in divisors(n) if k <= max(1, cap))


def predict(s: Schedule, d: dict) -> float:
    """Estimated cycles of a schedule."""
    if isinstance(s, GemmSchedule):
        return fsm_gemm_cycles(s, d) if s.mode == "fsm" else gemm_cycles(s, d)
    if s.mode == "fsm":
        p, c = d["P"], d["C"]
        return 4 * p * p * 9 * c * c / 256 * 1.03
    return conv_cycles(s, d)


def fsm_gemm_cycles(s: GemmSchedule, d: dict) -> float:
    """Cycles of gemmini_loop_ws blocks: each call computes and loads in parallel, plus pipeline time."""
    ni, nj, nk = tiles(d["I"]), tiles(d["J"]), tiles(d["K"])
    calls = (ni // s.ti) * (nj // s.tj) * (nk // s.tk)
    return calls * (max(s.ti * s.tj * s.tk, s.tk * (s.ti + s.tj)) + 4) * DIM + calls * s.tk * (s.ti + s.tj)


def best_fsm_block(d: dict) -> GemmSchedule:
    """Block that balances loads against computes within the loop FSM's half of the memories."""
    ni, nj, nk = tiles(d["I"]), tiles(d["J"]), tiles(d["K"])
    blocks = [GemmSchedule(mode="fsm", ti=ti, tj=tj, tk=tk)
              for ti, tj, tk in product(divisors(ni), divisors(nj), divisors(nk))]
    return min((b for b in blocks if b.fits(d)), key=lambda b: (fsm_gemm_cycles(b, d), -b.tk))


def retile(s: Schedule, d: dict, n: int = 2, fixed: dict | None = None) -> list[Schedule]:
    """The n best block sizes (by the model) for schedule s's flags; `fixed` pins some fields."""
    fixed = fixed or {}
    if isinstance(s, GemmSchedule):
        grid = {"ti": divisors(tiles(d["I"])), "tj": divisors(tiles(d["J"])), "tk": divisors(tiles(d["K"])),
                "order": ["ij", "ji"]}
    else:
        grid = {"kt": divisors(d["C"] // DIM), "rows": divisors(d["P"])}
    for k, v in fixed.items():
        grid[k] = [v]
    options = []
    for values in product(*grid.values()):
        c = replace(s, **dict(zip(grid, values)))
        if isinstance(c, GemmSchedule) and c.order != s.order and c.tk != tiles(d["K"]):
            continue   # with K split every block loads both operands: the block order changes nothing
        if c.fits(d):
            options.append((predict(c, d), c))
    options.sort(key=lambda o: o[0])
    return [c for _, c in options[:n]]


def _with_flags(s: Schedule, d: dict, flags: list[dict]) -> list[Schedule]:
    out = []
    for change in flags:
        changed = replace(s, **{k: v for k, v in change.items() if hasattr(s, k)})
        if changed == s:
            continue
        out += retile(changed, d, 2)
        if changed.fits(d):
            out.append(changed)
    return out


def candidates(mutation: str, s: Schedule, d: dict, own: bool = True) -> list[Schedule]:
    """Schedules the mutation leads to from s, best (by the model) first; empty if it does not apply."""
    gemm = isinstance(s, GemmSchedule)
    if mutation == "hardware_loop":
        if s.mode != "cpu":
            return []
        return [best_fsm_block(d)] if gemm else [ConvSchedule(mode="fsm")]
    if mutation == "fsm_block":
        if not gemm or s.mode != "fsm":
            return []
        n = {"ti": tiles(d["I"]), "tj": tiles(d["J"]), "tk": tiles(d["K"])}
        out = [replace(s, **{k: v}) for k in n for v in (getattr(s, k) * 2, getattr(s, k) // 2) if 1 <= v <= n[k]]
        out = [c for c in out if c.fits(d)]
        return sorted(out, key=lambda c: predict(c, d))
    if s.mode != "cpu":
        return []
    if mutation == "hoist":   # configs and invariant loads out of the loops: what the reference schedule is
        out = [] if own else [s] + retile(s, d, 1)
    elif mutation == "tile":
        out = retile(s, d, 4)
    elif mutation in ("panel", "k_resident"):
        if not gemm:
            return []
        nk = tiles(d["K"])
        sizes = [nk] if mutation == "panel" else [k for k in divisors(nk) if k > s.tk]
        out = [c for tk in sizes for c in retile(s, d, 2, {"tk": tk})]
    elif mutation == "loop_order":
        if not gemm:
            return []
        flip = "ji" if s.order == "ij" else "ij"   # which panel stays resident: only with all of K per block
        out = retile(s, d, 2, {"order": flip, "tk": tiles(d["K"])})
        out += retile(replace(s, weight_reuse=not s.weight_reuse), d, 1)
    elif mutation == "weight_reuse":
        out = _with_flags(s, d, [{"weight_reuse": True}]) if not s.weight_reuse else []
    elif mutation in FLAGS:
        out = _with_flags(s, d, FLAGS[mutation])
    else:
        return []
    seen, unique = set(), []
    for c in out:
        if c.fits(d) and (c != s or mutation == "hoist") and c not in seen:
            seen.add(c)
            unique.append(c)
    return sorted(unique, key=lambda c: predict(c, d))[:4]


def _stall(m: dict, *keys: str) -> float:
    return sum(share for k, share in m.get("stalls", []) if k in keys)


def hint(mutation: str, m: dict) -> float:
    """How strongly the evaluator's feedback points at this kind of change (0: not at all)."""
    ins = m.get("instructions", {})
    computes = max(1, ins.get("compute", 1))
    side = (ins.get("mvin", 0) + ins.get("mvout", 0) + ins.get("config", 0)) / computes
    loads = _stall(m, "wait_ex_ld", "wait_ld_ex", "cpu_stall_ld", "wait_ld_dma")
    stores = _stall(m, "wait_ex_st", "cpu_stall_st", "wait_st_ex", "wait_ld_st", "wait_st_dma")
    ports = _stall(m, "wait_ex_port", "wait_st_port") + m.get("bank_conflicts", 0) / computes
    traffic = math.log2(max(1.0, m.get("traffic_ratio", 1.0)))
    cpu = m.get("cpu_issue_busy", 0.0)
    return {
        "hardware_loop": cpu, "fsm_block": 1.0 - m.get("roofline_fraction", 0.0),
        "tile": 0.15 * traffic, "panel": 0.15 * traffic, "k_resident": 0.1 * traffic,
        "weight_resident": 0.15 * traffic, "input_reuse": 0.1 * traffic,
        "double_buffer": loads, "prefetch": loads, "double_acc": stores, "spread": stores,
        "wide_mvin": cpu * side + _stall(m, "cpu_stall_ld", "wait_ld_dma"), "wide": cpu * side,
        "split_banks": ports, "weight_reuse": m.get("unfused_preloads", 0) / computes + ports / 2,
        "loop_order": 0.0, "hoist": ins.get("config", 0) / computes,
    }.get(mutation, 0.0)


def score(mutation: str, s: Schedule, cands: list[Schedule], d: dict, metrics: dict) -> float:
    """Predicted speedup of the mutation's best candidate, raised by what the feedback points at."""
    gain = predict(s, d) / max(1.0, predict(cands[0], d)) if cands else 0.0
    return gain * (1.0 + hint(mutation, metrics))


def adapt(prior: Schedule, d: dict) -> Schedule:
    """A schedule recorded on another shape, fitted to this one: block sizes become divisors of the new
    tile counts no larger than before (halved further until everything fits); flags stay."""
    if isinstance(prior, GemmSchedule):
        s = replace(prior, ti=largest_divisor(tiles(d["I"]), prior.ti), tj=largest_divisor(tiles(d["J"]), prior.tj),
                    tk=largest_divisor(tiles(d["K"]), prior.tk))
        keys, counts = ("tk", "ti", "tj"), {"ti": tiles(d["I"]), "tj": tiles(d["J"]), "tk": tiles(d["K"])}
    else:
        s = replace(prior, kt=largest_divisor(d["C"] // DIM, prior.kt), rows=largest_divisor(d["P"], prior.rows))
        keys, counts = ("rows", "kt"), {"kt": d["C"] // DIM, "rows": d["P"]}
    for _ in range(16):
        if s.fits(d):
            return s
        key = max(keys, key=lambda k: getattr(s, k))
        if getattr(s, key) == 1:
            break
        s = replace(s, **{key: largest_divisor(counts[key], getattr(s, key) // 2)})
    return s
