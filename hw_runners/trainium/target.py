"""trainium: evaluate NKI kernels on real Trainium (trn1/trn2/trn3 hosts with the Neuron SDK).

One evaluation: the kernel's NKI dialect (from its imports) against what the host's SDK compiles (a mismatch is a
setup error naming both) -> fresh random inputs (a new seed every time; bf16/fp16 inputs rounded first, so the
reference sees what the kernel sees) -> a private directory with kernel.py, the job and the sdk_side/ scripts ->
sandboxed children of the SDK's Pythons on the one NeuronCore this evaluator owns (runs.py: the kernel compiled
once to a NEFF, by nki.baremetal in NKI v1 or its @nki.jit call in NKI v2, then run and timed by nrtpy or libnrt
in a process with no candidate code) while the reference is computed here -> outputs compared with the problem's
tolerance -> feedback.

Trust: the kernel's Python only compiles, on zero arrays, in a PID namespace that ends every process it started
before anything runs on the inputs; the device's outputs and times are read by a process that runs none of it.
Correctness is judged here, on inputs the kernel could not have seen before.
On a host without the SDK every evaluation is a "setup" failure that says what to install.
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult, Problem, Target, bounded
from autocomp_zmq.hw_runners.trainium import harness
from autocomp_zmq.hw_runners.trainium.metrics import (PEAKS, PERCENTILES, PROFILE_LIMIT, feedback_text,
                                                      latencies, max_errors, mismatch, performance, profile_metrics,
                                                      read_json, round_bf16, scaled)
from autocomp_zmq.hw_runners.trainium.neuron import (DEFAULT_LOCK_DIR, INSTALL_HINT, NEURON_BIN, NRTPY_HINT,
                                                     VISIBLE_CORES, CoreClaim, PlatformError, claim_core,
                                                     cores_per_device, find_libnrt, find_nrtpy, find_sdk, host_cores,
                                                     missing_sdk, parse_core_list, platform_name)
from autocomp_zmq.hw_runners.trainium.runs import NeffCache, Run, Runtime, no_result, run, stage_failure
from autocomp_zmq.hw_runners.trainium_sim.dialect import (V1, V2, DialectError, Sdk, check, kernel_dialect,
                                                         profile_for, profile_mismatch)
from autocomp_zmq.hw_runners.trainium_sim.workloads import ProblemSpec, in_profile, load_problems, load_specs, spec_of

CPU_PER_WALL = 16   # the compiler is multi-threaded: the CPU-time limit is a backstop, the wall clock the limit
DEFAULT_NEFF_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autocomp-zmq" / "trainium-neff"


def _default_limits() -> sandbox.Limits:
    # No private network namespace: without root the launcher makes it inside a user namespace, where the
    # Neuron runtime's access to /dev/neuron* and its pinned (memlock) host buffers are not assured; and
    # no private filesystem view: the runtime needs /dev/neuron*, /sys, /opt/aws/neuron and the SDK's
    # Python environment, wherever the site installed them. Candidates still get rlimits, a private
    # working directory, a minimal environment, and nobody's uid when the evaluator is root.
    # No address-space limit: the compiler and runtime reserve far more virtual memory than they use.
    # 540 s of wall clock: under the coordinator's default eval lease of 600 s, so a slow kernel comes back as
    # a timeout rather than being handed to another evaluator. A PID namespace (as containers give the runtime):
    # a process the kernel's compile step leaves behind would otherwise still run beside the run step, whose
    # directory holds the inputs and the outputs the verdict reads.
    return sandbox.Limits(wall_s=540, cpu_s=540 * CPU_PER_WALL, mem_bytes=0, fsize_bytes=4 << 30, nofile=4096,
                          isolate_net=False, private_fs=False, pid_ns=True)


@dataclass
class Options:
    python: str | None = None           # the SDK's Python; None: $AUTOCOMP_NEURON_PYTHON, ours, the DLAMI's venvs
    nrtpy_python: str | None = None     # nrtpy's Python; None: $AUTOCOMP_NRTPY_PYTHON, ours, the DLAMI's
    libnrt: str | None = None           # the runtime's C library; None: $AUTOCOMP_LIBNRT, /opt/aws/neuron/lib
    # what runs the NEFF: "nrtpy" (device timing, SDK 2.32+), "libnrt" (the host's clock around nrt_execute, any
    # SDK), or "auto": nrtpy where installed, else libnrt
    runtime: str = "auto"
    compile_cache: Path | None = DEFAULT_NEFF_CACHE   # NEFFs by source, call, SDK and platform; None: off
    lock_dir: Path = DEFAULT_LOCK_DIR   # per-core lock files: one evaluator process per NeuronCore
    warmup: int = 10                    # warm-up runs of the NEFF, then measured runs
    iters: int = 100
    # the percentile reported as the latency: P50 is robust to the odd slow run; the Autocomp paper reported P99
    # of 10 runs after 2 warm-ups (latency_percentile=99, warmup=2, iters=10). Both are in the feedback.
    latency_percentile: int = 50
    # the cores of one chip share its HBM: by default one evaluator at a time times its kernel on a chip (the
    # others wait, holding the chip's lock file); False times them all at once, disturbing memory-bound ones
    exclusive_timing: bool = True
    profile: bool = True                # the profiler's summary (neuron-explorer, or neuron-profile) for utilisation
    limits: sandbox.Limits = field(default_factory=_default_limits)
    pass_env: tuple[str, ...] = ("LD_LIBRARY_PATH", "NEURON_PLATFORM_TARGET_OVERRIDE", "NEURON_CC_FLAGS",
                                 "NEURON_RT_LOG_LEVEL")   # site settings the SDK may need
    input_seed: int | None = None       # None: fresh inputs every evaluation (a seed from the OS)
    problems_dir: Path | None = None    # None: the descriptor's (hw_runners/trainium_sim/problems)
    platform: str | None = None         # "trn1", "trn2" or "trn3" for the peak rates; None: detected
    # Logical NeuronCore config on trn2/trn3: kernels are launched as kernel(...), which is LNC=1, and the
    # runtime's NEURON_LOGICAL_NC_CONFIG must match (AWS: "Mismatching the two will cause a runtime error"), so
    # the harness sets it, and utilisation is against this many physical cores
    lnc: int = 1
    work_root: Path | None = None
    keep_workdir: bool = False

    def __post_init__(self) -> None:
        self.lock_dir = Path(self.lock_dir)
        self.compile_cache = Path(self.compile_cache) if self.compile_cache else None
        if self.problems_dir is not None:
            self.problems_dir = Path(self.problems_dir).resolve()
        if not (isinstance(self.warmup, int) and self.warmup >= 0 and isinstance(self.iters, int) and self.iters >= 1):
            raise ValueError("warmup must be an integer >= 0 and iters an integer >= 1")
        if self.latency_percentile not in PERCENTILES:
            raise ValueError(f"latency_percentile must be one of nki.benchmark's {PERCENTILES}, not "
                             f"{self.latency_percentile!r}")
        if self.lnc not in (1, 2):
            raise ValueError(f"lnc (logical NeuronCore config) must be 1 or 2, not {self.lnc!r}")
        if self.runtime not in ("auto", "nrtpy", "libnrt"):
            raise ValueError(f"runtime must be auto, nrtpy or libnrt, not {self.runtime!r}")
        if self.platform not in (None, "trn1", "trn2", "trn3"):
            raise ValueError(f"platform must be trn1, trn2 or trn3, not {self.platform!r}")


_CLAIMS: dict[Path, CoreClaim] = {}     # this process's core, per lock directory: held until the process exits


class Trainium(Target):
    """Real Trainium through the Neuron SDK: one evaluator per NeuronCore."""
    name = "trainium"

    def __init__(self, **options) -> None:
        if isinstance(options.get("limits"), dict):   # the fields given, over this target's defaults
            options["limits"] = dataclasses.replace(_default_limits(), **options["limits"])
        self.options = Options(**options)

    def problems(self) -> list[Problem]:
        return list(load_problems(self.name, self._problems_dir()))

    def problem(self, name: str, isa: str | None = None) -> Problem:
        """Described by its definition for the ISA profile's NKI dialect (trainium-sim's, workloads.in_profile)."""
        problem = super().problem(name, isa)
        spec = spec_of(problem, self._problems_dir())
        return in_profile(problem, spec, self.info().isa_profile(isa).setting("dialect"))

    def devices(self) -> list[str]:
        """The host's NeuronCores, or those NEURON_RT_VISIBLE_CORES names when it names several."""
        named = parse_core_list(os.environ.get(VISIBLE_CORES, "")) if os.environ.get(VISIBLE_CORES) else None
        return [f"nc{core}" for core in (named if named and len(named) > 1 else host_cores(self.options.lnc))]

    def unmet_requirements(self) -> list[str]:
        """What this host lacks to run evaluations (empty when it has everything)."""
        sdk, tried = self._sdk()
        missing = missing_sdk(sdk, tried, host_cores(self.options.lnc), os.environ.get(VISIBLE_CORES))
        if self.options.platform is None:
            try:
                platform_name()
            except PlatformError as exc:
                missing.append(f"a known platform: {exc}")
        return missing

    def profile_for(self, code: str) -> str | None:
        """The ISA profile of the kernel's NKI dialect (nki1 for neuronxcc.nki, nki2 for `import nki`)."""
        return profile_for(code, self.info().isa_profiles)

    def judge(self, problem: Problem, code: str, **kw) -> EvalResult:
        """A kernel in the other NKI dialect than the problem's ISA profile (nki1, nki2) is refused before anything
        runs, as trainium-sim refuses it; then the checks of every target and evaluate()."""
        wrong = profile_mismatch(code, self.info().isa_profile(problem.isa), self.info().isa_profiles)
        if wrong:
            return EvalResult.failure("policy", wrong, latency_unit="us")
        return super().judge(problem, code, **kw)

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        if time_limit_s is not None:   # the same target with the child's limits replaced
            clone = copy.copy(self)
            clone.options = dataclasses.replace(self.options, limits=dataclasses.replace(
                self.options.limits, wall_s=time_limit_s, cpu_s=math.ceil(time_limit_s * CPU_PER_WALL)))
            return clone.evaluate(problem, code, seed=seed, trace_path=trace_path)
        started = time.monotonic()
        missing = self.unmet_requirements()
        if missing:
            return EvalResult.failure("setup", "the trainium target cannot run on this host, which lacks "
                                      + "; and ".join(missing) + ". " + INSTALL_HINT
                                      + " Without Trainium hardware, use --target trainium-sim.", latency_unit="us")
        claim = self._claim()
        if claim is None:
            return EvalResult.failure("setup", f"every NeuronCore of this host ({len(host_cores(self.options.lnc))}) is claimed by "
                                      f"another evaluator (lock files in {self.options.lock_dir}); run at most one "
                                      "evaluator per NeuronCore, or set NEURON_RT_VISIBLE_CORES", latency_unit="us")
        spec = load_specs(self._problems_dir())[problem.name]
        work = Path(tempfile.mkdtemp(prefix="trainium-", dir=self.options.work_root))
        try:
            result = self._evaluate_in(work, spec, code, claim, trace_path)
        finally:
            if not self.options.keep_workdir:
                shutil.rmtree(work, ignore_errors=True)
        result.wall_s = time.monotonic() - started
        return bounded(result)

    # -- steps ----------------------------------------------------------------------------------------
    def _evaluate_in(self, work: Path, spec: ProblemSpec, code: str, claim: CoreClaim,
                     trace_path: Path | None) -> EvalResult:
        opts = self.options
        sdk = self._sdk()[0]
        try:
            written = kernel_dialect(code)
            if written is None:    # no NKI import (a broken file): the SDK's own dialect (v1 up to SDK 2.29)
                written = V1 if V1 in sdk.dialects() else V2 if V2 in sdk.dialects() else None
            dialect = check(written, sdk)
            spec = spec.for_dialect(dialect)      # the problem as defined for kernels in this dialect ([nki2])
        except DialectError as exc:
            return EvalResult.failure("setup", str(exc), latency_unit="us")
        runtime = self._runtime(sdk)
        if isinstance(runtime, str):
            return EvalResult.failure("setup", f"{sdk.describe()} compiles this kernel, but {runtime}. " + NRTPY_HINT,
                                      latency_unit="us")
        input_seed = opts.input_seed if opts.input_seed is not None else secrets.randbits(63)
        try:
            inputs = _device_view(spec, spec.make_inputs(input_seed))
            job = harness.job(spec, opts.warmup, opts.iters, opts.profile, self._chip_lock(self._chip(claim)))
        except Exception as exc:   # a broken problem (its make_inputs, or a call we cannot write), not a kernel
            return EvalResult.failure("setup", f"problem {spec.name}: {type(exc).__name__}: {exc}", latency_unit="us")
        (work / "kernel.py").write_text(code)
        env = self._env(work, claim, sdk.python)
        with ThreadPoolExecutor(1) as pool:   # the reference (numpy, GIL released) overlaps the device run
            expected = pool.submit(spec.reference, inputs)
            run_env = {**self._env(work, claim, runtime.python), "LD_LIBRARY_PATH": _with_neuron_lib(env)}
            ran = run(work, code, dialect, job, inputs, sdk, runtime, env, run_env, opts.limits,
                      NeffCache(opts.compile_cache))
            try:
                want = expected.result()
            except Exception as exc:   # a broken problem, not a broken kernel
                return EvalResult.failure("setup", f"the reference of problem {spec.name} failed: "
                                          f"{type(exc).__name__}: {exc}", latency_unit="us")
        if len(want) != len(spec.outputs):
            return EvalResult.failure("setup", f"problem {spec.name}: its reference returns {len(want)} arrays for "
                                      f"{len(spec.outputs)} declared outputs", latency_unit="us")
        strip = str(ran.dir) + "/"
        common = dict(stdout=sandbox.read_tail(ran.dir / "stdout.txt").replace(strip, ""),
                      stderr=sandbox.read_tail(ran.dir / "stderr.txt", 6000).replace(strip, ""),
                      sandbox=ran.outcome.notes, latency_unit="us")
        res = ran.result()
        if res is None:
            return no_result(ran.outcome, opts.limits, common)
        if not res.get("ok"):
            return stage_failure(res, strip, common)
        if trace_path is not None and (ran.dir / "kernel.ntff").exists():
            shutil.copy(ran.dir / "kernel.ntff", trace_path)   # the device trace; the profiler needs the NEFF too
            if (ran.dir / "kernel.neff").exists():
                shutil.copy(ran.dir / "kernel.neff", Path(trace_path).with_suffix(".neff"))
        return self._verdict(ran, spec, res, want, input_seed, claim, common, dialect, sdk, runtime)

    def _verdict(self, run: Run, spec: ProblemSpec, res: dict, want: tuple[np.ndarray, ...], input_seed: int,
                 claim: CoreClaim, common: dict, dialect: str, sdk: Sdk, runtime: Runtime) -> EvalResult:
        work = run.dir
        timer = runtime.name
        outputs = res.get("outputs") if isinstance(res.get("outputs"), list) else []
        chip = self._chip(claim)
        if len(outputs) != len(spec.outputs):
            names = ", ".join(t.name for t in spec.outputs)
            return EvalResult.failure("wrong_result", f"solution returned {len(outputs)} arrays; expected "
                                      f"{len(spec.outputs)} ({names})", **common)
        got = []
        for i in range(len(spec.outputs)):
            try:
                got.append(np.load(work / f"out_{i}.npy", allow_pickle=False))
            except (OSError, ValueError) as exc:
                return EvalResult.failure("crash", f"output {i} could not be read back: {exc}", **common)
        lat = latencies(res)
        if not lat:
            return EvalResult.failure("crash", f"{timer} reported no usable P50/P99 latency", **common)
        opts = self.options
        platform = opts.platform or platform_name()
        lnc = opts.lnc if platform != "trn1" else 1
        floats = [t.dtype for t in spec.inputs if t.dtype != "int32"]
        fp32 = bool(floats) and all(d == "float32" for d in floats)
        key = f"p{opts.latency_percentile}"
        if key not in lat:
            return EvalResult.failure("crash", f"{timer} reported no P{opts.latency_percentile} latency", **common)
        perf = performance(lat[key], spec.flops, sum(spec.compulsory_bytes), fp32, scaled(PEAKS[platform], lnc))
        prof = profile_metrics(read_json(work / "profile.json", PROFILE_LIMIT, after_log_lines=True)) \
            if opts.profile else {}
        errors = [max_errors(g.astype(np.float64), w) for g, w in zip(got, want) if g.shape == w.shape]
        m = {**perf, "p50_us": lat["p50"], "p99_us": lat["p99"], "latency_us": lat,
             "percentile": opts.latency_percentile, "core": claim.cores,
             "timing": f"alone on chip {chip}" if chip is not None else "beside the chip's other cores",
             "warmup": opts.warmup, "iters": opts.iters, "input_seed": input_seed, "platform": platform,
             "profile": prof, "seconds": _stage_seconds(res.get("seconds"), run.compile_seconds),
             "timer": timer, "dialect": dialect, "sdk": sdk.describe(), "neff": "cached" if run.cached else "compiled",
             "output_dtypes": [str(o.get("dtype"))[:40] if isinstance(o, dict) else "?" for o in outputs],
             "max_abs_err": max((e[0] for e in errors), default=0.0),
             "max_rel_err": max((e[1] for e in errors), default=0.0)}
        if opts.profile and not prof:
            m["profile_error"] = str(res.get("profile_error") or "the profiler's summary had no engine metrics")[:600]
        result = EvalResult(correct=True, latency=lat[key], utilization=perf["utilization"],
                            roofline_fraction=perf["roofline_fraction"], bound=perf["bound"], feedback=m,
                            feedback_text=feedback_text(m), **common)
        for t, g, w in zip(spec.outputs, got, want):
            wrong = mismatch(t.name, g, w, spec.atol, spec.rtol)
            if wrong:
                result.correct, result.error_kind = False, "wrong_result"
                result.error = f"wrong result on fresh random inputs (seed {input_seed}): {wrong}"
                break
        return result

    # -- host -----------------------------------------------------------------------------------------
    def _problems_dir(self) -> Path:
        return self.options.problems_dir or self.info().problems

    def _configured(self, which: str) -> str | None:
        """The Python the options or the environment name for the SDK ("neuron") or for nrtpy ("nrtpy")."""
        option = self.options.python if which == "neuron" else self.options.nrtpy_python
        return option or os.environ.get(f"AUTOCOMP_{which.upper()}_PYTHON") or None

    def _sdk(self) -> tuple[Sdk | None, tuple[str, ...]]:
        return find_sdk(self._configured("neuron"))

    def _runtime(self, sdk: Sdk) -> Runtime | str:
        """What runs this host's NEFFs (the runtime option: nrtpy where installed, else libnrt), or what is
        missing, in words."""
        want = self.options.runtime
        if want in ("auto", "nrtpy"):
            python, tried = find_nrtpy(self._configured("nrtpy"))
            if python:
                return Runtime("nrtpy", python)
            if want == "nrtpy":
                return f"no Python among {', '.join(tried)} has nrtpy (runtime=nrtpy)"
        path, tried = find_libnrt(self.options.libnrt or os.environ.get("AUTOCOMP_LIBNRT") or None)
        if path:
            return Runtime("libnrt", sdk.python, path)
        return (f"no Python has nrtpy and the runtime's C library is not at {' or '.join(tried)}" if want == "auto"
                else f"the runtime's C library is not at {' or '.join(tried)} (runtime=libnrt)")

    def _chip(self, claim: CoreClaim) -> int | None:
        """The chip whose timing lock this core's timed runs hold; None: timing is not exclusive, or the claim
        names no single core (then the chip is unknown)."""
        if not self.options.exclusive_timing or not claim.cores.isdigit():
            return None
        return int(claim.cores) // cores_per_device()

    def _chip_lock(self, chip: int | None) -> str | None:
        """The chip's lock file (created open to every user: the kernel's process may run as nobody)."""
        if chip is None:
            return None
        path = Path(self.options.lock_dir) / f"chip-{chip}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            os.fchmod(fd, 0o666)
        except OSError:
            pass                    # another user's file: theirs to share
        finally:
            os.close(fd)
        return str(path)

    def _claim(self) -> CoreClaim | None:
        key = self.options.lock_dir.resolve()
        if key not in _CLAIMS:
            claim = claim_core(host_cores(self.options.lnc), self.options.lock_dir)
            if claim is None:
                return None
            _CLAIMS[key] = claim
        return _CLAIMS[key]

    def _env(self, work: Path, claim: CoreClaim, python: str) -> dict[str, str]:
        """Only what the SDK needs: its Python's and tools' directories on PATH, the core, a private HOME."""
        path = dict.fromkeys([os.path.dirname(python), str(NEURON_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
        env = {"PATH": ":".join(path), VISIBLE_CORES: claim.cores, "HOME": str(work), "TMPDIR": str(work / "tmp"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        env.update({k: os.environ[k] for k in self.options.pass_env if k in os.environ})
        env["NEURON_LOGICAL_NC_CONFIG"] = str(self.options.lnc)   # what the kernel is launched with (trn1 ignores it)
        if self.options.platform:   # the compiler targets the platform the options name, not the host's
            env["NEURON_PLATFORM_TARGET_OVERRIDE"] = self.options.platform
        return env


def _device_view(spec: ProblemSpec, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs as the kernel will see them: bf16 and fp16 ones rounded (kept as float32 for the files)."""
    out = dict(inputs)
    for t in spec.inputs:
        if t.dtype == "bfloat16":
            out[t.name] = round_bf16(inputs[t.name])
        elif t.dtype == "float16":
            out[t.name] = inputs[t.name].astype(np.float16).astype(np.float32)
    return out


STAGE_NAMES = ("inputs", "import", "run", "outputs", "device_setup", "device_run", "benchmark", "chip_wait", "profile")


def _stage_seconds(raw: object, compiled: object = None) -> dict[str, float]:
    """How long each harness stage took (compiling is most of it), from the untrusted result files; NKI v2's
    compile step's stages are prefixed compile_."""
    out = {}
    for prefix, doc in (("compile_", compiled), ("", raw)):
        if isinstance(doc, dict):
            out.update({prefix + k: float(v) for k, v in doc.items() if k in STAGE_NAMES and isinstance(v, (int, float))
                        and not isinstance(v, bool) and math.isfinite(v)})
    return out


def _with_neuron_lib(env: dict[str, str]) -> str:
    """LD_LIBRARY_PATH with the runtime library's directory, as nrtpy's setup asks (/opt/aws/neuron/lib)."""
    parts = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    return ":".join(dict.fromkeys(["/opt/aws/neuron/lib", *parts]))
