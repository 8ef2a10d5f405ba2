"""hostcpu's evaluation command (trusted): compile a candidate C kernel, run it as a sandboxed child, check
and time it, and print one JSON line (the contract: docs/command-target.md).

    python harness.py --problem PROBLEM_DIR --candidate kernel.c

How the verdict is kept out of the candidate's reach:
- the kernel is compiled by gcc in a private filesystem view, and runs as its own process under the
  launcher with seccomp (no files, no processes, no threads, no network): it can print, but this script
  never reads what it prints; only this script prints the verdict;
- inputs are drawn fresh (from the OS's randomness) for every run and written into shared memory while
  the child is stopped (SIGSTOP), so nothing can be computed before the go signal; the reference is
  computed here, in this process, from the same inputs before the child is let go;
- each run is measured between the go signal (SIGCONT, then a byte on a pipe) and the child's done byte,
  by this process: the child is stopped again the moment that byte arrives and its output is read and
  checked then, so work done after "done" cannot count. The measure is the CPU time the kernel's scheduler
  accounted to the child inside that window (/proc/PID/schedstat, read while it is stopped), which leaves
  out the time a busy machine kept it waiting for a core; where the kernel keeps no such account, the
  window of this process's monotonic clock. Both are reported (noise.wall_median_ns, noise.cpu_share).
Noise model: WARMUP runs (checked, not timed), then runs until the 95 % confidence interval of the median
(1.96 * 1.2533 * 1.4826 * MAD / sqrt(n), relative to the median) is within TARGET_REL_CI, or MAX_REPS
runs, or BUDGET_S seconds. The latency is the median in microseconds. The kernel is single-threaded (the
sandbox allows no threads), so one core's time is the whole cost.
"""
from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import math
import mmap
import os
import select
import shutil
import signal
import statistics
import sys
import time
import tomllib
import types
from pathlib import Path

import numpy as np
import psutil

HERE = Path(__file__).resolve().parent
if importlib.util.find_spec("autocomp_zmq") is None:
    # the product is not importable from this environment (a checkout never installed, or an install on a
    # PYTHONPATH the command does not inherit): the package is the folder two levels up, bound as launch.py does
    _package = types.ModuleType("autocomp_zmq")
    _package.__path__ = [str(HERE.parents[1])]
    sys.modules["autocomp_zmq"] = _package

from autocomp_zmq import sandbox  # noqa: E402
CFLAGS = ["-O2", "-march=native", "-std=gnu11"]   # the flag set every kernel is compiled with
WARMUP, MIN_REPS, MAX_REPS = 2, 10, 40
TARGET_REL_CI = 0.02         # stop once the median's 95 % interval is within 2 % of it
BUDGET_S = 20.0              # of timed runs per evaluation
RUN_TIMEOUT_S = 10.0         # one run of the kernel


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# the problem.toml's [harness] reference names one of these (float64 results)
REFERENCES = {
    "gemm": lambda a, b: a.astype(np.float64) @ b.astype(np.float64),
    "softmax": softmax,
    "sum": lambda x: np.array([x.sum(dtype=np.float64)]),
}


class Verdict(Exception):
    def __init__(self, **fields):
        self.fields = fields


def fail(kind: str, message: str) -> Verdict:
    return Verdict(correct=False, error_kind=kind, error=message)


def compile_kernel(candidate: Path, problem: Path, build: Path) -> None:
    build.mkdir()
    shutil.copy(candidate, build / "kernel.c")
    shutil.copy(HERE / "driver.c", build / "driver.c")
    shutil.copy(problem / "entry.c", build / "entry.c")
    limits = sandbox.Limits(wall_s=60, cpu_s=60, private_fs=True, ro_paths=sandbox.toolchain_paths())
    sandbox.prepare_workdir(build, limits)
    out = sandbox.run(["gcc", *CFLAGS, "-static", "-o", "kernel", "driver.c", "entry.c", "-lm"], build, limits,
                      env={"PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": str(build)})
    if not (out.ok and (build / "kernel").exists()):
        diagnostics = sandbox.read_tail(build / "stderr.txt", 6000).replace(str(build) + "/", "")
        raise fail("compile", f"compile error ({out.describe(limits)}):\n{diagnostics}")


def stop(pid: int) -> None:
    """SIGSTOP the child and wait until it is stopped (or gone)."""
    os.kill(pid, signal.SIGSTOP)
    proc = psutil.Process(pid)
    while True:
        try:
            if proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0)


def within(got, expected, inputs, tol: dict) -> str:
    """"" if the output is within the tolerance, else where it is not."""
    atol = tol.get("atol", 0.0) + tol.get("atol_per_abs_input", 0.0) * float(np.abs(inputs[0]).sum(dtype=np.float64))
    bound = atol + tol.get("rtol", 0.0) * np.abs(expected)
    bad = ~(np.abs(got.astype(np.float64) - expected) <= bound)     # NaN counts as wrong
    if not bad.any():
        return ""
    i = int(np.flatnonzero(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} output elements are outside the tolerance; the first, output[{i}], "
            f"is {got.flat[i]!r}, expected {expected.flat[i]:.7g} (|error| <= {bound.flat[i]:.3g} allowed)")


def measure(build: Path, spec: dict) -> dict:
    shapes = [tuple(i["shape"]) for i in spec["inputs"]] + [tuple(spec["output"])]
    counts = [math.prod(s) for s in shapes]
    offsets = np.cumsum([0] + [-(-c * 4 // 4096) * 4096 for c in counts]).tolist()
    fd = os.memfd_create("hostcpu-io")
    os.ftruncate(fd, offsets[-1])
    shared = mmap.mmap(fd, offsets[-1])
    views = [np.frombuffer(shared, np.float32, c, off).reshape(s) for c, off, s in zip(counts, offsets, shapes)]
    *ins, out = views
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    # moved above the numbers the launcher places them on (3, 4, 5), so that placing one never closes another
    passed = {num: fcntl.fcntl(ours, fcntl.F_DUPFD_CLOEXEC, 100) for num, ours in ((3, fd), (4, go_r), (5, done_w))}
    for ours in (fd, go_r, done_w):
        os.close(ours)
    run = build / "run"
    run.mkdir()
    shutil.copy(build / "kernel", run / "kernel")
    limits = sandbox.Limits(wall_s=BUDGET_S + 60, cpu_s=int(BUDGET_S + 60), mem_bytes=2 << 30,
                            fsize_bytes=1 << 20, private_fs=True)
    sandbox.prepare_workdir(run, limits)
    child = sandbox.start(["./kernel", *map(str, counts)], run, limits, seccomp=True, inherit=passed)
    for ours in passed.values():
        os.close(ours)
    pid = child.proc.pid
    rng = np.random.default_rng(int.from_bytes(os.urandom(16), "little"))   # nobody knows these inputs
    reference, tol = REFERENCES[spec["reference"]], spec.get("tolerance", {})
    times: list[int] = []       # what each run is measured by: the child's CPU time, else the wall window
    windows: list[int] = []     # the wall-clock windows (go to done) of the same runs
    clock = "cpu"
    started = time.monotonic()
    try:
        stop(pid)
        for rep in range(WARMUP + MAX_REPS):
            for v in ins:
                rng.random(out=v.reshape(-1), dtype=np.float32)
                v *= 2
                v -= 1                                   # uniform in [-1, 1)
            out.fill(np.nan)                             # stale outputs never pass
            expected = reference(*ins)
            cpu0 = cpu_ns(pid)
            t0 = time.perf_counter_ns()
            os.kill(pid, signal.SIGCONT)
            try:
                os.write(go_w, b"g")
            except BrokenPipeError:
                pass                                     # the child is gone: its done pipe says so below
            ready = select.select([done_r], [], [], RUN_TIMEOUT_S)[0]
            signal_byte = os.read(done_r, 1) if ready else b""
            t1 = time.perf_counter_ns()
            stop(pid)
            if not ready:
                raise fail("timeout", f"one run of the kernel took longer than {RUN_TIMEOUT_S:g} s")
            if signal_byte != b"d":
                sandbox.kill_group(pid)
                ended = child.wait()
                raise fail("crash", f"the kernel's process ended during run {rep + 1}: {ended.describe(limits)}")
            wrong = within(out.copy(), expected, ins, tol)
            if wrong:
                raise fail("wrong_result", f"wrong result on run {rep + 1} (fresh random inputs in [-1, 1)): {wrong}")
            if rep >= WARMUP:
                cpu1 = cpu_ns(pid)
                windows.append(t1 - t0)
                if cpu0 is None or cpu1 is None:
                    clock = "wall"
                times.append(t1 - t0 if clock == "wall" else min(cpu1 - cpu0, t1 - t0))
                if len(times) >= MIN_REPS and (_rel_ci(times) <= TARGET_REL_CI
                                               or time.monotonic() - started > BUDGET_S):
                    break
        sandbox.kill_group(pid)          # measured: nothing it does from now on matters (it may never return)
        ended = child.wait()
    finally:
        sandbox.kill_group(pid)
    median = statistics.median(times)
    return {"clock": clock,
            "median_ns": median, "mad_ns": statistics.median(abs(t - median) for t in times), "reps": len(times),
            "warmup": WARMUP, "rel_ci": _rel_ci(times), "min_ns": min(times), "max_ns": max(times),
            "wall_median_ns": statistics.median(windows),
            # the child's CPU time inside the windows against their length: well under 1 means the machine was
            # busy and the child waited for a core (which the CPU clock leaves out and the wall clock counts)
            "cpu_share": sum(times) / sum(windows),
            "child_cpu_s": ended.cpu_s}     # wait4's rusage of the child over its whole life, start included


def cpu_ns(pid: int) -> int | None:
    """The CPU time a process has used, in ns, from the kernel's scheduler accounting (/proc/PID/schedstat's
    first field): time waiting for a core is not in it. None where the kernel does not keep it."""
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            value = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return value or None


def _rel_ci(times: list[int]) -> float:
    """Half-width of the median's 95 % confidence interval relative to the median (normal approximation, with
    the MAD scaled to a standard deviation): robust to the few runs a busy machine stretches."""
    median = statistics.median(times)
    mad = statistics.median(abs(t - median) for t in times)
    return 1.96 * 1.2533 * 1.4826 * mad / math.sqrt(len(times)) / median


def evaluate(problem: Path, candidate: Path, work: Path) -> dict:
    spec = tomllib.loads((problem / "problem.toml").read_text())["harness"]
    compile_kernel(candidate, problem, work / "build")
    noise = measure(work / "build", spec)
    us = noise["median_ns"] / 1000
    feedback = {"counters": counters_note()}
    words = [f"median of {noise['reps']} runs: {us:.1f} us (MAD {noise['mad_ns'] / 1000:.1f} us, 95 % interval "
             f"+-{100 * noise['rel_ci']:.1f} %)"]
    if "flops" in spec:
        feedback["gflops"] = spec["flops"] / noise["median_ns"]
        words.append(f"{feedback['gflops']:.2f} GFLOP/s")
    if "bytes" in spec:
        feedback["gbytes_per_s"] = spec["bytes"] / noise["median_ns"]
        words.append(f"{feedback['gbytes_per_s']:.2f} GB/s of compulsory traffic")
    return {"correct": True, "latency": us, "unit": "us", "noise": noise, "feedback": feedback,
            "feedback_text": "; ".join(words) + f". Hardware counters: {feedback['counters']}."}


def counters_note() -> str:
    """Why there are no hardware counters in the feedback, plainly."""
    if not Path("/sys/bus/event_source/devices/cpu").exists():
        return "not collected: this host exposes no hardware performance counters (no PMU under /sys/bus/event_source)"
    return "not collected: the harness does not read them (perf_event_open) yet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    args = parser.parse_args()
    try:
        verdict = evaluate(args.problem, args.candidate, args.candidate.parent)
    except Verdict as v:
        verdict = v.fields
    print(json.dumps(verdict))


if __name__ == "__main__":
    main()
