"""Reading what an evaluation on Trainium produced: the harness's result.json, the profiler's
summary, the outputs against the reference, and the numbers and words fed back to the agents.

Everything here is pure (files in, data out) and parses defensively: a missing or odd profile
gives feedback without utilisation, never an exception.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.platforms import PLATFORMS
from autocomp_zmq.hw_runners.trainium_sim.platforms import params as platform_params

RESULT_LIMIT = 1 << 20          # result.json is written by the process that ran candidate code
PROFILE_LIMIT = 16 << 20        # the summary is a few KiB; a full per-instruction dump is not wanted


@dataclass(frozen=True)
class Peak:
    """Peak rates of the NeuronCore one evaluation runs on."""
    bf16_flops: float
    fp32_flops: float
    hbm_bytes_s: float


def _peak(platform: str) -> Peak:
    """One physical NeuronCore's peaks, from the figures trainium-sim simulates (hw_runners/trainium_sim/params*.toml,
    each citing AWS's architecture guide for NKI: trn1 92 BF16 / 23 FP32 TFLOPS and 410 GB/s of HBM, trn2 79 / 20 and
    375, trn3 79 / 20 and 587.5). AWS's product pages give chip totals a few per cent apart (trn2 2.9 TB/s, trn3 671
    BF16 TFLOPS and 4.9 TB/s over 8 cores); the per-core guide figures are the ones NKI kernel authors use. The
    runtime's logical core groups `lnc` physical ones, which the caller multiplies in (scaled)."""
    p = platform_params(platform)
    return Peak(p["tensor_peak_bf16_tflops"] * 1e12, p["tensor_peak_fp32_tflops"] * 1e12, p["hbm_gbps_per_core"] * 1e9)


PEAKS = {name: _peak(name) for name in PLATFORMS}


def scaled(peak: Peak, cores: int) -> Peak:
    return Peak(peak.bf16_flops * cores, peak.fp32_flops * cores, peak.hbm_bytes_s * cores)


def read_json(path: Path, limit: int, after_log_lines: bool = False) -> Any:
    """A JSON file written by an untrusted or external program; None when missing, too big or not JSON.
    after_log_lines: a tool's captured output, whose JSON document may follow lines it logged first (the
    first line that starts a JSON object or array, to the end of that document)."""
    try:
        if path.stat().st_size > limit:
            return None
        text = path.read_bytes().decode("utf-8", errors="replace")
        if not after_log_lines:
            return json.loads(text)
        decoder = json.JSONDecoder()
        for m in re.finditer(r"^[ \t]*[\[{]", text, flags=re.M):
            try:
                return decoder.raw_decode(text, m.end() - 1)[0]
            except ValueError:
                continue
        return None
    except (OSError, ValueError):
        return None


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


# nki.benchmark's percentiles ("Available percentiles: [0, 1, 10, 25, 50, 90, 99, 100]",
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.benchmark.html)
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)
PERCENTILE_KEYS = tuple(f"p{p}" for p in PERCENTILES)


def latencies(result: dict) -> dict[str, float]:
    """The benchmark's latency percentiles in us ({"p50": ..., "p99": ...}); {} if P50/P99 are not sane."""
    raw = result.get("latency_us") if isinstance(result, dict) else None
    if not isinstance(raw, dict):
        return {}
    out = {k: v for k, v in ((k, _positive(raw.get(k))) for k in PERCENTILE_KEYS) if v}
    return out if "p50" in out and "p99" in out else {}


# -- the profiler's summary ---------------------------------------------------------------------------
# `neuron-explorer view --output-format summary-json` (neuron-profile before SDK 2.30, same arguments and summary:
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/migration-faq.html) prints one object keyed by the profiled graph, whose
# value holds the summary metrics: total_time (seconds on the device), <engine>_active_time (seconds) and
# <engine>_active_time_percent for tensor/vector/scalar/gpsimd engines, dma_active_time, hbm_read_bytes,
# hbm_write_bytes, mfu_estimated_percent, spill_save_bytes, ... The tool is documented at
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/profiler/neuron-profile-user-guide.html; the
# field names are those its summary prints (seen in public scripts that parse it, not in a documented
# schema), hence the defensive reading. The full `--output-format json` is a per-instruction dump, and
# is being retired in favour of Parquet (announced for after Neuron 2.33), so the summary is what we ask for.
ENGINES = (("tensor", "tensor_engine"), ("vector", "vector_engine"), ("scalar", "scalar_engine"),
           ("gpsimd", "gpsimd_engine"), ("dma", "dma"))


def profile_summary(doc: Any, depth: int = 0) -> dict | None:
    """The metrics object of a profile summary: the first object (searched breadth-first, a few levels
    deep) that has a total_time or an engine's active time; None if there is none."""
    if depth > 4:
        return None
    if isinstance(doc, dict):
        if "total_time" in doc or any(f"{key}_active_time" in doc for _, key in ENGINES):
            return doc
        children = list(doc.values())
    elif isinstance(doc, list):
        children = doc
    else:
        return None
    for child in children[:64]:
        found = profile_summary(child, depth + 1)
        if found is not None:
            return found
    return None


def _fraction(value: Any) -> float | None:
    """A *_percent metric as a fraction. The profilers write these as fractions of 1: public summary-json output has
    tensor_engine_active_time_percent 0.1806 where the active time over the total is 0.5657 / 3.132 = 0.1806, and
    scripts multiply them by 100 to print a percentage (AWS's docs give no range); a value above 1 can only be a
    percentage."""
    v = _positive(value)
    if v is None:
        return 0.0 if value == 0 else None
    return v / 100 if v > 1 else v


def engine_busy(summary: dict) -> dict[str, float]:
    """Fraction of the device time each engine (and DMA) was busy: active time / total time when both
    are there (unambiguous), else the *_active_time_percent field."""
    total = _positive(summary.get("total_time"))
    busy = {}
    for name, key in ENGINES:
        active = summary.get(f"{key}_active_time")
        if total and isinstance(active, (int, float)) and not isinstance(active, bool) and active >= 0:
            busy[name] = min(float(active) / total, 1.0)
        else:
            frac = _fraction(summary.get(f"{key}_active_time_percent"))
            if frac is not None:
                busy[name] = min(frac, 1.0)
    return busy


def profile_metrics(doc: Any) -> dict[str, Any]:
    """What feedback uses of a profile document: engine busy fractions, device time, MFU estimate, HBM
    traffic and spills; {} when the document is not a recognisable summary."""
    summary = profile_summary(doc)
    if summary is None:
        return {}
    out: dict[str, Any] = {"engine_busy": engine_busy(summary)}
    total = _positive(summary.get("total_time"))
    if total:
        out["device_time_us"] = total * 1e6
    mfu = _fraction(summary.get("mfu_estimated_percent"))
    if mfu is not None:
        out["mfu_estimated"] = mfu
    for key in ("hbm_read_bytes", "hbm_write_bytes", "spill_save_bytes", "spill_reload_bytes"):
        value = summary.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            out[key] = int(value)
    return out if out["engine_busy"] or len(out) > 1 else {}


# -- correctness -------------------------------------------------------------------------------------

def round_bf16(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), still as float32: what the kernel
    sees of a bf16 input, so the reference is computed from the same numbers."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    rounded = bits.astype(np.uint32).view(np.float32)
    return np.where(np.isfinite(a), rounded, a).astype(np.float32)


def mismatch(name: str, got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> str | None:
    """None when got is close to want (|got - want| <= atol + rtol * |want| everywhere, NaN nowhere),
    else one sentence naming how many elements are off and the worst one."""
    if got.shape != want.shape:
        return f"{name} has shape {list(got.shape)}, expected {list(want.shape)}"
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(got64 - want64)
    allowed = atol + rtol * np.abs(want64)
    bad = ~(err <= allowed)            # NaN in either counts as wrong
    if not bad.any():
        return None
    excess = np.where(np.isnan(err), np.inf, err - allowed)
    worst = np.unravel_index(int(np.argmax(excess)), got.shape)
    where = name + "".join(f"[{int(i)}]" for i in worst)
    return (f"{int(bad.sum()):,} of {got.size:,} elements of {name} are outside the tolerance (atol {atol:g}, "
            f"rtol {rtol:g}); worst at {where}: got {got64[worst]:.6g}, expected {want64[worst]:.6g}")


def max_errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(largest absolute error, largest error relative to the largest expected magnitude)."""
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return err, (err / scale if scale else err)


# -- performance --------------------------------------------------------------------------------------

def performance(latency_us: float, flops: int, compulsory_bytes: int, fp32: bool, peak: Peak) -> dict[str, Any]:
    """Model utilisation and roofline position of a kernel that takes latency_us: the problem's useful FLOPs
    over the core's peak (FP32 when every float input is float32: the TensorE rate is a quarter),
    and the ideal time max(FLOPs / peak, compulsory HBM bytes / bandwidth) over the measured time."""
    seconds = latency_us * 1e-6
    flop_peak = peak.fp32_flops if fp32 else peak.bf16_flops
    compute_s, memory_s = flops / flop_peak, compulsory_bytes / peak.hbm_bytes_s
    return {"tflops": flops / seconds / 1e12, "utilization": min(flops / seconds / flop_peak, 1.0),
            "roofline_fraction": min(max(compute_s, memory_s) / seconds, 1.0),
            "bound": "compute" if compute_s >= memory_s else "memory",
            "peak_tflops": flop_peak / 1e12, "peak_dtype": "fp32" if fp32 else "bf16",
            "hbm_gbs": peak.hbm_bytes_s / 1e9}


TIMERS = {"nrtpy": ("nrtpy device timing", "each time is the device's alone"),
          "libnrt": ("libnrt host timing", "each time is one nrt_execute call on the host's clock: the device's run "
                     "plus the runtime's launch, the inputs already on the device")}


def feedback_text(m: dict[str, Any]) -> str:
    """The lines an agent reads about one correct evaluation."""
    reported = m.get("percentile", 50)
    # nrtpy's device mode times each run on the device; through libnrt the host's clock times each nrt_execute call
    timer, includes = TIMERS.get(m.get("timer"), TIMERS["libnrt"])
    lines = [f"latency P{reported} {m['latency_us'][f'p{reported}']:.1f} us (P50 {m['p50_us']:.1f} us, P99 "
             f"{m['p99_us']:.1f} us; {timer}: {m['iters']} runs after {m['warmup']} warm-up runs, on NeuronCore "
             f"{m['core']}{', ' + m['timing'] if m.get('timing') else ''}; {includes})",
             f"{m['tflops']:.2f} useful TFLOP/s = {m['utilization']:.1%} of one NeuronCore's {m['peak_tflops']:g} "
             f"TFLOP/s {m['peak_dtype']} peak; {m['roofline_fraction']:.1%} of roofline ({m['bound']}-bound at "
             f"{m['hbm_gbs']:.0f} GB/s HBM)"]
    prof = m.get("profile") or {}
    busy = prof.get("engine_busy") or {}
    if busy:
        names = {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimdE", "dma": "DMA"}
        device = f", {prof['device_time_us']:.1f} us on the device" if "device_time_us" in prof else ""
        lines.append(f"busy in one profiled run{device}: "
                     + ", ".join(f"{names[k]} {v:.0%}" for k, v in busy.items()))
        extra = []
        if "mfu_estimated" in prof:
            extra.append(f"profiler MFU estimate {prof['mfu_estimated']:.1%}")
        if "hbm_read_bytes" in prof:
            extra.append(f"HBM read {prof['hbm_read_bytes'] / 2**20:.1f} MiB, "
                         f"written {prof.get('hbm_write_bytes', 0) / 2**20:.1f} MiB")
        spills = prof.get("spill_save_bytes", 0) + prof.get("spill_reload_bytes", 0)
        if spills:
            extra.append(f"SBUF spills {spills / 2**20:.1f} MiB")
        if extra:
            lines.append("; ".join(extra))
    else:
        lines.append(f"no engine profile ({m.get('profile_error') or 'the profiler gave no summary'})")
    lines.append(f"largest error {m['max_abs_err']:.3g} ({m['max_rel_err']:.2%} of the largest expected value)")
    return "\n".join(lines)
