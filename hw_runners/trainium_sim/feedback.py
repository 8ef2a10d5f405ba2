"""What the planner learns from one trainium-sim evaluation: where the time went and what binds."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.capabilities import ENGINE_NAMES
from autocomp_zmq.hw_runners.trainium_sim.costmodel import Layout, Timeline

CYCLE_GHZ = 1.4     # cycles are reported at the Scalar clock (1.4 GHz on NeuronCore-v2; params' scalar_clock_ghz)


def metrics(tl: Timeline, lay: Layout, p: dict, flops: int, compulsory: tuple[int, int]) -> dict:
    total_us = tl.total_ns / 1000.0
    busy = {ENGINE_NAMES[e]: tl.busy_ns.get(e, 0.0) / max(tl.total_ns, 1e-9) for e in ENGINE_NAMES}
    binding = max(busy, key=busy.get) if any(busy.values()) else "none"
    dma_peak_gbps = p["dma_queues"] * p["dma_queue_gbps"]          # per direction (loads, stores)
    need = sum(compulsory)
    bound_ns = max(compulsory[0] / dma_peak_gbps, compulsory[1] / dma_peak_gbps, need / p["hbm_gbps_per_core"],
                   flops / (p["tensor_peak_bf16_tflops"] * 1e3))
    waits = sorted(((ENGINE_NAMES[a], ENGINE_NAMES[b], ns / 1000.0) for (a, b), ns in tl.waits_ns.items()),
                   key=lambda w: -w[2])[:4]
    sites = sorted(((line, ENGINE_NAMES[e], ns / 1000.0) for (line, e), ns in tl.site_ns.items()),
                   key=lambda s: -s[2])[:6]
    return {
        "latency_us": round(total_us, 3),
        "cycles": int(round(tl.total_ns * p.get("scalar_clock_ghz", CYCLE_GHZ))),
        "cycle_ghz": p.get("scalar_clock_ghz", CYCLE_GHZ),
        "engine_busy": {k: round(v, 4) for k, v in busy.items()},
        "binding_engine": binding,
        "instructions": {ENGINE_NAMES[e]: n for e, n in tl.counts.items()},
        "dma_bytes": tl.dma_bytes,
        "compulsory_bytes": need,
        "dma_small_rows": tl.dma_small_rows,
        "sbuf_kib_per_partition": round(lay.sbuf_bytes / 1024, 1),
        "sbuf_usable_kib": int(p["sbuf_usable_partition_bytes"]) // 1024,   # what a kernel may use (the limit)
        "psum_banks": lay.psum_banks,
        "spilled_lines": sorted(site for _, site in lay.spilled),
        "spill_bytes": tl.spill_bytes,
        "bound_us": round(bound_ns / 1000.0, 3),
        "roofline_fraction": round(min(1.0, bound_ns / max(tl.total_ns, 1e-9)), 4),
        "utilization": round(busy.get(binding, 0.0), 4),
        "stalls": [{"engine": a, "waited_for": b, "us": round(us, 3)} for a, b, us in waits],
        "hot_lines": [{"line": line, "engine": e, "us": round(us, 3)} for line, e, us in sites],
    }


def text(m: dict) -> str:
    busy = ", ".join(f"{k} {v:.0%}" for k, v in sorted(m["engine_busy"].items(), key=lambda kv: -kv[1]))
    lines = [f"latency {m['latency_us']:,.2f} us ({m['cycles']:,} cycles at {m.get('cycle_ghz', CYCLE_GHZ):g} GHz); "
             f"{m['roofline_fraction']:.1%} of the roofline bound {m['bound_us']:,.2f} us",
             f"engine busy: {busy}; binding engine: {m['binding_engine']}",
             "instructions: " + ", ".join(f"{k} {v:,}" for k, v in m["instructions"].items()),
             f"DMA traffic {m['dma_bytes'] / 2**20:,.2f} MiB vs {m['compulsory_bytes'] / 2**20:,.2f} MiB compulsory"
             + (f"; {m['dma_small_rows']:,} transfers move rows under 512 contiguous bytes (inefficient DMA)"
                if m["dma_small_rows"] else ""),
             f"on-chip memory: SBUF {m['sbuf_kib_per_partition']} KiB of the {m.get('sbuf_usable_kib', 176)} KiB per "
             "partition a kernel may use, "
             f"PSUM {m['psum_banks']} of 8 banks"]
    if m.get("spilled_lines"):
        lines.append(f"SBUF or PSUM over-full: the tiles of kernel lines {', '.join(map(str, m['spilled_lines']))} were "
                     f"spilled to HBM ({m['spill_bytes'] / 2**20:,.2f} MiB stored and reloaded); fewer or smaller "
                     "tiles alive at once avoid it")
    if m["stalls"]:
        lines.append("main stalls: " + "; ".join(f"{s['engine']} waited {s['us']:,.2f} us for {s['waited_for']}"
                                                 for s in m["stalls"]))
    if m["hot_lines"]:
        lines.append("busiest kernel lines: " + "; ".join(f"line {h['line']} ({h['engine']}) {h['us']:,.2f} us"
                                                         for h in m["hot_lines"]))
    return "\n".join(lines)
