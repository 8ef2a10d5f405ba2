"""The cuda target's verdict arithmetic on the evaluator's side: the timed runs' statistics, how they were timed,
achieved rates against the GPU's peaks (measured: latency; derived: FLOP/s and bytes/s from the problem's FLOPs and
compulsory bytes, which count useful work, not what a kernel happens to move), and the feedback a planner reads.
Outputs are compared by the reference child (child/judge_compare.py); the clock checks are clock.py's."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from autocomp_zmq.hw_runners.cuda.gpu import Peaks

def statistics(times_ms: list[float]) -> dict[str, float]:
    """Median (the latency) and spread of the timed runs, in microseconds."""
    us = np.asarray(times_ms, dtype=np.float64) * 1e3
    return {"median_us": float(np.median(us)), "p10_us": float(np.percentile(us, 10)),
            "p90_us": float(np.percentile(us, 90)), "min_us": float(us.min()), "runs": int(us.size)}


def timed_as(device: str, how: str | None, graph_error: str | None) -> str:
    """How the timed runs were timed, as the verdict says it."""
    if device == "cpu":
        return "eager runs (CPU: not GPU times)"
    if how == "graph":
        return "CUDA-graph replays"
    return ("eager runs (forward could not be captured as a CUDA graph: %s; the end event follows a device-wide "
            "synchronize, whose latency is included)" % (graph_error or "?"))


def performance(latency_us: float, flops: int | None, nbytes: int | None, dtype: str,
                peaks: Peaks | None) -> dict[str, Any]:
    """Achieved FLOP/s and bandwidth; against the GPU's peaks where they are known: % of the dtype's peak (tensor
    cores for fp16/bf16; for fp32 both the CUDA-core and the TF32 tensor-core peak), % of DRAM bandwidth, and the
    roofline: the ideal time max(FLOPs / peak, bytes / bandwidth) over the measured time, and which bound it is."""
    seconds = latency_us * 1e-6
    if not flops or not nbytes or seconds <= 0:       # a problem whose work is unknown: latency only
        return {}
    out: dict[str, Any] = {"tflops": flops / seconds / 1e12, "gbs": nbytes / seconds / 1e9}
    if peaks is None:
        return out
    peak = peaks.fp32_flops if dtype == "float32" else peaks.half_flops
    compute_s, memory_s = flops / peak, nbytes / peaks.dram_bytes_s
    out.update({"peak_tflops": peak / 1e12, "peak_gbs": peaks.dram_bytes_s / 1e9,
                "flops_fraction": flops / seconds / peak, "bandwidth_fraction": nbytes / seconds / peaks.dram_bytes_s,
                "roofline_fraction": min(max(compute_s, memory_s) / seconds, 1.0),
                "bound": "compute" if compute_s >= memory_s else "memory",
                "arithmetic_intensity": flops / nbytes if nbytes else math.inf})
    if dtype == "float32":
        out["tf32_fraction"] = flops / seconds / peaks.tf32_flops
    return out


def feedback_text(m: dict[str, Any]) -> str:
    """The lines a planner reads about one correct evaluation; each says whether it is measured or derived."""
    flushed = "L2 flushed before each run; " if m.get("device") == "cuda" else ""
    lines = [f"latency {m['median_us']:.1f} us (median of {m['runs']} {m['timed_as']} after {m['warmup']} warm-up; "
             f"P10 {m['p10_us']:.1f}, P90 {m['p90_us']:.1f}; each on new inputs; {flushed}{m['device_name']})"]
    if m.get("reference_us"):
        lines.append(f"PyTorch reference: {m['reference_us']:.1f} us, timed the same way: "
                     f"{m['reference_us'] / m['median_us']:.2f}x its speed")
    rate = f"{m['tflops']:.2f} TFLOP/s and {m['gbs']:.0f} GB/s of useful work (derived from the problem's FLOPs and " \
           "compulsory bytes)" if "tflops" in m else "no FLOP/s or bandwidth (the problem's FLOPs or bytes are unknown)"
    if "flops_fraction" in m:
        rate += (f": {m['flops_fraction']:.1%} of the {m['peak_tflops']:g} TFLOP/s {m['dtype']} peak, "
                 f"{m['bandwidth_fraction']:.1%} of {m['peak_gbs']:.0f} GB/s DRAM; {m['roofline_fraction']:.1%} of "
                 f"roofline ({m['bound']}-bound, {m['arithmetic_intensity']:.1f} FLOP/byte)")
        if "tf32_fraction" in m:
            rate += f"; {m['tf32_fraction']:.1%} of the TF32 tensor-core peak"
    lines.append(rate)
    ncu = m.get("ncu") or {}
    if ncu:
        lines.append("Nsight Compute (measured, busiest kernel): " + ", ".join(f"{k} {v}" for k, v in ncu.items()))
    elif m.get("ncu_error"):
        lines.append(f"no Nsight Compute metrics ({m['ncu_error']})")
    public = sum(1 for n in m.get("set_names", ()) if n.startswith("public"))
    signed = " (one with torch.rand's draws in [-1, 1))" if "hidden-signed" in m.get("set_names", ()) else ""
    lines.append(f"largest error {m['max_abs_err']:.3g} against the reference on {m['sets']} input sets ({public} "
                 f"public, the rest drawn fresh for this evaluation{signed}) and on every timed run's outputs")
    for name, why in (m.get("dropped_sets") or {}).items():
        lines.append(f"input set {name} not used: {why}")
    return "\n".join(lines)
