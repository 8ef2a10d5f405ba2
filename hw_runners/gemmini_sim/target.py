"""gemmini-sim: evaluate C kernels written with Gemmini intrinsics on the host.

One evaluation: line endings normalised, static policy check -> compile with
the host gcc against the shim, sandboxed in a private filesystem view that
holds only the toolchain and the build directory -> two sandboxed processes
joined by pipes: the trusted replayer, which owns the job (every input set,
public and hidden), and the candidate kernel, which receives one public input
set at a time from the replayer and only *records* the Gemmini instructions it
issues. The replayer executes that trace with the functional and timing models
on its own copy of the inputs, then replays the same instructions on hidden
input sets the kernel never saw -> compare every output bit-exactly with numpy
-> feedback. Nothing the kernel does in its own process can change its
outputs, verdict or cycles, and answers prepared by the CPU fail the hidden sets.
"""
from __future__ import annotations

import copy
import dataclasses
import fcntl
import functools
import math
import os
import secrets
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult, IsaProfile, Problem, Target, bounded
from autocomp_zmq.hw_runners.gemmini_sim import configs as gconfigs, feedback
from autocomp_zmq.hw_runners.gemmini_sim.autocompbody import AutocompBodyError, with_problem_signature
from autocomp_zmq.hw_runners.gemmini_sim.policy import PolicyError, check_source
from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES, INPUT_SETS, Family, load_problems, parametric_problem
from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig
from autocomp_zmq.hw_runners.gemmini_sim.tracefile import write_trace
from autocomp_zmq.hw_runners.gemmini_sim.verdict import close as _close, mismatch as _mismatch, parse_stats as _parse_stats
from autocomp_zmq.sandbox.buildcache import cached_build, run_build

CSRC = Path(__file__).with_name("csrc")
# linked with the candidate: the instructions record themselves, Gemmini's software library, the harness
_KERNEL_SIDE = ("record.c", "fsm.c", "gemmini_lib.c", "gemmini_conv_lib.c", "harness.c", "job.c", "diag.c")
# the trusted replayer: trace, DRAM view, loop FSMs, functional and timing models
_REPLAYER = ("replay.c", "stream.c", "moves.c", "dram.c", "fsm.c", "functional.c", "execute.c", "counters.c",
             "timing.c", "memtiming.c", "job.c", "diag.c", "cpuops.c")
CFLAGS = ["-std=gnu11", "-O2", "-Werror=implicit-function-declaration"]
KERNEL_OUTPUT_BYTES = 4 << 20   # what a kernel may write to stdout/stderr/diagnostics, in all
_FSM_CALLS = {"gemmini_loop_ws", "gemmini_loop_conv_ws"}   # a profile that forbids these may issue no FSM work
_BOUNDS: dict[tuple, int | None] = {}   # (problem, role, timing) -> cycles of a profile's bound kernel


def _headers() -> list[Path]:
    return sorted(CSRC.glob("*.h")) + sorted(CSRC.glob("include/**/*.h"))


def _suffix(cfg: gconfigs.GemminiConfig | None) -> str:
    return "" if cfg is None or not cfg.define else "-" + cfg.name


def shim_library(cfg: gconfigs.GemminiConfig | None = None) -> Path:
    """The kernel-side intrinsics, loop FSMs and harness as a static library, built once per machine and
    configuration (its C types and DIM are compile-time)."""
    flags = CFLAGS + (cfg.cflags if cfg else [])

    def build(out: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            objs = []
            for src in _KERNEL_SIDE:
                obj = Path(tmp) / (src[:-2] + ".o")
                # the harness's seccomp filter is built from the sandbox's seccomp_filter.h
                run_build(["gcc", *flags, "-I", str(sandbox.HEADER_DIR), "-c", str(CSRC / src), "-o", str(obj)])
                objs.append(str(obj))
            run_build(["ar", "rcs", str(out), *objs])
    sources = [CSRC / s for s in _KERNEL_SIDE] + _headers() + [sandbox.SECCOMP_HEADER]
    return cached_build(f"libgemminisim{_suffix(cfg)}.a", sources, flags, build)


def replayer(cfg: gconfigs.GemminiConfig | None = None) -> Path:
    """The trusted replayer (functional + timing model), built once per machine and configuration."""
    flags = CFLAGS + (cfg.cflags if cfg else [])
    return cached_build(f"gemmini-replay{_suffix(cfg)}", [CSRC / s for s in _REPLAYER] + _headers(), flags,
                        lambda out: run_build(["gcc", *flags, "-o", str(out), *(str(CSRC / s) for s in _REPLAYER),
                                               "-lm"]))


def semantics(problem: Problem) -> Family:
    """What a problem's kernels compute: a user's problem file's own, else its family's."""
    return problem.semantics or FAMILIES[problem.family]


def _input_sets(fam: Family, dims: dict[str, int], seed: int, sets: int):
    """`sets` input sets of every kind in turn, from `seed`, and their reference outputs."""
    inputs = [fam.make_inputs(dims, seed, INPUT_SETS[s % len(INPUT_SETS)]) for s in range(sets)]
    return inputs, [fam.reference(dims, x) for x in inputs]


@functools.lru_cache(maxsize=8)
def _inputs_and_expected(fam: Family, dims: tuple[tuple[str, int], ...], seed: int, sets: int):
    """The public sets: the same for every evaluation with this seed, so they are cached."""
    return _input_sets(fam, dict(dims), seed, sets)


def normalize_newlines(code: str) -> str:
    """gcc ends a line at \\n, \\r\\n and a lone \\r: after this, the policy and the compiler see the same lines."""
    return code.replace("\r\n", "\n").replace("\r", "\n")


@dataclass
class Options:
    timing: TimingConfig = field(default_factory=TimingConfig)
    config: str | None = None        # the Gemmini configuration of problems that do not name their own
    autocomp_body: bool = False      # run only solution()'s body, under the problem's signature (as Autocomp does)
    compile_limits: sandbox.Limits = field(default_factory=lambda: sandbox.Limits(wall_s=60, cpu_s=60))
    run_limits: sandbox.Limits = field(default_factory=lambda: sandbox.Limits(wall_s=120, cpu_s=120, mem_bytes=2 << 30))
    input_sets: int = 3
    hidden_sets: int = 1
    secret_seed: int | None = None   # None: hidden sets drawn from the OS's randomness in every evaluation
    work_root: Path | None = None
    keep_workdir: bool = False
    kernel_limits: sandbox.Limits = field(init=False)   # run_limits, confined further (set below)

    def __post_init__(self) -> None:
        if self.config is not None:
            gconfigs.get(self.config)   # an unknown name fails here, with the known ones
        if not isinstance(self.input_sets, int) or self.input_sets < 2:
            # the checks that instructions and loaded constants do not depend on the data compare sets
            raise ValueError("input_sets must be an integer >= 2")
        if not isinstance(self.hidden_sets, int) or self.hidden_sets < 1:
            raise ValueError("hidden_sets must be an integer >= 1: hidden sets are what CPU-prepared answers fail")
        # the compiler sees only the toolchain and its build directory; the kernel only its own directory
        self.compile_limits = dataclasses.replace(self.compile_limits, private_fs=True,
                                                  ro_paths=sandbox.toolchain_paths())
        self.kernel_limits = dataclasses.replace(self.run_limits, private_fs=True, ro_paths=(),
                                                 fsize_bytes=min(self.run_limits.fsize_bytes, KERNEL_OUTPUT_BYTES))


class GemminiSim(Target):
    """Embedded Gemmini model: the default target, needs only a C compiler."""
    name = "gemmini-sim"

    def __init__(self, **options) -> None:
        if isinstance(options.get("timing"), dict):
            options["timing"] = TimingConfig.from_dict(options["timing"])
        if isinstance(options.get("autocomp_body"), str):   # --target-option autocomp_body=1
            options["autocomp_body"] = options["autocomp_body"].lower() in ("1", "true", "yes")
        self.options = Options(**options)

    def machine(self, problem: Problem) -> gconfigs.GemminiConfig:
        """The configuration `problem` runs on, with the `timing` option's parameters applied to it (ValueError
        when the problem and the `config` option disagree)."""
        cfg = gconfigs.choose(getattr(semantics(problem), "config", None), self.options.config)
        default = TimingConfig()
        overrides = {f.name: getattr(self.options.timing, f.name) for f in dataclasses.fields(TimingConfig)
                     if getattr(self.options.timing, f.name) != getattr(default, f.name)}
        return cfg.with_overrides(overrides)

    def problems(self) -> list[Problem]:
        return list(load_problems(self.name, self.info().problems))

    def parametric(self, name: str) -> Problem | None:
        return parametric_problem(self.name, self.info().problems, name)

    def name_patterns(self) -> list[str]:
        return [f"{f.pattern} ({f.sizes_note})" for f in FAMILIES.values() if f.dim_names]

    def problem_from_definition(self, definition) -> Problem:
        from autocomp_zmq.hw_runners.gemmini_sim.userproblems import from_definition
        return from_definition(self, definition)

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        if time_limit_s is not None:   # the same target with the kernel's and replayer's limits replaced
            # the CPU limit a second later: a busy kernel then reaches the wall-clock limit first (a timeout)
            limits = dataclasses.replace(self.options.run_limits, wall_s=time_limit_s,
                                         cpu_s=math.ceil(time_limit_s) + 1)
            clone = copy.copy(self)
            clone.options = dataclasses.replace(self.options, run_limits=limits)
            return clone.evaluate(problem, code, seed=seed, trace_path=trace_path)
        started = time.monotonic()
        code = normalize_newlines(code)
        profile = self.info().isa_profile(problem.isa)
        try:
            cfg = self.machine(problem)
        except ValueError as exc:
            return EvalResult.failure("gemmini", str(exc))
        try:
            if self.options.autocomp_body:
                code = with_problem_signature(code, semantics(problem).signature(problem.dims))
            check_source(code)
        except (PolicyError, AutocompBodyError) as exc:
            kind = "policy" if isinstance(exc, PolicyError) else "compile"
            return EvalResult.failure(kind, f"kernel rejected before compiling: {exc}")
        work = Path(tempfile.mkdtemp(prefix="gemmini-sim-", dir=self.options.work_root))
        try:
            result = self._evaluate_in(work, problem, code, seed, trace_path, profile, cfg)
        finally:
            if not self.options.keep_workdir:
                shutil.rmtree(work, ignore_errors=True)
        result.wall_s = time.monotonic() - started
        return bounded(result)

    # -- steps ----------------------------------------------------------------
    def _evaluate_in(self, work: Path, problem: Problem, code: str, seed: int, trace_path: Path | None,
                     profile: IsaProfile, cfg: gconfigs.GemminiConfig) -> EvalResult:
        """work/build: what the compiler sees; work/kernel: what the kernel process sees (its binary and
        output files); work/judge: the replayer's job (every input set), outputs and stats."""
        fam = semantics(problem)
        opts = self.options
        build, kernel_dir, judge = work / "build", work / "kernel", work / "judge"
        for d in (build, kernel_dir, judge, build / "tmp"):
            d.mkdir(mode=0o700)
        failure = self._compile(build, problem, code, cfg)
        if failure:
            return failure
        os.replace(build / "kernel", kernel_dir / "kernel")
        sandbox.prepare_workdir(kernel_dir, opts.kernel_limits)

        public, expected = _inputs_and_expected(fam, tuple(problem.dims.items()), seed, opts.input_sets)
        secret = opts.secret_seed if opts.secret_seed is not None else secrets.randbits(63)
        hidden, hidden_expected = _input_sets(fam, problem.dims, secret, opts.hidden_sets)   # never cached
        args = fam.args(problem.dims)
        out_spec = next(a for a in args if a.output)
        header = ["gemmini-sim-job 1", *cfg.timing.header_lines()]
        header += [f"arg {'out' if a.output else 'in'} {a.nbytes}" for a in args]
        header += [f"out_arg {args.index(out_spec)}", f"sets {len(public)}", f"hidden {len(hidden)}",
                   f"macs {fam.macs(problem.dims)}", f"trace {int(trace_path is not None)}", "end"]
        with open(judge / "job.bin", "wb") as fh:
            fh.write(("\n".join(header) + "\n").encode())
            for arrays in public + hidden:
                for a in arrays:
                    fh.write(np.ascontiguousarray(a).tobytes())
        shutil.copy(replayer(cfg), judge / "gemmini-replay")
        sandbox.prepare_workdir(judge, opts.run_limits)
        run, replayed = self._run(kernel_dir, judge)

        stdout = sandbox.read_tail(kernel_dir / "stdout.txt")
        _, verdict = _parse_stats(kernel_dir / "diag.txt")
        stats, replay_verdict = _parse_stats(judge / "replay.txt")
        if trace_path is not None and (judge / "timing.txt").exists():
            write_trace(Path(trace_path), judge / "timing.txt", problem, code, seed)
        limits = opts.kernel_limits
        common = dict(stdout=stdout, sandbox=run.notes + verdict.get("notes", []))
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
            written = max((f.stat().st_size for f in kernel_dir.glob("*.txt")), default=0)
            if written >= limits.fsize_bytes:   # the crash report itself could not be written
                kind, reason = "crash", (f"output size limit exceeded (the kernel printed too much: at most "
                                         f"{limits.fsize_bytes >> 20} MiB to stdout, stderr or its diagnostics)")
            elif run.returncode is not None and not run.timed_out:
                reason = f"the program exited with status {run.returncode} before the harness finished " \
                         "(the kernel must return from solution(), not exit)"
            return EvalResult.failure(kind, f"kernel {reason}", **common)
        if not replayed.ok or "ok" not in replay_verdict:
            why = replay_error or replayed.describe(opts.run_limits)
            return EvalResult.failure("limit", f"replaying the kernel's instructions failed: {why}", **common)
        if _FSM_CALLS & set(profile.forbid) and stats.get("fsm_instrs"):
            # the trusted replayer's count, whatever the source looked like
            return EvalResult.failure("policy", f"kernel rejected: {int(stats['fsm_instrs']):,} of its instructions "
                                      f"were issued by the loop FSMs, which --isa {profile.name} does not allow "
                                      "(they are the upper bound); issue mvin, preload, compute and mvout from "
                                      "the CPU", **common)

        m = feedback.metrics(stats, fam.macs(problem.dims), fam.compulsory_bytes(problem.dims), cfg.timing,
                             replay_verdict.get("warnings", [])[:8], array=cfg)
        if profile.bound:
            m["upper_bound"] = feedback.upper_bound(profile.bound_name, self.bound_cycles(problem, profile.bound),
                                                    m["cycles"])
        result = EvalResult(correct=True, latency=m["cycles"], utilization=m["utilization"],
                            roofline_fraction=m["roofline_fraction"], bound=m["bound"], feedback=m,
                            feedback_text=feedback.text(m), **common)
        produced = np.fromfile(judge / "out.bin", dtype=out_spec.dtype)
        per_set = int(np.prod(out_spec.shape))
        for s, want in enumerate(expected + hidden_expected):
            got = produced[s * per_set:(s + 1) * per_set].reshape(out_spec.shape)
            if got.shape != want.shape or not _close(got, want, fam.tolerance).all():
                result.correct = False
                result.error_kind = "wrong_result"
                result.error = _mismatch(out_spec.name, got, want, s, len(expected), len(hidden_expected),
                                         fam.tolerance)
                break
        return result

    def bound_cycles(self, problem: Problem, role: str) -> int | None:
        """Cycles of the problem's `role` kernel under the default profile: the upper bound a profile
        reports (cached per process; None if that kernel fails, which the shipped kernels' tests rule out)."""
        if role not in problem.kernels:
            return None
        defined = problem.definition.digest if problem.definition else ""   # two files may share a name
        cfg = self.machine(problem)
        key = (problem.name, defined, role, cfg.name, tuple(cfg.timing.header_lines()))
        if key not in _BOUNDS:
            full = dataclasses.replace(problem, isa="")
            result = self.evaluate(full, problem.kernel_source(role))
            _BOUNDS[key] = int(result.latency) if result.correct else None
        return _BOUNDS[key]

    def _compile(self, build: Path, problem: Problem, code: str, cfg: gconfigs.GemminiConfig) -> EvalResult | None:
        """Compile in `build`; None on success, else the failure."""
        fam = semantics(problem)
        limits = self.options.compile_limits
        (build / "kernel.c").write_text(code)
        call = ", ".join(f"b[{i}]" for i in range(len(fam.args(problem.dims))))
        (build / "entry.c").write_text(f"void autocomp_entry(void **b) {{ solution({call}); }}\n")
        shutil.copytree(CSRC / "include", build / "inc")
        shutil.copy(shim_library(cfg), build / "libgemminisim.a")
        # the entry point's declaration, where gemmini.h has none (a problem file's signature): a kernel
        # whose solution() differs fails to compile with a clear message; then the macros Autocomp's harness
        # defines for the problem (MAT_DIM_I, A_MATRIX_NAME, ...), after gemmini.h so that they cannot touch it
        header = fam.prototype(problem.dims)
        header = (header + "\n" if header else "") + fam.harness_header(problem.dims)
        if header:
            (build / "problem.h").write_text(header)
        sandbox.prepare_workdir(build, limits)
        cc = ["gcc", *CFLAGS, *cfg.cflags, "-Iinc", "-include", "gemmini.h", *(["-include", "problem.h"] if header else []),
              *fam.defines(problem.dims), "-o", "kernel", "kernel.c", "entry.c", "libgemminisim.a", "-static", "-lm"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": str(build / "tmp")}
        out = sandbox.run(cc, build, limits, env=env)
        diagnostics = sandbox.read_tail(build / "stderr.txt", 6000).replace(str(build) + "/", "")
        if out.ok and (build / "kernel").exists():
            return None
        why = "compile error" if out.returncode == 1 else f"compiler {out.describe(limits)}"
        return EvalResult.failure("compile", f"{why}:\n{diagnostics}", stderr=diagnostics, sandbox=out.notes)

    def _run(self, kernel_dir: Path, judge: Path) -> tuple[sandbox.Outcome, sandbox.Outcome]:
        """The replayer and the kernel process, joined by two pipes: the trace (kernel -> replayer)
        and the inputs (replayer -> kernel, one public set at a time)."""
        pipes = []
        try:
            for _ in range(2):
                r, w = os.pipe()
                pipes += [fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 100), fcntl.fcntl(w, fcntl.F_DUPFD_CLOEXEC, 100)]
                os.close(r)
                os.close(w)
            trace_r, trace_w, inputs_r, inputs_w = pipes
            replay = sandbox.start(["./gemmini-replay"], judge, self.options.run_limits, tag="-replay",
                                   inherit={7: trace_r, 9: inputs_w},
                                   fds={1: ("w", "replay-out.txt"), 2: ("w", "replay-err.txt"), 3: ("r", "job.bin"),
                                        4: ("w", "out.bin"), 5: ("w", "replay.txt"), 8: ("w", "timing.txt")})
            kernel = sandbox.start(["./kernel"], kernel_dir, self.options.kernel_limits, seccomp=True,
                                   inherit={3: inputs_r, 6: trace_w}, fds={5: ("w", "diag.txt")})
            for fd in pipes:
                os.close(fd)
            pipes = []
            return kernel.wait(), replay.wait()
        finally:
            for fd in pipes:
                os.close(fd)
