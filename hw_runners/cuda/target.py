"""cuda: judge KernelBench-style kernels (a ModelNew of inline CUDA and/or Triton) on an NVIDIA GPU.

One evaluation (judge.py) runs on the GPU this evaluator owns (one evaluator per GPU, a lock file each), in two
sandboxed children: the reference child (the problem's own code only) and the candidate child (kernel.py). Inputs are
drawn fresh for every evaluation; every output of every input set and of every timed run is handed over as sealed
memory and compared in full with the reference's; every timed run is a window of this process's clock, which the
run's reported steps must agree with, as they must with the reference's same steps (clock.py). The children run
sandboxed (sandbox/: rlimits, an empty environment, nobody's uid, no network, a PID namespace with its own /proc, and a
private filesystem view holding the Python, the CUDA toolkit and only this GPU's device nodes).
What a candidate could forge is not trusted: its outputs are compared in another process; its times are believed only
as far as this process's clock bounds them. Its Python does run in the process that times it (PyTorch's extension
model needs that): a candidate that rewrites the interpreter's memory can misreport its steps, within the slack of
those checks.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult, Problem, Target, bounded
from autocomp_zmq.hw_runners.cuda import clock, environment, metrics
from autocomp_zmq.hw_runners.cuda.gpu import DEFAULT_LOCK_DIR, GpuClaim, claim_gpu, host_gpus, peaks_for
from autocomp_zmq.hw_runners.cuda.judge import judge
from autocomp_zmq.hw_runners.cuda.problems import ProblemSpec, load_specs, to_problem
from autocomp_zmq.hw_runners.cuda.session import Child, run_profile
from autocomp_zmq.hw_runners.problemfile import load_once

def _default_limits() -> sandbox.Limits:
    # No address-space limit: the CUDA driver reserves far more virtual memory than it uses. 540 s of wall clock:
    # compiling inline CUDA takes a minute or more; under the coordinator's default eval lease of 600 s.
    return sandbox.Limits(wall_s=540, cpu_s=540 * 16, mem_bytes=0, fsize_bytes=4 << 30, nofile=4096,
                          isolate_net=True, private_fs=True, pid_ns=True)

@dataclass
class Options:
    python: str | None = None           # the Python with torch (and triton); None: $AUTOCOMP_TORCH_PYTHON, else ours
    device: str = "cuda"                # "cuda"; "cpu" runs the judge on the CPU (a functional check, no GPU times)
    warmup: int | None = None           # None: 10 on a GPU, 2 on the CPU check (Triton's interpreter is slow)
    iters: int | None = None            # timed runs; None: 100 on a GPU, 10 on the CPU check
    timed_output_budget: int = 32 << 30  # bytes of timed runs' outputs handed over and compared (fewer runs if larger)
    chunk_bytes: int = 1 << 30          # outputs are handed over in sealed pieces of at most this many bytes
    public_seeds: tuple[int, ...] = (1, 2)
    hidden_sets: int = 2                # input sets drawn fresh for every evaluation
    variants: tuple[str, ...] = ("signed",)   # hidden sets beyond get_inputs' distribution, where the problem allows
    require_graph: bool = False         # refuse kernels a CUDA graph cannot capture (else they are timed eagerly)
    slack: tuple[float, ...] | None = None  # clock.Slack's (rel, abs_ms, window_rel, window_abs_ms); None: the device's
    l2_flush_bytes: int | None = None   # None: twice the GPU's L2 (256 MiB for an unknown GPU)
    profile: bool = True                # Nsight Compute metrics, where ncu is installed
    input_seed: int | None = None       # None: fresh seeds every evaluation (tests fix them)
    lock_dir: Path = DEFAULT_LOCK_DIR
    problems_dir: Path | None = None
    limits: sandbox.Limits = field(default_factory=_default_limits)
    work_root: Path | None = None
    keep_workdir: bool = False

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, not {self.device!r}")
        cpu = self.device == "cpu"
        self.warmup = (2 if cpu else 10) if self.warmup is None else self.warmup
        self.iters = (10 if cpu else 100) if self.iters is None else self.iters
        if not (isinstance(self.warmup, int) and self.warmup >= 0 and isinstance(self.iters, int) and self.iters >= 5):
            raise ValueError("warmup must be an integer >= 0 and iters >= 5")
        self.public_seeds = tuple(int(s) for s in self.public_seeds)
        self.variants = tuple(self.variants)
        unknown = sorted(set(self.variants) - {"signed"})
        if unknown:
            raise ValueError(f"unknown input variant {unknown[0]!r} (variants: signed)")
        if not (isinstance(self.chunk_bytes, int) and self.chunk_bytes >= 16 and self.chunk_bytes % 16 == 0):
            raise ValueError("chunk_bytes must be a positive multiple of 16")
        self.lock_dir = Path(self.lock_dir)
        if self.problems_dir is not None:
            self.problems_dir = Path(self.problems_dir).resolve()

_CLAIMS: dict[Path, GpuClaim] = {}


class Cuda(Target):
    """NVIDIA GPUs through PyTorch: one evaluator per GPU."""
    name = "cuda"

    def __init__(self, **options) -> None:
        if isinstance(options.get("limits"), dict):
            options["limits"] = dataclasses.replace(_default_limits(), **options["limits"])
        self.options = Options(**options)

    def problems(self) -> list[Problem]:
        return [to_problem(self.name, spec) for spec in load_specs(self._problems_dir()).values()]

    def problem_from_definition(self, definition) -> Problem:
        from autocomp_zmq.hw_runners.cuda.userproblems import from_definition
        return load_once(self, definition, from_definition)

    def devices(self) -> list[str]:
        return [f"gpu{g.index}" for g in host_gpus()] if self.options.device == "cuda" else ["cpu"]

    def unmet_requirements(self) -> list[str]:
        return environment.unmet(self._python(), self.options.device)

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        if time_limit_s is not None:
            clone = copy.copy(self)
            clone.options = dataclasses.replace(self.options, limits=dataclasses.replace(
                self.options.limits, wall_s=time_limit_s, cpu_s=math.ceil(time_limit_s * 16)))
            return clone.evaluate(problem, code, seed=seed, trace_path=trace_path)
        started = time.monotonic()
        missing = self.unmet_requirements()
        if missing:
            return EvalResult.failure("setup", "the cuda target cannot run here: " + "; ".join(missing),
                                      latency_unit="us")
        claim = self._claim()
        if claim is None and self.options.device == "cuda":
            return EvalResult.failure("setup", "every GPU of this host is claimed by another evaluator (lock files in "
                                      f"{self.options.lock_dir}); run one evaluator per GPU", latency_unit="us")
        spec = problem.semantics if isinstance(problem.semantics, ProblemSpec) else \
            load_specs(self._problems_dir())[problem.name]
        work = Path(tempfile.mkdtemp(prefix="cuda-", dir=self.options.work_root))
        try:
            result = self._evaluate_in(work, spec, code, claim)
        except Exception as exc:            # the judge's own fault, never the kernel's: an evaluation, not a crash
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
            result = EvalResult.failure("setup", f"the cuda judge failed ({type(exc).__name__}: {exc}); this is a "
                                        f"fault of the judge, not of the kernel:\n{trace}", latency_unit="us")
        finally:
            if not self.options.keep_workdir:
                shutil.rmtree(work, ignore_errors=True)
        result.wall_s = time.monotonic() - started
        return bounded(result)

    # -- one evaluation -----------------------------------------------------------------------------------
    def _evaluate_in(self, work: Path, spec: ProblemSpec, code: str, claim: GpuClaim | None) -> EvalResult:
        opts = dataclasses.replace(self.options, l2_flush_bytes=self._l2_flush_bytes(claim))
        make_child = lambda d: Child(d, self._python(), self._env(d, claim), self._limits(d, claim))  # noqa: E731
        return judge(spec, opts, make_child, work, code, lambda ev, ref, cand: self._verdict(ev, ref, cand, claim))

    def _verdict(self, ev, ref: dict, cand: dict, claim: GpuClaim | None) -> EvalResult:
        opts, spec, common = ev.opts, ev.spec, ev.common()
        timed = [r.steps["bracket"] for r in cand["runs"]]
        slack = clock.slack_of(opts)
        gpu = claim.gpu if claim and opts.device == "cuda" else None
        named = peaks_for(gpu.name) if gpu else None
        stats = metrics.statistics(timed)
        io = ref["sets"].get("bytes") or {}
        doubt, checks = clock.doubt(cand["runs"], cand["reference_runs"], slack)
        doubt = doubt or clock.below_peaks(stats["median_us"], spec.flops, io, named[1] if named else None)
        if doubt:
            if cand.get("retimed"):
                doubt += " (in a second set of timed runs too; the first: " + cand["retimed"].split(" (")[0] + ")"
            return EvalResult.failure("policy", doubt, feedback={"clock_checks": checks}, **common)
        perf = metrics.performance(stats["median_us"], spec.flops, spec.bytes, spec.dtype, named[1] if named else None)
        how = cand["ready"].get("timed_as")
        m = {**stats, **perf, "latency_us": stats["median_us"], "warmup": opts.warmup, "dtype": spec.dtype,
             "device": opts.device, "timed_as": metrics.timed_as(opts.device, how, cand["ready"].get("graph_error")),
             "device_name": gpu.name if gpu else "CPU functional check",
             "gpu": {"name": gpu.name, "driver": gpu.driver, "uuid": gpu.uuid} if gpu else None,
             "peaks": named[0] if named else None,
             "reference_us": metrics.statistics([r.steps["bracket"] for r in cand["reference_runs"]])["median_us"],
             "sets": len(cand["used"]), "set_names": list(cand["used"]), "dropped_sets": cand["dropped"],
             "max_abs_err": ev.worst, "seconds": cand["finished"].get("seconds", {}),
             "window_us": metrics.statistics([r.window_ms for r in cand["runs"]])["median_us"],
             "graph_error": cand["ready"].get("graph_error"), "io_bytes": io, "clock_checks": checks,
             "retimed": cand.get("retimed")}
        if opts.profile and opts.device == "cuda":      # the candidate's directory: its builds are reused
            m.update(run_profile(ev.candidate.child, ev.plan.job))
        return EvalResult(correct=True, latency=stats["median_us"], utilization=perf.get("flops_fraction"),
                          roofline_fraction=perf.get("roofline_fraction"), bound=perf.get("bound"), feedback=m,
                          feedback_text=metrics.feedback_text(m), **common)

    # -- host -------------------------------------------------------------------------------------------
    def _problems_dir(self) -> Path:
        return self.options.problems_dir or self.info().problems

    def _python(self) -> str:
        return self.options.python or os.environ.get("AUTOCOMP_TORCH_PYTHON") or environment.own_python()

    def _claim(self) -> GpuClaim | None:
        if self.options.device == "cpu":
            return None
        key = self.options.lock_dir.resolve()
        if key not in _CLAIMS:
            claim = claim_gpu(host_gpus(), self.options.lock_dir)
            if claim is None:
                return None
            _CLAIMS[key] = claim
        return _CLAIMS[key]

    def _l2_flush_bytes(self, claim: GpuClaim | None) -> int:
        if self.options.l2_flush_bytes:
            return int(self.options.l2_flush_bytes)
        named = peaks_for(claim.gpu.name) if claim else None
        return 2 * named[1].l2_bytes if named else 256 << 20

    def _env(self, work: Path, claim: GpuClaim | None) -> dict[str, str]:
        return environment.child_env(work, self._python(), claim.gpu.uuid if claim else None, self.options.device)

    def _limits(self, work: Path, claim: GpuClaim | None) -> sandbox.Limits:
        return environment.limits(self.options.limits, self._python(), claim.gpu if claim else None)
