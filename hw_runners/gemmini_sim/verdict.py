"""What gemmini-sim's files from one evaluation say: the key-value lines of the replayer's stats and the
kernel's diagnostics, and whether (and where) the outputs differ from the references, in one sentence."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from autocomp_zmq.hw_runners.gemmini_sim.workloads import INPUT_SETS


def parse_stats(path: Path, limit: int = 32 * 1024) -> tuple[dict[str, float], dict]:
    """Key-value lines of a stats/diagnostics file; a file a kernel flooded is read only at its head
    and tail (where the harness writes)."""
    stats: dict[str, float] = {}
    verdict: dict = {"notes": []}
    try:
        with open(path, "rb") as fh:
            head = fh.read(limit)
            fh.seek(max(fh.tell(), os.fstat(fh.fileno()).st_size - limit))
            text = (head + b"\n" + fh.read(limit)).decode(errors="replace")
    except OSError:
        text = ""
    for line in filter(None, text.splitlines()):
        key, _, value = line.partition(" ")
        if key in ("error", "crash"):
            verdict[key] = value
        elif key == "warning":
            verdict.setdefault("warnings", []).append(value[:240])
        elif key == "ok":
            verdict["ok"] = True
        elif key == "seccomp":
            verdict["notes"].append(f"seccomp {value}")
        else:
            try:
                stats[key] = float(value)
            except ValueError:
                verdict["notes"].append(line[:200])
    return stats, verdict


def close(got: np.ndarray, want: np.ndarray, tolerance: tuple[float, float]) -> np.ndarray:
    """Elementwise: exact, or within atol + rtol * |expected| when the problem declares a tolerance."""
    atol, rtol = tolerance
    if not atol and not rtol:
        return got == want
    want = want.astype(np.float64)
    return np.abs(got.astype(np.float64) - want) <= atol + rtol * np.abs(want)


def mismatch(name: str, got: np.ndarray, want: np.ndarray, s: int, public: int, hidden: int,
              tolerance: tuple[float, float] = (0.0, 0.0)) -> str:
    bad = np.argwhere(~close(got, want, tolerance))
    first = tuple(int(i) for i in bad[0])
    where = name + "".join(f"[{i}]" for i in first)
    if s < public:
        which = f"input set {s + 1} of {public} ({INPUT_SETS[s % len(INPUT_SETS)]} values)"
    else:
        h = s - public
        which = (f"hidden input set {h + 1} of {hidden} ({INPUT_SETS[h % len(INPUT_SETS)]} values, drawn for this "
                 f"evaluation; the kernel never saw it; the {public} public input sets were right)")
    return (f"wrong result on {which}: {len(bad):,} of {got.size:,} output elements differ; first at {where}: "
            f"got {show(got[first])}, expected {show(want[first])}")


def show(v) -> str:
    """An output element as the kernel's type holds it (floats with the digits that tell them apart)."""
    return f"{float(v):.9g}" if np.asarray(v).dtype.kind == "f" else str(int(v))
