"""The cuda target's verdict arithmetic, all on the evaluator's side and all from data it checks: outputs against the
reference's, the timed runs' statistics, the judge's clock against the runs' events, and achieved rates against the
GPU's peaks (measured: latency; derived: FLOP/s and bytes/s from the problem's declared FLOPs and compulsory bytes,
which count useful work, not what a kernel happens to move)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from autocomp_zmq.hw_runners.cuda.gpu import Peaks

RESULT_LIMIT = 4 << 20


def read_json(path: Path, limit: int = RESULT_LIMIT) -> Any:
    """A JSON file a child wrote, or None (missing, too large, not JSON)."""
    try:
        if path.stat().st_size > limit:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def mismatch(name: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> str | None:
    """Why `got` is not `want` within |got - want| <= atol + rtol * |want| (shape, NaN/Inf, the worst element), or
    None."""
    if got.shape != want.shape:
        return f"{name} has shape {list(got.shape)}, expected {list(want.shape)}"
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    bad_values = ~np.isfinite(got64) & np.isfinite(want64)
    if bad_values.any():
        where = tuple(int(i) for i in np.argwhere(bad_values)[0])
        return f"{name} has {int(bad_values.sum()):,} NaN/Inf elements where the reference is finite (first at {where})"
    err = np.abs(got64 - want64)
    excess = err - (atol + rtol * np.abs(want64))
    excess[~np.isfinite(excess)] = 0.0
    if (excess > 0).any():
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), excess.shape))
        return (f"{int((excess > 0).sum()):,} of {excess.size:,} elements of {name} are outside the tolerance (atol "
                f"{atol:g}, rtol {rtol:g}); worst at {list(worst)}: got {got64[worst]:.6g}, expected {want64[worst]:.6g}")
    return None


def max_error(got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape or not got.size:
        return 0.0
    return float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))))


def statistics(times_ms: list[float]) -> dict[str, float]:
    """Median (the latency) and spread of the timed runs, in microseconds."""
    us = np.asarray(times_ms, dtype=np.float64) * 1e3
    return {"median_us": float(np.median(us)), "p10_us": float(np.percentile(us, 10)),
            "p90_us": float(np.percentile(us, 90)), "min_us": float(us.min()), "runs": int(us.size)}


# how far the judge's clock may be from the reported times plus the loop's cost: (seconds, share of the wall time).
# On the CPU check (a shared, loaded CPU; Triton's interpreter) two processes' loops vary far more than on a GPU.
CLOCK_SLACK = {"cuda": (0.02, 0.15), "cpu": (0.25, 0.5)}


def timing_doubt(wall_s: float, times_ms: list[float], ref_loop_s: float, ref_times_ms: list[float],
                 timed_ms: list[float], device: str = "cuda") -> str | None:
    """Why the candidate's reported run times cannot be the device's, or None. The evaluator's own clock saw the
    candidate's timed loop take `wall_s`; the same loop around the reference (trusted: making each run's inputs,
    flushing L2, synchronizing, saving outputs) cost its wall time minus its runs, so the candidate's runs should
    account for the rest. And a median far below the typical run (the fastest 80%) is a distribution no device
    produces: times shaped to lower the median."""
    overhead = max(ref_loop_s - sum(ref_times_ms) / 1e3, 0.0)
    expected = sum(times_ms) / 1e3 + overhead
    floor, share = CLOCK_SLACK[device]
    if abs(wall_s - expected) > max(floor, share * wall_s):
        return (f"the judge's clock saw {wall_s:.3f} s for the timed runs, but the runs' reported times and the loop "
                f"around them (what it cost the reference) account for {expected:.3f} s: the reported times are not "
                "the device's, or work was done outside the runs")
    fast = sorted(timed_ms)[:max(1, int(len(timed_ms) * 0.8))]
    if float(np.median(timed_ms)) < 0.8 * (sum(fast) / len(fast)):
        return "the timed runs' reported times are bimodal around a median far below the typical run"
    return None


def performance(latency_us: float, flops: int, nbytes: int, dtype: str, peaks: Peaks | None) -> dict[str, Any]:
    """Achieved FLOP/s and bandwidth; against the GPU's peaks where they are known: % of the dtype's peak (tensor
    cores for fp16/bf16; for fp32 both the CUDA-core and the TF32 tensor-core peak), % of DRAM bandwidth, and the
    roofline: the ideal time max(FLOPs / peak, bytes / bandwidth) over the measured time, and which bound it is."""
    seconds = latency_us * 1e-6
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
           "compulsory bytes)"
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
    lines.append(f"largest error {m['max_abs_err']:.3g} against the reference on {m['sets']} input sets "
                 "(2 public, the rest drawn fresh for this evaluation)")
    return "\n".join(lines)
