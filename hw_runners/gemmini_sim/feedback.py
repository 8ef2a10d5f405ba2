"""Turn the timing model's counters into metrics and into plain sentences that
can go straight into a planning prompt."""
from __future__ import annotations

from typing import Any

import numpy as np

from autocomp_zmq.hw_runners.gemmini_sim.timing import DIM, TimingConfig

# (counter, sentence) for every stall the model attributes; sentences say what waited on what.
_STALLS = [
    ("wait_ex_ld", "the execute unit waited for mvin data to arrive (load -> compute dependency)"),
    ("wait_ex_ex", "config_ex waited for the array to drain (Gemmini applies it only with no matmul in flight)"),
    ("wait_ex_st", "the execute unit waited for mvouts to drain accumulator rows it overwrites"),
    ("wait_ld_ex", "loads waited for computes to finish reading the scratchpad rows they overwrite"),
    ("wait_ld_st", "loads waited for mvouts on rows they overwrite"),
    ("wait_st_ex", "stores waited for computes to finish their results (compute -> mvout dependency)"),
    ("wait_st_ld", "stores waited for mvins into the rows they read"),
    ("wait_ld_dma", "loads waited for the DMA (at most 2 mvins and 16 row requests in flight)"),
    ("wait_st_dma", "stores were limited by DMA write bandwidth"),
    ("wait_ex_port", "computes waited for mvin data being written into the scratchpad bank they read "
                     "(single-ported banks: writes win)"),
    ("wait_st_port", "mvouts waited for computes writing the accumulator bank they read"),
    ("loop_wait", "the CPU waited for the loop FSMs (at most 2 loops at a time; other instructions wait until "
                  "the loops have issued everything)"),
    ("cpu_stall_ld", "the CPU blocked on a full load queue"),
    ("cpu_stall_ex", "the CPU blocked on a full execute queue"),
    ("cpu_stall_st", "the CPU blocked on a full store queue"),
    ("fence_wait", "the CPU waited in fence() for all queues to drain"),
]


def metrics(stats: dict[str, float], macs: int, compulsory: tuple[int, int], cfg: TimingConfig,
            warnings: list[str] = (), array=None) -> dict[str, Any]:
    """`array`: the Gemmini configuration (configs.GemminiConfig) whose DIM and element sizes count; None:
    the default 16x16 int8 array."""
    dim = array.dim if array is not None else DIM
    elem = np.dtype(array.elem).itemsize if array is not None else 1
    acc = np.dtype(array.acc).itemsize if array is not None else 4
    cycles = max(1, int(stats["cycles"]))
    compute_bound = macs / (dim * dim)
    bw = cfg.dma_bytes_per_cycle
    memory_bound = max(compulsory) / bw  # reads and writes use separate channels
    roofline = max(compute_bound, memory_bound)
    moved = stats["bytes_rd"] + stats["bytes_wr"]
    m: dict[str, Any] = {
        "cycles": cycles,
        "utilization": macs / (dim * dim * cycles),
        "roofline_cycles": round(roofline),
        "roofline_fraction": roofline / cycles,
        "bound": "compute" if compute_bound >= memory_bound else "memory",
        "compute_bound_cycles": round(compute_bound),
        "memory_bound_cycles": round(memory_bound),
        "busy": {q: stats[f"busy_{q}"] / cycles for q in ("ld", "ex", "st")},
        "cpu_issue_busy": stats["cpu_busy"] / cycles,
        "cpu_scalar_cycles": int(stats.get("cpu_work", 0)),
        "bytes_read": int(stats["bytes_rd"]),
        "bytes_written": int(stats["bytes_wr"]),
        "compulsory_bytes": int(sum(compulsory)),
        "traffic_ratio": moved / max(1, sum(compulsory)),
        "spad_kib_used": stats["spad_rows_used"] * dim * elem / 1024,
        "spad_kib_total": cfg.spad_rows * dim * elem / 1024,
        "acc_kib_used": stats["acc_rows_used"] * dim * acc / 1024,
        "acc_kib_total": cfg.acc_rows * dim * acc / 1024,
        "dim": dim,
        "instructions": {k: int(stats[f"count_{k}"]) for k in ("mvin", "mvout", "preload", "compute", "config")},
        "dma_requests": {"read": int(stats.get("rd_requests", 0)), "write": int(stats.get("wr_requests", 0))},
        "fsm_instructions": int(stats["fsm_instrs"]),
        "bank_conflicts": int(stats["bank_conflicts"]),
        "unfused_preloads": int(stats["unfused_preloads"]),
        "macs_issued": int(stats["macs"]),
        "stalls": sorted(((key, stats[key] / cycles) for key, _ in _STALLS if stats.get(key)),
                         key=lambda kv: -kv[1]),
        "warnings": list(warnings),
    }
    return m


def upper_bound(name: str, bound_cycles: int | None, cycles: int) -> dict[str, Any] | None:
    """The ISA profile's upper bound (e.g. the hardware loop's cycles on the same problem) and how close
    this kernel is to it: fraction = bound cycles / these cycles (1.0: as fast as the bound)."""
    if not bound_cycles:
        return None
    return {"name": name, "cycles": bound_cycles, "fraction": bound_cycles / max(1, cycles)}


def text(m: dict[str, Any]) -> str:
    busy = m["busy"]
    ins = m["instructions"]
    lines = [
        f"Latency: {m['cycles']:,} cycles. Array utilization {m['utilization']:.1%} "
        f"(MACs / ({m.get('dim', DIM) ** 2} x cycles)); {m['roofline_fraction']:.1%} of the roofline of "
        f"{m['roofline_cycles']:,} cycles, which is {m['bound']}-bound "
        f"(compute bound {m['compute_bound_cycles']:,}, memory bound {m['memory_bound_cycles']:,} cycles).",
        f"Busy: load unit {busy['ld']:.0%}, execute unit {busy['ex']:.0%}, store unit {busy['st']:.0%}, "
        f"CPU issuing instructions {m['cpu_issue_busy']:.0%} of the time.",
        f"Data moved: {m['bytes_read'] / 1e6:.2f} MB read + {m['bytes_written'] / 1e6:.2f} MB written = "
        f"{m['traffic_ratio']:.1f}x the compulsory minimum of {m['compulsory_bytes'] / 1e6:.2f} MB.",
        f"Scratchpad: {m['spad_kib_used']:.1f} KiB of {m['spad_kib_total']:.0f} KiB used; accumulator: "
        f"{m['acc_kib_used']:.1f} KiB of {m['acc_kib_total']:.0f} KiB used.",
        f"Instructions: {ins['mvin']:,} mvin, {ins['mvout']:,} mvout, {ins['preload']:,} preload, "
        f"{ins['compute']:,} compute, {ins['config']:,} config"
        + (f"; {m['fsm_instructions']:,} issued by the hardware loop FSM." if m["fsm_instructions"] else "."),
    ]
    if m.get("cpu_scalar_cycles"):
        lines.append(f"Scalar code on the CPU kept it busy {m['cpu_scalar_cycles']:,} cycles "
                     f"({m['cpu_scalar_cycles'] / max(1, m['cycles']):.0%} of the latency): Gemmini's software "
                     "library's loop control and address arithmetic per block, and CPU helpers such as add_matrix; "
                     "the hardware loop FSMs and straight-line kernels do not pay it.")
    if m.get("upper_bound"):
        b = m["upper_bound"]
        lines.append(f"Upper bound: {b['name']} takes {b['cycles']:,} cycles on this problem; this kernel is at "
                     f"{b['fraction']:.1%} of {b['name']}.")
    sentences = dict(_STALLS)
    top = [f"{sentences[k]} ({share:.0%} of cycles)" for k, share in m["stalls"][:3] if share >= 0.01]
    if top:
        lines.append("Main stalls: " + "; ".join(top) + ".")
    if m["bank_conflicts"]:
        lines.append(f"{m['bank_conflicts']:,} preload/compute pairs read A and B (or D) from the same "
                     "scratchpad bank and could not overlap.")
    if m["unfused_preloads"]:
        lines.append(f"{m['unfused_preloads']:,} preloads of weights could not overlap the previous compute and "
                     f"cost {m.get('dim', DIM)} cycles each.")
    for w in m["warnings"]:
        lines.append(f"Warning: {w}.")
    return "\n".join(lines)
