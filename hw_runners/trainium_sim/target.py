"""trainium-sim: evaluate NKI kernels on an embedded NeuronCore-v2 model, no Neuron SDK needed.

One evaluation: the kernel's Python runs in a sandboxed child (sandboxed/child.py: empty environment,
rlimits, private filesystem view, no network, unprivileged, seccomp once its imports are done) against
trainium-sim's own `neuronxcc.nki` (frontend/), which records the instruction stream and nothing else.
Here, outside the sandbox, the stream is validated (program.py), executed on the evaluator's inputs,
a public seeded set and hidden sets drawn from a secret seed, stacked so one pass computes all of
them (replay.py), timed on the engine model (costmodel.py) and compared with the numpy reference of
the problem under its tolerance. The kernel never sees a value, so its stream cannot depend on data.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import secrets
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import msgpack
import numpy as np
from threadpoolctl import ThreadpoolController

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import DEFAULT_ISA, EvalResult, IsaProfile, Problem, Target, bounded
from autocomp_zmq.hw_runners.trainium_sim import costmodel, feedback, fp8, heap, slicing, tracer
from autocomp_zmq.hw_runners.trainium_sim.compare import finite_tolerance, mismatch
from autocomp_zmq.hw_runners.trainium_sim.dialect import profile_for, profile_mismatch
from autocomp_zmq.hw_runners.trainium_sim.forkserver import ForkServer
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.prepcache import PrepCache, as_compared
from autocomp_zmq.hw_runners.trainium_sim.program import StreamError, decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.program import API_NAMES, where as site_of
from autocomp_zmq.hw_runners.trainium_sim.workloads import ProblemSpec, in_profile, load_problems, name_patterns, parametric_problem, spec_of
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer
from autocomp_zmq.hw_runners.trainium_sim.tracer import CHILD_ENV, child_argv, gc_paused, gib

HERE = Path(__file__).resolve().parent
MAX_SOURCE = 256 * 1024
TRACE_LIMIT = 512 << 20


def _python_paths() -> tuple[str, ...]:
    """What the child's interpreter must read: its installation, numpy and msgpack, trainium-sim."""
    paths = {sys.base_prefix, sys.prefix, str(Path(np.__file__).parent.parent), str(Path(msgpack.__file__).parent),
             str(HERE)}
    paths |= {str(Path(p)) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()}
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    if libs.is_dir():
        paths.add(str(libs))
    return tuple(sorted({str(Path(p).resolve()) for p in paths} | set(sandbox.toolchain_paths())))


@dataclass
class Options:
    limits: sandbox.Limits = field(default_factory=lambda: sandbox.Limits(wall_s=60, cpu_s=60, mem_bytes=3 << 30,
                                                                          fsize_bytes=TRACE_LIMIT))
    hidden_sets: int = 1
    # one deadline for the whole evaluation (tracing, decoding, placement, replay, timing, comparison);
    # evaluate(time_limit_s=...) replaces it
    time_s: float = 300.0
    # the paper-shape kernels issue at most ~100k instructions and ~10 MiB of stream (~100 B each)
    max_instructions: int = 500_000
    max_trace_bytes: int = 64 << 20
    max_tiles: int = 500_000          # tensors declared (each on-chip tile is one)
    # what the trusted side may allocate beyond the evaluator's size while it decodes and replays a stream
    # (RLIMIT_AS); None: no ceiling
    max_memory_bytes: int | None = 8 << 30
    # values are checked on the final writes at a few random output points besides every corner and face
    # (slicing.py says what that catches); 0: compute and check every output element
    check_regions: int = 16
    # outputs of at most this many elements in all are computed and checked in full (cheap, and a search's
    # small problems keep the full guarantee)
    full_check_elements: int = 1 << 20
    work_root: Path | None = None
    # the simulated NeuronCore, named as the real runner (hw_runners/trainium) names platforms: trn1
    # (NeuronCore-v2), trn2 (v3) or trn3 (v4); None: trn1 for NKI v1 kernels (neuronxcc.nki), trn2 for NKI v2
    # (`import nki`, the dialect of trn2/trn3 users), decided per kernel from its imports
    platform: str | None = None
    # whose trn1 DMA measurements the cost model follows (platforms.DMA_FIGURES): "aws" (AWS's DMA guide and
    # tutorials) or "autocomp" (fitted to Autocomp's published optimization chains; params_dma_autocomp.toml).
    # trn1 only: trn2/trn3 kernels keep AWS's figures, the only ones published for them
    dma_figures: str = "aws"
    # trace in children forked from one sandboxed server per evaluator (forkserver.py), not in a freshly
    # launched interpreter per kernel (~0.1 s less per evaluation; the same sandbox either way)
    fork_server: bool = True
    # freed memory the evaluating process keeps for its next evaluation rather than taking fresh (zeroed) pages
    # from the kernel again (heap.py); 0: glibc's defaults
    retain_heap_bytes: int = 1 << 30
    # where a problem's public input set and expected outputs are kept between evaluator processes and runs
    # (prepcache.py; None: $AUTOCOMP_CACHE or $XDG_CACHE_HOME/autocomp-zmq, trainium-sim-prep), and how many
    # bytes it may hold (the least recently used entries go first); 0: nothing kept on disk
    prep_cache_dir: Path | None = None
    prep_cache_bytes: int = 4 << 30

    def __post_init__(self) -> None:
        if not isinstance(self.hidden_sets, int) or self.hidden_sets < 1:
            raise ValueError("hidden_sets must be an integer >= 1")
        if not (isinstance(self.max_trace_bytes, int) and 0 < self.max_trace_bytes <= TRACE_LIMIT):
            raise ValueError(f"max_trace_bytes must be an integer in 1..{TRACE_LIMIT}")
        if not isinstance(self.check_regions, int) or self.check_regions < 0:
            raise ValueError("check_regions must be an integer >= 0")
        if not isinstance(self.full_check_elements, int) or self.full_check_elements < 0:
            raise ValueError("full_check_elements must be an integer >= 0")
        if not isinstance(self.retain_heap_bytes, int) or self.retain_heap_bytes < 0:
            raise ValueError("retain_heap_bytes must be an integer >= 0")
        if not isinstance(self.prep_cache_bytes, int) or self.prep_cache_bytes < 0:
            raise ValueError("prep_cache_bytes must be an integer >= 0")
        if self.prep_cache_dir is not None:
            self.prep_cache_dir = Path(self.prep_cache_dir).expanduser()
        if not self.time_s > 0:
            raise ValueError("time_s must be > 0")
        if self.platform is not None and self.platform not in costmodel.PLATFORMS:
            raise ValueError(f"platform must be one of {', '.join(costmodel.PLATFORMS)}, got {self.platform!r}")
        if self.dma_figures not in costmodel.DMA_FIGURES:
            raise ValueError(f"dma_figures must be one of {', '.join(costmodel.DMA_FIGURES)}, got {self.dma_figures!r}")
        self.limits = dataclasses.replace(self.limits, private_fs=True, ro_paths=_python_paths())


class TrainiumSim(Target):
    """Embedded NeuronCore-v2 model for NKI kernels."""
    name = "trainium-sim"

    def __init__(self, **options) -> None:
        if isinstance(options.get("limits"), dict):
            options["limits"] = sandbox.Limits(**options["limits"])
        self.options = Options(**options)

    def problems(self) -> list[Problem]:
        return list(load_problems(self.name, self.info().problems))

    def problem(self, name: str, isa: str | None = None) -> Problem:
        """The problem as a run under ISA profile `isa` sees it: described by its definition for the profile's
        NKI dialect (Autocomp's v2 harnesses pass some problems other inputs)."""
        problem = super().problem(name, isa)
        return in_profile(problem, self.spec(problem), self.info().isa_profile(isa).setting("dialect"))

    def parametric(self, name: str) -> Problem | None:
        return parametric_problem(self.name, self.info().problems, name)

    def name_patterns(self) -> list[str]:
        return name_patterns(self.info().problems)

    def problem_from_definition(self, definition) -> Problem:
        from autocomp_zmq.hw_runners.trainium_sim.userproblems import from_definition
        return from_definition(self, definition)

    def spec(self, problem: Problem) -> ProblemSpec:
        return spec_of(problem, self.info().problems)

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None, full: bool = False) -> EvalResult:
        """`full`: compute and compare every output element (otherwise outputs over full_check_elements are
        checked on a sample drawn after tracing, and the report says `sampled`)."""
        started = time.monotonic()
        opts = self.options
        total_s = time_limit_s if time_limit_s is not None else opts.time_s
        deadline = started + total_s
        # the trace gets what is left of the deadline, and never more than its own limits
        wall = min(opts.limits.wall_s, total_s)
        limits = dataclasses.replace(opts.limits, wall_s=wall, cpu_s=min(opts.limits.cpu_s, math.ceil(wall) + 1),
                                     fsize_bytes=opts.max_trace_bytes + (1 << 20))
        code = code.replace("\r\n", "\n").replace("\r", "\n")
        if len(code.encode()) > MAX_SOURCE:
            return EvalResult.failure("policy", f"kernel source over {MAX_SOURCE // 1024} KiB")
        profile = self.info().isa_profile(problem.isa)
        # the problem as defined for the kernel's dialect (a v2 kernel may take other inputs: workloads.py)
        spec = self.spec(problem).for_dialect(tracer.dialect_of(code))
        # the trace and the decoded stream are heaps of small objects kept to the end and freed by reference
        # counting (none form cycles): the cyclic collector would rescan them again and again while they grow
        # (decoding gemm's 99k tiles: 0.2 s paused, 0.8 s not), and once more after they are gone if it were
        # enabled again before the evaluation returns (a 2,000-instruction kernel: 10 ms of its 150)
        with gc_paused():
            result = self._evaluate_in(spec, code, seed, limits, deadline, profile, full)
        result.wall_s = time.monotonic() - started
        return bounded(result)

    def _hidden(self, spec: ProblemSpec) -> tuple[list[dict], list]:
        """The hidden input sets of a problem and their expected outputs, drawn from a secret seed once per
        evaluator and kept (for the last two problems): a kernel never sees a value and nothing of a verdict
        depends on the hidden values but its correctness, so they stay as unknown to the next kernel as fresh
        ones, and no evaluation pays for drawing them and running the reference again."""
        cache = self.__dict__.setdefault("_hidden_sets", {})
        if spec not in cache:
            sets = [spec.make_inputs(secrets.randbits(64)) for _ in range(self.options.hidden_sets)]
            cache[spec] = (sets, [as_compared(spec, spec.returned(h)) for h in sets])
            while len(cache) > 2:
                cache.pop(next(iter(cache)))
        return cache[spec]

    def _public(self, spec: ProblemSpec, seed: int) -> tuple[dict[str, np.ndarray], tuple]:
        """The public input set of a seed and its expected outputs: from the preparation cache on disk, else
        drawn and computed (and kept there)."""
        disk = PrepCache(self.options.prep_cache_dir, self.options.prep_cache_bytes) \
            if self.options.prep_cache_bytes else None
        found = disk.load(spec, [seed, 0]) if disk is not None else None
        if found is None:
            inputs = spec.make_inputs([seed, 0])
            found = inputs, as_compared(spec, spec.returned(inputs))
            if disk is not None:
                disk.store(spec, [seed, 0], *found)
        return found

    def prepare(self, problem: Problem, seed: int = 0) -> None:
        """Draw a problem's input sets and compute their reference outputs now (an evaluator does it once per
        problem, before its first evaluation of it)."""
        dialect = self.info().isa_profile(problem.isa).setting("dialect")
        self._prepared(self.spec(problem).for_dialect(dialect), seed)

    def _prepared(self, spec: ProblemSpec, seed: int) -> tuple[dict[str, np.ndarray], list]:
        """The public and hidden input sets stacked (set axis first) and rounded to their dtypes, read-only,
        with the expected outputs per set; kept for the last two (problem, seed) pairs."""
        cache, finite = self.__dict__.setdefault("_stacked", {}), self.__dict__.setdefault("_finite", {})
        key = (spec, seed)
        if key not in cache:
            public_in, public_out = self._public(spec, seed)     # the inputs are kept only stacked below
            hidden, hidden_out = self._hidden(spec)
            stacked = {}
            for t in spec.inputs:
                # every set is make_inputs' (the public one perhaps through the preparation cache, which this
                # code keys), already rounded to the tensor's dtype: rounding again cost gemm's preparation 2.4 s
                arr = np.stack([s[t.name] for s in [public_in] + hidden])
                arr.flags.writeable = False
                stacked[t.name] = arr
            expected = [public_out] + hidden_out
            cache[key] = (stacked, expected)
            # per set and output: whether every expected value and its tolerance are finite (then the
            # comparison need not look at the computed values' finiteness apart: compare.mismatch)
            finite[key] = [tuple(finite_tolerance(x, spec.atol, spec.rtol) for x in outs) for outs in expected]
            while len(cache) > 2:
                oldest = next(iter(cache))
                del cache[oldest], finite[oldest]
        return cache[key]

    def _tracing_server(self) -> ForkServer | None:
        """The evaluator's tracing server (started on first use), or None with `fork_server=False`."""
        if not self.options.fork_server:
            return None
        if "_server" not in self.__dict__:
            self._server = ForkServer(child_argv(), self.options.limits, CHILD_ENV, self.options.work_root)
        return self._server

    def close(self) -> None:
        """Stop the tracing server (it also stops by itself when this process exits)."""
        server = self.__dict__.pop("_server", None)
        if server is not None:
            server.close()

    def profile_for(self, code: str) -> str | None:
        """The ISA profile of the kernel's NKI dialect (nki1 for neuronxcc.nki, nki2 for `import nki`)."""
        return profile_for(code, self.info().isa_profiles)

    def judge(self, problem: Problem, code: str, **kw) -> EvalResult:
        """A kernel in the other NKI dialect than the problem's ISA profile names (its `dialect` setting) is
        refused before anything runs, with what to do; then the checks of every target and evaluate()."""
        wrong = profile_mismatch(code, self.info().isa_profile(problem.isa), self.info().isa_profiles)
        if wrong:
            return EvalResult.failure("policy", wrong, latency_unit="us")
        return super().judge(problem, code, **kw)

    def platform_of(self, code: str, profile: IsaProfile = DEFAULT_ISA) -> str:
        """The NeuronCore this kernel runs on: the `platform` option, else the ISA profile's platform for a
        kernel in the profile's dialect, else by its dialect (trn1 for NKI v1, trn2 for NKI v2)."""
        if self.options.platform is not None:
            return self.options.platform
        dialect = tracer.dialect_of(code)
        if profile.setting("platform") and profile.setting("dialect") in (None, dialect):
            return profile.setting("platform")
        return "trn2" if dialect == "v2" else "trn1"

    def _params(self, platform: str) -> dict:
        return costmodel.params(platform, self.options.dma_figures if platform == "trn1" else "aws")

    def _trace(self, spec: ProblemSpec, code: str, limits: sandbox.Limits, platform: str = "trn1"):
        return tracer.trace(spec, code, self.info().entry_point, self.options, limits, self._tracing_server(),
                            platform, self._params(platform))

    def _evaluate_in(self, spec: ProblemSpec, code: str, seed: int, limits: sandbox.Limits,
                     deadline: float, profile: IsaProfile = DEFAULT_ISA, full: bool = False) -> EvalResult:
        heap.retain_freed_memory(self.options.retain_heap_bytes)
        lap = _Laps()       # where the evaluation's time went, by stage (feedback["seconds"])
        if tracer.dialect_of(code) == "mixed":
            return EvalResult.failure("compile", "NKI error: this kernel imports both NKI v1 (neuronxcc.nki) and "
                                      "NKI v2 (nki); a kernel is written in one dialect (NKI 0.4.0 rejects "
                                      "neuronxcc.nki inside nki kernels)")
        platform = self.platform_of(code, profile)
        traced, failure = self._trace(spec, code, limits, platform)
        if failure is not None:
            return failure
        trace, common = traced
        lap("trace")
        p = self._params(platform)
        # one evaluator per core: threaded BLAS on small matmuls only fights the other evaluators
        try:
            with _blas().limit(limits=1), sandbox.memory_ceiling(self.options.max_memory_bytes):
                hbm_budget = 4 * sum(spec.compulsory_bytes) + (256 << 20)
                tensors = decode_tensors(trace.get("tensors"), hbm_budget, self.options.max_tiles,
                                         int(p["sbuf_partition_bytes"]))
                in_tids, out_tids = tracer.io_tensors(trace, tensors, spec)
                stacked, expected = self._prepared(spec, seed)
                inputs = {tid: stacked[t.name] for tid, t in zip(in_tids, spec.inputs)}
                instrs = trace.get("instrs")
                if isinstance(instrs, list) and len(instrs) > self.options.max_instructions:
                    raise StreamError(f"the kernel issued {len(instrs):,} instructions; at most "
                                      f"{self.options.max_instructions:,} are allowed")
                touches: dict = {}
                first, last = uses(instrs, tensors, touches=touches)
                lay = costmodel.layout(tensors, first, last, p, deadline, touches)   # capacity is checked before anything runs
                replay = Replayer(tensors, inputs, len(expected), last_use(last), rounded=True)
                steps = replay.decode(instrs, deadline=deadline)
                fp8.check_platform(tensors, steps, p, platform)     # float8_e4m3fn, double_row by NeuronCore
                if profile.forbid:
                    # by what is replayed, however the source reached it (getattr, aliases, exec'd text)
                    used = [st for st in steps if API_NAMES.get(st.op, {st.op}) & set(profile.forbid)]
                    if used:
                        return EvalResult.failure(
                            "policy", f"kernel rejected: it executed {len(used):,} instruction(s) that --isa "
                            f"{profile.name} does not allow, the first {site_of(used[0].op, {}, used[0].site)} "
                            f"({profile.description})", **common)
                lap("decode")
                small = sum(math.prod(t.shape) for t in spec.outputs) <= self.options.full_check_elements
                check, unwritten = slicing.plan(steps, replay.decoded, tensors, out_tids,
                                                0 if small or full else self.options.check_regions,
                                                np.random.default_rng(secrets.randbits(64)), deadline)
                if unwritten is None:
                    # an output no instruction reads needs no NaN fill: every element is written (checked
                    # above) and only written elements are compared
                    read = {a.tensor.alias if a.tensor.alias != -1 else a.tensor.tid for st in steps for a in st.reads}
                    replay.unfilled = {o for o in out_tids if tensors[o].alias == -1 and o not in read}
                    replay.execute(check.needed, deadline)
                lap("values")
                tl = costmodel.simulate(steps, lay, p, deadline, trace.get("loops"))
                lap("timing")
        except StreamError as exc:
            return EvalResult.failure("compile", f"NKI error: {exc}", **common)
        except TimeoutError as exc:
            return EvalResult.failure("timeout", str(exc), **common)
        except MemoryError:
            return EvalResult.failure("limit", "replaying the kernel needed more memory than the evaluator allows "
                                      f"({gib(self.options.max_memory_bytes)}, max_memory_bytes)", **common)
        except Exception as exc:     # the stream is untrusted: anything it provokes is its verdict, never a crash
            where = traceback.extract_tb(exc.__traceback__)[-1]
            return EvalResult.failure(
                "crash", f"trainium-sim could not replay this kernel ({type(exc).__name__}: {exc}, in "
                f"{Path(where.filename).name}:{where.lineno}); an NKI construct the simulator does not "
                f"support, or a simulator bug worth reporting", **common)
        m = feedback.metrics(tl, lay, p, spec.flops, spec.compulsory_bytes)
        m["value_check"] = check.describe()
        m["platform"] = platform
        m["seconds"] = lap.seconds
        result = EvalResult(correct=True, latency=m["latency_us"], latency_unit="us", utilization=m["utilization"],
                            roofline_fraction=m["roofline_fraction"], bound=m["binding_engine"], feedback=m,
                            feedback_text=feedback.text(m), sampled=check.checked < check.elements, **common)
        if unwritten is not None:
            result.correct, result.error_kind, result.error = False, "wrong_result", f"wrong result: {unwritten}"
            return result
        for o, (tid, out_spec) in enumerate(zip(out_tids, spec.outputs)):
            got_all = replay._array(tid)
            for s, want in enumerate(expected):
                bad = mismatch(got_all[s], want[o], spec.atol, spec.rtol, reveal=s == 0, mask=check.masks[tid],
                               finite=self._finite[(spec, seed)][s][o])
                if bad:
                    which = "the public input set" if s == 0 else \
                        f"hidden input set {s} (drawn from a secret seed; the public set was right)"
                    result.correct, result.error_kind = False, "wrong_result"
                    result.error = f"wrong result in output {out_spec.name} on {which}: {bad}"
                    lap("values")
                    return result
        lap("values")
        return result


class _Laps:
    """Seconds per stage of one evaluation: each call charges the time since the previous one to its stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def __call__(self, stage: str) -> None:
        now = time.monotonic()
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + now - self._last, 6)
        self._last = now


@functools.cache
def _blas() -> ThreadpoolController:
    """The BLAS libraries numpy loaded, found once (threadpool_limits() looks for them again each time: ~0.5 ms
    an evaluation)."""
    return ThreadpoolController()
