"""cuda: judge KernelBench-style kernels (a ModelNew of inline CUDA and/or Triton) on an NVIDIA GPU.

One evaluation, on the GPU this evaluator owns (one evaluator per GPU, a lock file each):
  1. seeds drawn fresh: the models' weights, two hidden input sets (besides two public ones), and the seed every
     timed run's inputs are made from (each run its own);
  2. the reference child (trusted code only: the problem's Model) computes the outputs of every set and runs the
     timed loop the candidate will run, on the same inputs, in a directory the candidate's sandbox cannot see;
  3. the candidate child (child/candidate_run.py) imports kernel.py, runs it on the same sets, checks what needs no
     reference (inputs untouched, no input returned, no output buffer reused, judge functions untouched, no threads),
     captures forward as a CUDA graph, says "ready", and only then learns the timed runs' seed; it saves every timed
     run's outputs;
  4. here: every output compared with the reference's (each set in full; each timed run at positions drawn after
     the fact), the judge's clock over the candidate's timed loop checked against its events plus what the same loop
     cost the reference, latency = the median of the timed runs, and achieved vs peak rates.
The children run sandboxed (sandbox/: rlimits, an empty environment, nobody's uid, no network, a PID namespace, and a
private filesystem view holding the Python, the CUDA toolkit and only this GPU's device nodes).
What a candidate could forge is not trusted: its outputs, those of every timed run included, are compared here with
outputs computed in another process on inputs drawn for this evaluation and revealed only when the runs start (so
every timed run must have done the work); its timed runs replay a captured graph (no candidate Python runs while
they are timed); and the times it reports must agree with the evaluator's own clock. Its Python does run in the process that times it (PyTorch's
extension model needs that): a candidate that rewrites the interpreter's memory is beyond these checks.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult, Problem, Target, bounded, register
from autocomp_zmq.hw_runners.cuda import environment, metrics
from autocomp_zmq.hw_runners.problemfile import load_once
from autocomp_zmq.hw_runners.cuda.gpu import DEFAULT_LOCK_DIR, GpuClaim, claim_gpu, host_gpus, peaks_for
from autocomp_zmq.hw_runners.cuda.problems import ProblemSpec, load_specs, to_problem
from autocomp_zmq.hw_runners.cuda.session import Child, compare_outputs, run_candidate, run_profile, run_reference



def _default_limits() -> sandbox.Limits:
    # No address-space limit: the CUDA driver reserves far more virtual memory than it uses. 540 s of wall clock:
    # compiling inline CUDA takes a minute or more; under the coordinator's default eval lease of 600 s.
    return sandbox.Limits(wall_s=540, cpu_s=540 * 16, mem_bytes=0, fsize_bytes=4 << 30, nofile=4096,
                          isolate_net=True, private_fs=True, pid_ns=True)


@dataclass
class Options:
    python: str | None = None           # the Python with torch (and triton); None: $AUTOCOMP_TORCH_PYTHON, else ours
    device: str = "cuda"                # "cuda"; "cpu" runs the judge on the CPU (a functional check, no GPU times)
    warmup: int = 10
    iters: int = 100
    timed_output_budget: int = 2 << 30  # bytes of timed runs' outputs kept for checking (fewer runs for big outputs)
    public_seeds: tuple[int, ...] = (1, 2)
    hidden_sets: int = 2                # input sets drawn fresh for every evaluation
    require_graph: bool = True          # time only kernels whose forward a CUDA graph can capture
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
        if not (isinstance(self.warmup, int) and self.warmup >= 0 and isinstance(self.iters, int) and self.iters >= 5):
            raise ValueError("warmup must be an integer >= 0 and iters >= 5")
        self.public_seeds = tuple(int(s) for s in self.public_seeds)
        self.lock_dir = Path(self.lock_dir)
        if self.problems_dir is not None:
            self.problems_dir = Path(self.problems_dir).resolve()


_CLAIMS: dict[Path, GpuClaim] = {}


@register("cuda")
class Cuda(Target):
    """NVIDIA GPUs through PyTorch: one evaluator per GPU."""

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
        finally:
            if not self.options.keep_workdir:
                shutil.rmtree(work, ignore_errors=True)
        result.wall_s = time.monotonic() - started
        return bounded(result)

    # -- one evaluation -----------------------------------------------------------------------------------
    def _evaluate_in(self, work: Path, spec: ProblemSpec, code: str, claim: GpuClaim | None) -> EvalResult:
        opts = self.options
        rng = np.random.default_rng(opts.input_seed if opts.input_seed is not None else secrets.randbits(63))
        draw = lambda: int(rng.integers(1 << 30, 1 << 31))  # noqa: E731  (apart from the public seeds)
        sets = {f"public{i}": s for i, s in enumerate(opts.public_seeds)}
        sets.update({f"hidden{i}": draw() for i in range(opts.hidden_sets)})
        timing_seed = draw()
        job = {"device": opts.device, "init_seed": draw(), "sets": sets, "warmup": opts.warmup,
               "require_graph": opts.require_graph, "l2_flush_bytes": self._l2_flush_bytes(claim)}
        python = self._python()
        ref_dir, cand_dir = work / "reference", work / "candidate"
        ref = run_reference(Child(ref_dir, python, self._env(ref_dir, claim), self._limits(ref_dir, claim)), spec,
                            {**job, "iters": opts.iters, "timing_seed": timing_seed,
                             "timed_output_budget": opts.timed_output_budget})
        if not ref.ok:
            return EvalResult.failure("setup", f"the reference of problem {spec.name} failed: {ref.error}",
                                      latency_unit="us")
        cand_dir.mkdir()
        (cand_dir / "kernel.py").write_text(code)
        cand = run_candidate(Child(cand_dir, python, self._env(cand_dir, claim), self._limits(cand_dir, claim)),
                             spec, {**job, "iters": int(ref.result["iters"])}, {"seed": timing_seed})
        common = dict(stdout=cand.stdout, stderr=cand.stderr, sandbox=cand.notes, latency_unit="us")
        if not cand.ok:
            return cand.failure(opts.limits, common)
        result = self._verdict(spec, cand, ref, list(sets), rng, claim, common)
        if result.correct and opts.profile and opts.device == "cuda":
            prof_dir = work / "profile"
            result.feedback.update(run_profile(Child(prof_dir, python, self._env(prof_dir, claim),
                                                     self._limits(prof_dir, claim)), spec, job, code))
            result.feedback_text = metrics.feedback_text(result.feedback)
        return result

    def _verdict(self, spec: ProblemSpec, cand, ref, names: list[str], rng, claim: GpuClaim | None,
                 common: dict) -> EvalResult:
        opts = self.options
        n = int(ref.result["iters"])
        wrong, worst = compare_outputs(spec, cand, ref, names, n, rng)
        times, ref_times = cand.times(opts.warmup + n), ref.times(opts.warmup + n)
        if times is None or ref_times is None:
            return EvalResult.failure("crash", f"the timed runs reported no {opts.warmup + n} run times", **common)
        timed = times[opts.warmup:]
        doubt = metrics.timing_doubt(cand.timed_wall_s, times, float(ref.result.get("loop_seconds") or 0), ref_times,
                                     timed, opts.device)
        if wrong is None and doubt:
            return EvalResult.failure("policy", doubt, **common)
        stats = metrics.statistics(timed)
        gpu = claim.gpu if claim else None
        named = peaks_for(gpu.name) if gpu and opts.device == "cuda" else None
        perf = metrics.performance(stats["median_us"], spec.flops, spec.bytes, spec.dtype, named[1] if named else None)
        m = {**stats, **perf, "latency_us": stats["median_us"], "warmup": opts.warmup, "dtype": spec.dtype,
             "device": opts.device, "timed_as": "CUDA-graph replays" if cand.result.get("graph") else
             ("eager runs (CPU: not GPU times)" if opts.device == "cpu" else "eager runs"),
             "device_name": gpu.name if gpu and opts.device == "cuda" else "CPU functional check",
             "gpu": {"name": gpu.name, "driver": gpu.driver, "uuid": gpu.uuid} if gpu else None,
             "peaks": named[0] if named else None,
             "reference_us": metrics.statistics(ref_times[opts.warmup:])["median_us"], "sets": len(names),
             "max_abs_err": worst, "seconds": cand.result.get("seconds", {}),
             "graph_error": cand.result.get("graph_error")}
        result = EvalResult(correct=wrong is None, latency=stats["median_us"],
                            utilization=perf.get("flops_fraction"), roofline_fraction=perf.get("roofline_fraction"),
                            bound=perf.get("bound"), feedback=m, feedback_text=metrics.feedback_text(m), **common)
        if wrong is not None:
            result.error_kind, result.error = "wrong_result", wrong
        return result

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
