"""gemmini-sim: evaluate C kernels written with Gemmini intrinsics on the host.

One evaluation: static policy check -> compile with the host gcc against the
shim (sandboxed) -> two sandboxed processes joined by a pipe: the candidate
kernel, which runs every seeded input set and only *records* the Gemmini
instructions it issues, and the trusted replayer, which executes that trace
with the functional and timing models on its own copy of the inputs ->
compare the replayer's outputs bit-exactly with numpy -> feedback. Nothing the
kernel does in its own process can change its outputs, verdict or cycles.
"""
from __future__ import annotations

import fcntl
import functools
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import signal

import numpy as np

from hw_runners import sandbox
from hw_runners.base import EvalResult, Problem, Target, register
from hw_runners.buildcache import cached_build, run_build
from hw_runners.gemmini_sim import feedback
from hw_runners.gemmini_sim.policy import PolicyError, check_source
from hw_runners.gemmini_sim.problems import FAMILIES, INPUT_SETS, load_problems
from hw_runners.gemmini_sim.timing import TimingConfig

CSRC = Path(__file__).with_name("csrc")
_KERNEL_SIDE = ("record.c", "fsm.c", "harness.c", "job.c", "diag.c")       # linked with the candidate
_REPLAYER = ("replay.c", "dram.c", "fsm.c", "functional.c", "timing.c", "job.c", "diag.c")    # trusted
CFLAGS = ["-std=gnu11", "-O2", "-Werror=implicit-function-declaration"]


def _headers() -> list[Path]:
    return sorted(CSRC.glob("*.h")) + sorted(CSRC.glob("include/**/*.h"))


def shim_library() -> Path:
    """The kernel-side intrinsics, loop FSMs and harness as a static library, built once per machine."""
    def build(out: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            objs = []
            for src in _KERNEL_SIDE:
                obj = Path(tmp) / (src[:-2] + ".o")
                run_build(["gcc", *CFLAGS, "-c", str(CSRC / src), "-o", str(obj)])
                objs.append(str(obj))
            run_build(["ar", "rcs", str(out), *objs])
    return cached_build("libgemminisim.a", [CSRC / s for s in _KERNEL_SIDE] + _headers(), CFLAGS, build)


def replayer() -> Path:
    """The trusted replayer (functional + timing model), built once per machine."""
    return cached_build("gemmini-replay", [CSRC / s for s in _REPLAYER] + _headers(), CFLAGS,
                        lambda out: run_build(["gcc", *CFLAGS, "-o", str(out), *(str(CSRC / s) for s in _REPLAYER),
                                               "-lm"]))


@functools.lru_cache(maxsize=8)
def _inputs_and_expected(family: str, dims: tuple[tuple[str, int], ...], seed: int, sets: int):
    fam, d = FAMILIES[family], dict(dims)
    inputs = [fam.make_inputs(d, seed, INPUT_SETS[s % len(INPUT_SETS)]) for s in range(sets)]
    return inputs, [fam.reference(d, x) for x in inputs]


@dataclass
class Options:
    timing: TimingConfig = field(default_factory=TimingConfig)
    compile_limits: sandbox.Limits = field(default_factory=lambda: sandbox.Limits(wall_s=60, cpu_s=60))
    run_limits: sandbox.Limits = field(default_factory=lambda: sandbox.Limits(wall_s=120, cpu_s=120, mem_bytes=2 << 30))
    input_sets: int = 3
    work_root: Path | None = None
    keep_workdir: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.input_sets, int) or self.input_sets < 2:
            # the checks that instructions and loaded constants do not depend on the data compare sets
            raise ValueError("input_sets must be an integer >= 2")


@register("gemmini-sim")
class GemminiSim(Target):
    """Embedded Gemmini model: the default target, needs only a C compiler."""

    def __init__(self, **options) -> None:
        if isinstance(options.get("timing"), dict):
            options["timing"] = TimingConfig.from_dict(options["timing"])
        self.options = Options(**options)

    def problems(self) -> list[Problem]:
        return list(load_problems(self.name))

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None) -> EvalResult:
        started = time.monotonic()
        try:
            check_source(code)
        except PolicyError as exc:
            return EvalResult.failure("policy", f"kernel rejected before compiling: {exc}")
        work = Path(tempfile.mkdtemp(prefix="gemmini-sim-", dir=self.options.work_root))
        try:
            result = self._evaluate_in(work, problem, code, seed, trace_path)
        finally:
            if not self.options.keep_workdir:
                shutil.rmtree(work, ignore_errors=True)
        result.wall_s = time.monotonic() - started
        return result

    # -- steps ----------------------------------------------------------------
    def _evaluate_in(self, work: Path, problem: Problem, code: str, seed: int, trace_path: Path | None) -> EvalResult:
        fam = FAMILIES[problem.family]
        args = fam.args(problem.dims)
        opts = self.options
        (work / "kernel.c").write_text(code)
        call = ", ".join(f"b[{i}]" for i in range(len(args)))
        (work / "entry.c").write_text(f"void autocomp_entry(void **b) {{ solution({call}); }}\n")
        shutil.copytree(CSRC / "include", work / "inc")
        shutil.copy(shim_library(), work / "libgemminisim.a")
        sandbox.prepare_workdir(work, opts.compile_limits)

        cc = ["gcc", *CFLAGS, "-Iinc", "-include", "gemmini.h", *fam.defines(problem.dims),
              "-o", "kernel", "kernel.c", "entry.c", "libgemminisim.a", "-static", "-lm"]
        out = sandbox.run(cc, work, opts.compile_limits, env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
        diagnostics = sandbox.read_tail(work / "stderr.txt", 6000).replace(str(work) + "/", "")
        if not out.ok or not (work / "kernel").exists():
            why = "compile error" if out.returncode == 1 else f"compiler {out.describe(opts.compile_limits)}"
            return EvalResult.failure("compile", f"{why}:\n{diagnostics}", stderr=diagnostics, sandbox=out.notes)

        inputs, expected = _inputs_and_expected(problem.family, tuple(problem.dims.items()), seed, opts.input_sets)
        out_spec = next(a for a in args if a.output)
        header = ["gemmini-sim-job 1", *opts.timing.header_lines()]
        header += [f"arg {'out' if a.output else 'in'} {a.nbytes}" for a in args]
        header += [f"out_arg {args.index(out_spec)}", f"sets {len(inputs)}", f"macs {fam.macs(problem.dims)}",
                   f"trace {int(trace_path is not None)}", "end"]
        with open(work / "job.bin", "wb") as fh:
            fh.write(("\n".join(header) + "\n").encode())
            for arrays in inputs:
                for a in arrays:
                    fh.write(np.ascontiguousarray(a).tobytes())
        shutil.copy(replayer(), work / "gemmini-replay")
        sandbox.prepare_workdir(work, opts.run_limits)
        limits = opts.run_limits
        read_end, write_end = os.pipe()
        hi_r, hi_w = fcntl.fcntl(read_end, fcntl.F_DUPFD_CLOEXEC, 100), fcntl.fcntl(write_end, fcntl.F_DUPFD_CLOEXEC, 100)
        os.close(read_end)
        os.close(write_end)
        try:
            replay = sandbox.start(["./gemmini-replay"], work, limits, tag="-replay", inherit={7: hi_r},
                                   fds={1: ("w", "replay-out.txt"), 2: ("w", "replay-err.txt"), 3: ("r", "job.bin"),
                                        4: ("w", "out.bin"), 5: ("w", "replay.txt"), 8: ("w", "timing.txt")})
            os.close(hi_r)
            hi_r = -1
            kernel = sandbox.start(["./kernel"], work, limits, seccomp=True, inherit={6: hi_w},
                                   fds={3: ("r", "job.bin"), 5: ("w", "stats.txt")})
            os.close(hi_w)
            hi_w = -1
            run = kernel.wait()
            replayed = replay.wait()
        finally:
            for fd in (hi_r, hi_w):
                if fd >= 0:
                    os.close(fd)
        stdout = sandbox.read_tail(work / "stdout.txt")
        _, verdict = _parse_stats(work / "stats.txt")
        stats, replay_verdict = _parse_stats(work / "replay.txt")
        if trace_path is not None and (work / "timing.txt").exists():
            shutil.copy(work / "timing.txt", trace_path)
        common = dict(stdout=stdout, stderr=diagnostics, sandbox=run.notes + verdict.get("notes", []))
        replay_error = replay_verdict.get("error")
        if replay_error and not replay_error.startswith("the trace ended early"):
            return EvalResult.failure("gemmini", replay_error, **common)   # the program itself is invalid
        if "crash" in verdict:
            return EvalResult.failure("crash", f"kernel {verdict['crash']}", **common)
        if "error" in verdict:
            return EvalResult.failure("gemmini", verdict["error"], **common)
        if not run.ok or "ok" not in verdict:
            kind = "timeout" if run.timed_out else "crash" if run.signal == signal.SIGSYS else "limit"
            reason = run.describe(limits)
            if run.returncode is not None and not run.timed_out:
                reason = f"the program exited with status {run.returncode} before the harness finished " \
                         "(the kernel must return from solution(), not exit)"
            return EvalResult.failure(kind, f"kernel {reason}", **common)
        if not replayed.ok or "ok" not in replay_verdict:
            why = replay_error or replayed.describe(limits)
            return EvalResult.failure("limit", f"replaying the kernel's instructions failed: {why}", **common)

        m = feedback.metrics(stats, fam.macs(problem.dims), fam.compulsory_bytes(problem.dims), opts.timing)
        result = EvalResult(correct=True, cycles=m["cycles"], utilization=m["utilization"],
                            roofline_fraction=m["roofline_fraction"], bound=m["bound"], feedback=m,
                            feedback_text=feedback.text(m), **common)
        produced = np.fromfile(work / "out.bin", dtype=out_spec.dtype)
        per_set = int(np.prod(out_spec.shape))
        for s, want in enumerate(expected):
            got = produced[s * per_set:(s + 1) * per_set].reshape(out_spec.shape)
            if got.shape != want.shape or not np.array_equal(got, want):
                result.correct = False
                result.error_kind = "wrong_result"
                result.error = _mismatch(out_spec.name, got, want, s, len(expected))
                break
        return result


def _parse_stats(path: Path) -> tuple[dict[str, float], dict]:
    stats: dict[str, float] = {}
    verdict: dict = {"notes": []}
    text = path.read_text(errors="replace") if path.exists() else ""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("error", "crash"):
            verdict[key] = value
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


def _mismatch(name: str, got: np.ndarray, want: np.ndarray, s: int, total: int) -> str:
    bad = np.argwhere(got != want)
    first = tuple(int(i) for i in bad[0])
    where = name + "".join(f"[{i}]" for i in first)
    return (f"wrong result on input set {s + 1} of {total} ({INPUT_SETS[s % len(INPUT_SETS)]} values): "
            f"{len(bad):,} of {got.size:,} output elements differ; first at {where}: got {int(got[first])}, "
            f"expected {int(want[first])}")
