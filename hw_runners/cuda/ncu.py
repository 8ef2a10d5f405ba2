"""Nsight Compute metrics of a correct kernel, where `ncu` is installed: one forward of ModelNew profiled in a third
sandboxed child (child/profile_run.py), the busiest kernel's occupancy, registers, shared memory, throughput and
main warp-stall reasons read from ncu's CSV. These are measured by the profiler (each kernel replayed in isolation,
so its duration differs from the timed runs'); the planner reads them as hints."""
from __future__ import annotations

import csv
import io
import shutil

# the metrics asked for (ncu --metrics), and the name the feedback gives each
METRICS = {
    "gpu__time_duration.sum": "duration",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
    "launch__registers_per_thread": "registers/thread",
    "launch__shared_mem_per_block_static": "static smem/block",
    "launch__shared_mem_per_block_dynamic": "dynamic smem/block",
    "launch__block_size": "block size",
    "launch__grid_size": "grid size",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput %",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput %",
}
# warp stall reasons: cycles warps spent stalled per issued instruction, by reason
STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "math_pipe_throttle", "lg_throttle",
          "wait", "not_selected", "membar", "tex_throttle", "drain", "imc_miss", "no_instruction", "dispatch_stall")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def ncu_path() -> str | None:
    return shutil.which("ncu")


def command(ncu: str, python: str, script: str, job: str, launches: int = 40) -> list[str]:
    metrics = list(METRICS) + [STALL_METRIC.format(s) for s in STALLS]
    return [ncu, "--csv", "--page", "raw", "--metrics", ",".join(metrics), "--target-processes", "all",
            "--launch-count", str(launches), python, script, job]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (TypeError, ValueError):
        return None


def parse(text: str) -> dict:
    """The busiest kernel's metrics from `ncu --csv --page raw` output (log lines before the CSV are skipped; the
    row after the header holds units): {"kernel": name, "kernels": count, name: value ..., "top stalls": ...}.
    Empty when the output has no kernel rows."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {}
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, data = rows[0], [r for r in rows[1:] if len(r) == len(rows[0]) and r[0].isdigit()]
    if not data:
        return {}
    col = {name: i for i, name in enumerate(header)}
    units = rows[1] if len(rows) > 1 and not rows[1][0].isdigit() else [""] * len(header)
    duration = col.get("gpu__time_duration.sum")
    busiest = max(data, key=lambda r: _number(r[duration]) or 0.0) if duration is not None else data[0]
    out: dict = {"kernel": busiest[col["Kernel Name"]][:120] if "Kernel Name" in col else "?", "kernels": len(data)}
    for metric, name in METRICS.items():
        if metric in col and (value := _number(busiest[col[metric]])) is not None:
            unit = units[col[metric]].strip()
            out[name] = f"{value:g} {unit}".strip() if unit and unit != "%" else f"{value:g}"
    stalls = {s: _number(busiest[col[STALL_METRIC.format(s)]]) for s in STALLS if STALL_METRIC.format(s) in col}
    ranked = sorted(((v, s) for s, v in stalls.items() if v), reverse=True)[:3]
    if ranked:
        out["top stalls (cycles/instruction)"] = ", ".join(f"{s.replace('_', ' ')} {v:.1f}" for v, s in ranked)
    return out


def describe_failure(stderr: str) -> str:
    """Why ncu gave no metrics, in one phrase."""
    if "ERR_NVGPUCTRPERM" in stderr:
        return ("ncu may not read the GPU's performance counters as this user (NVIDIA's "
                "NVreg_RestrictProfilingToAdminUsers=0, or an evaluator running as root with limits.drop_root=false)")
    tail = stderr.strip().splitlines()[-1:] if stderr.strip() else ["no kernel was profiled"]
    return tail[0][:300]


PARAMS = "/proc/driver/nvidia/params"


def refused_to(limits, params: str = PARAMS, euid: int | None = None) -> str | None:
    """Why ncu cannot read the GPU's counters for a child with these sandbox limits, known before trying (saving the
    profile's time), or None: the driver restricts profiling to administrators (RmProfilingAdminOnly: 1, NVIDIA's
    NVreg_RestrictProfilingToAdminUsers) and the child runs as an ordinary user (nobody, or this non-root user)."""
    import os
    try:
        with open(params) as fh:
            restricted = any(line.split(":", 1)[0].strip() == "RmProfilingAdminOnly" and line.split(":", 1)[1].strip()
                             == "1" for line in fh if ":" in line)
    except OSError:
        return None
    euid = os.geteuid() if euid is None else euid
    as_user = euid != 0 or limits.drop_root
    if restricted and as_user:
        return ("the driver lets only administrators read the GPU's performance counters (RmProfilingAdminOnly: 1) and "
                "the judge's children run as an ordinary user: set NVIDIA's NVreg_RestrictProfilingToAdminUsers=0, or "
                "run the evaluator as root with the target option limits={drop_root=false}")
    return None
