"""The calibration set: AWS's published trn1 (NeuronCore-v2) measurements, the kernels that reproduce them
and the comparison with trainium-sim.

Every published number below names its source and the conditions it was measured under. A row is either
an absolute value (goal: within 30% where the publication states its conditions), a step ratio between two
kernels (goal: the same direction and within 25% of the published ratio, the error taken on the ratio
t_before / t_after), or informational (goal None: shown, not held to the goal, the note says why).

Kernels run at the published shapes through the real front end (sandboxed tracing) and a timing-only
replay (Replayer(compute=False)): every instruction is decoded, checked and timed but no
value is computed (the tutorial matmul at its published size would otherwise multiply 2^38 bf16 pairs in
numpy). Timing never depends on values, so the cost model sees exactly what a full evaluation gives it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim import costmodel, feedback
from autocomp_zmq.hw_runners.trainium_sim.workloads import ProblemSpec, TensorSpec
from autocomp_zmq.hw_runners.trainium_sim.liveness import last_use, uses
from autocomp_zmq.hw_runners.trainium_sim.program import decode_tensors
from autocomp_zmq.hw_runners.trainium_sim.replay import Replayer

HERE = Path(__file__).resolve().parent
TUTORIALS = HERE.parent / "tutorials"

# ---------------------------------------------------------------------------------------------- sources
SDK = "https://github.com/aws-neuron/aws-neuron-sdk/blob"
REL_223 = "44d4fd2735bf9222bf93b8d6c03fbe10035592e4"       # Neuron SDK 2.23.0 docs (same numbers 2.20 to 2.26)
HEAD = "81ce03ae261e12925e53437a0f690478e6366155"
SOURCES = {
    "MMT": f"{SDK}/{REL_223}/general/nki/tutorials/matrix_multiplication.rst (table 'Latency (ms) / HFU'; "
           "published from SDK 2.20 to 2.26, removed in 2.27)",
    "MAMBA": f"{SDK}/{REL_223}/general/nki/tutorials/fused_mamba.rst (same numbers at {HEAD[:8]}, "
             "nki/guides/tutorials/fused_mamba.rst)",
    "LN": f"{SDK}/{REL_223}/general/nki/tutorials/layernorm.rst ('Performance in Version 1 and Version 2')",
    "PERF": f"{SDK}/{HEAD}/nki/deep-dives/nki_perf_guide.rst",
    "DMABW": f"{SDK}/{HEAD}/nki/deep-dives/nki-dma-bandwidth-guide.rst",
    "DMAOV": f"{SDK}/{HEAD}/nki/get-started/about/nki-dma-overview.rst (figure nki-dma-intro-1.jpg)",
}

F32, BF16 = "float32", "bfloat16"


# ---------------------------------------------------------------------------------------------- kernels
@dataclass(frozen=True)
class Run:
    """One kernel at one shape: file (in calibration/ or ../tutorials/), entry function, HBM inputs, the
    call (input names or literal values) and literal keyword arguments."""
    file: str
    entry: str
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    call: tuple = ()
    kwargs: tuple[tuple[str, object], ...] = ()
    platform: str = "trn1"            # whose cost-model parameters time it (hw_runners/trainium_sim/platforms.py)

    def source(self) -> str:
        path = HERE / self.file if (HERE / self.file).exists() else TUTORIALS / self.file
        return path.read_text() + f"\n\nsolution = {self.entry}\n"


@dataclass
class Timed:
    latency_us: float
    metrics: dict
    instructions: int


def _spec(r: Run) -> ProblemSpec:
    call = r.call or tuple(name for name, _, _ in r.inputs)
    return ProblemSpec(name=f"calibration-{r.entry}", directory=HERE, defined_in=HERE, signature="",
                       inputs=tuple(TensorSpec(n, tuple(s), d) for n, s, d in r.inputs), outputs=(),
                       call=call, kwargs=dict(r.kwargs))


@functools.lru_cache(maxsize=None)
def run(r: Run) -> Timed:
    """Trace the kernel in the sandbox (as an evaluation does) and time it without computing values."""
    tgt = get_target("trainium-sim")
    spec = _spec(r)
    traced, failure = tgt._trace(spec, r.source(), tgt.options.limits)
    if failure is not None:
        raise RuntimeError(f"{r.file}:{r.entry} did not trace: {failure.error}")
    trace, _ = traced
    p = costmodel.params(r.platform)
    tensors = decode_tensors(trace["tensors"], 1 << 40)
    touches: dict = {}
    first, last = uses(trace["instrs"], tensors, touches=touches)
    lay = costmodel.layout(tensors, first, last, p, touches=touches)
    steps = Replayer(tensors, {}, 1, last_use(last), compute=False).run(trace["instrs"])      # timing only
    tl = costmodel.simulate(steps, lay, p, loops=trace.get("loops"))
    flops = 0
    m = feedback.metrics(tl, lay, p, flops, (0, 0))
    return Timed(tl.total_ns / 1000.0, m, len(steps))


def latency(r: Run) -> float:
    return run(r).latency_us


def slope(a: Run, b: Run, na: int, nb: int) -> float:
    """Microseconds one repetition adds: (t(b) - t(a)) / (nb - na)."""
    return (latency(b) - latency(a)) / (nb - na)


# ---------------------------------------------------------------------------------------------- the set
def _mm(entry: str) -> Run:
    return Run("matmul.py", entry, (("lhsT", (8192, 4096), BF16), ("rhs", (8192, 8192), BF16)))


def _mamba(entry: str, channels: int = 4096, seq: int = 512, states: int = 16) -> Run:
    return Run("mamba.py", entry, (("delta", (1, channels, seq), F32), ("u", (1, channels, seq), F32),
                                   ("A", (channels, states), F32), ("B", (1, states, seq), F32),
                                   ("C", (1, states, seq), F32)))


def _layernorm(entry: str) -> Run:
    return Run("layernorm.py", entry, (("x", (300, 1000), F32), ("gamma", (1000,), F32), ("beta", (1000,), F32)),
               call=("x", 1e-5, "gamma", "beta"))


def _micro(entry: str, inputs, n: int, platform: str = "trn1", **kw) -> Run:
    return Run("micro.py", entry, inputs, kwargs=(("n", n),) + tuple(sorted(kw.items())), platform=platform)


def _per_rep(entry: str, inputs, n0: int, n1: int, platform: str = "trn1", **kw) -> Callable[[], float]:
    return lambda: slope(_micro(entry, inputs, n0, platform, **kw), _micro(entry, inputs, n1, platform, **kw), n0, n1)


def dma_rate_gbps(bytes_per_partition: int, n0: int = 8, n1: int = 40) -> float:
    """Sustained rate of back-to-back independent [128, bytes/4] fp32 loads, GB/s."""
    cols = bytes_per_partition // 4
    per_load_us = slope(_micro("dma_stream", (("x", (n0 * 128, cols), F32),), n0),
                        _micro("dma_stream", (("x", (n1 * 128, cols), F32),), n1), n0, n1)
    return 128 * bytes_per_partition / (per_load_us * 1000.0)


CHAIN_IN = (("x", (128, 3), F32),)
MATVEC_IN = (("w", (128, 128), BF16), ("v", (128, 1), BF16))
REDUCE_IN = (("x", (128, 512), F32),)
COMBINE_IN = (("x", (128, 514), F32),)


@dataclass
class Row:
    group: str
    name: str
    kind: str                       # "abs" (unit below) or "ratio" (t_before / t_after)
    published: float
    unit: str
    measure: Callable[[], float]
    source: str
    conditions: str
    goal: float                     # allowed relative error: every row is held to one
    note: str = ""
    miss: str = ""                  # a known miss: why the simulator cannot meet this row (still counted)

    def evaluate(self) -> dict:
        sim = self.measure()
        err = sim / self.published - 1.0
        if self.kind == "ratio":
            ok = (sim > 1.0) == (self.published > 1.0) and abs(err) <= self.goal
        else:
            ok = abs(err) <= self.goal
        return {"group": self.group, "name": self.name, "kind": self.kind, "published": self.published,
                "sim": sim, "unit": self.unit, "error": err, "goal": self.goal, "ok": ok, "source": self.source,
                "conditions": self.conditions, "note": self.note, "miss": self.miss}


def _ratio(a: Run, b: Run) -> Callable[[], float]:
    return lambda: latency(a) / latency(b)


MM_COND = "[4096,8192] @ [8192,8192] bf16, trn1.32xlarge, nki.benchmark P99"
MAMBA_COND = "batch 1, channels 4096, seq_len 512, state 16, fp32, trn1, neuron-profile device time"


def rows() -> list[Row]:
    mm = {k: _mm(k) for k in ("tiled", "hoist_load", "block_free", "fully_optimized")}
    mm_pub = {"tiled": 51.80, "hoist_load": 42.96, "block_free": 22.07, "fully_optimized": 6.97}
    out: list[Row] = []
    for k, r in mm.items():
        out.append(Row("matmul", k, "abs", mm_pub[k] * 1000, "us", functools.partial(latency, r), "MMT", MM_COND,
                       0.30))
    steps = [("tiled", "hoist_load"), ("hoist_load", "block_free"), ("block_free", "fully_optimized"),
             ("tiled", "fully_optimized")]
    for a, b in steps:
        out.append(Row("matmul", f"{a} -> {b}", "ratio", mm_pub[a] / mm_pub[b], "x", _ratio(mm[a], mm[b]), "MMT",
                       MM_COND, 0.25))
    flops = 2 * 4096 * 8192 * 8192
    out.append(Row("matmul", "fully_optimized HFU", "abs", 85.24, "%",
                   lambda: 100 * flops / (latency(mm["fully_optimized"]) * 1e-6) / 92e12, "MMT",
                   MM_COND + "; HFU of 92 TFLOPS", 0.30, "follows from its latency"))

    v1, v2, v3 = _mamba("v1"), _mamba("v2"), _mamba("v3")
    v3_long, v2_long = _mamba("v3", seq=8192), _mamba("v2", seq=8192)
    out += [
        Row("mamba", "v1", "abs", 2340, "us", functools.partial(latency, v1), "MAMBA", MAMBA_COND, 0.30),
        Row("mamba", "v2", "abs", 1610, "us", functools.partial(latency, v2), "MAMBA", MAMBA_COND, 0.30),
        Row("mamba", "v1 -> v2 (loop reordering)", "ratio", 2340 / 1610, "x", _ratio(v1, v2), "MAMBA",
            MAMBA_COND + " (published: 31% less latency)", 0.25),
        Row("mamba", "v3, seq_len 8192", "abs", 27800, "us", functools.partial(latency, v3_long), "MAMBA",
            MAMBA_COND.replace("seq_len 512", "seq_len 8192"), 0.30),
        Row("mamba", "v3: seq_len 8192 vs 512 (scaling)", "ratio", 27.8 / 1.6, "x", _ratio(v3_long, v3), "MAMBA",
            "v3 scaling table: 1.6 ms at 512, 27.8 ms at 8192 (92% scaling efficiency)", 0.25),
        Row("mamba", "v2, seq_len 8192 (spills)", "abs", 52200, "us", functools.partial(latency, v2_long), "MAMBA",
            MAMBA_COND.replace("seq_len 512", "seq_len 8192") + " (scaling table; 53.33 ms in the text)", 0.30,
            note="SBUF is over-full here: the simulator spills the lines whose accesses cost least per byte they "
            "give back (layout.py), u and the d_bu temporaries, reloaded for every state. Its two-input Vector "
            "instructions (N = 8192) pay 2N per element, 1.54x what v3's (N = 512) pay (params.toml "
            "vector_two_input_factor)"),
        Row("mamba", "v2 -> v3, seq_len 8192 (seq tiling)", "ratio", 52.2 / 27.8, "x", _ratio(v2_long, v3_long),
            "MAMBA", "published: 48% less latency", 0.25),
        Row("mamba", "v3, seq_len 512", "abs", 1600, "us", functools.partial(latency, v3), "MAMBA",
            MAMBA_COND + " (scaling table, 2 digits)", 0.30),
        Row("mamba", "v1, channels 256 (toy)", "abs", 172.93, "us",
            functools.partial(latency, _mamba("v1", channels=256)), "MAMBA",
            "batch 1, channels 256, seq_len 512, state 16", 0.30,
            "includes NEFF start-up/tear-down (the tutorial says so); the sim has none"),
    ]

    ln1, ln2 = _layernorm("nki_layernorm_kernel_v1"), _layernorm("nki_layernorm_kernel_v2")
    ln_cond = "(300, 1000) fp32, trn1, NCLatency p50"
    out += [
        Row("layernorm", "v1", "abs", 2311, "us", functools.partial(latency, ln1), "LN", ln_cond, 0.30,
            miss="3 row tiles of work in 2.3 ms: the published number is the launch, not the kernel (the same "
            "tutorial's other kernels and the matmul tutorial's 6.97 ms for 5.5e11 flops leave no room for a "
            "2 ms launch cost in every measurement, so none is modelled)"),
        Row("layernorm", "v2", "abs", 1969, "us", functools.partial(latency, ln2), "LN", ln_cond, 0.30,
            miss="as v1"),
        Row("layernorm", "v1 -> v2", "ratio", 2311 / 1969, "x", _ratio(ln1, ln2), "LN",
            ln_cond + " (published: 14.9% improvement)", 0.25,
            "published ratio is diluted by the launch overhead in both latencies"),
    ]

    chain = _per_rep("scalar_chain", CHAIN_IN, 8, 72)
    chain_trn2 = _per_rep("scalar_chain", CHAIN_IN, 8, 72, platform="trn2")
    sm = _per_rep("matvec", MATVEC_IN, 16, 80, short_moving=True)
    ss = _per_rep("matvec", MATVEC_IN, 16, 80, short_moving=False)
    red2 = _per_rep("reduce_partitions", REDUCE_IN, 16, 80, vectorized=False)
    red1 = _per_rep("reduce_partitions", REDUCE_IN, 16, 80, vectorized=True)
    c3 = _per_rep("combine", COMBINE_IN, 4, 20, combined=False)
    c1 = _per_rep("combine", COMBINE_IN, 4, 20, combined=True)
    out += [
        Row("micro", "dependent 1-element ScalarE chain", "abs", 189, "ns per instruction",
            lambda: 1000 * chain(), "PERF", "Opt #5a: activation IDENTITY with scale/bias, [128,1] fp32, each "
            "reading the previous output; 189 ns = 264 ScalarE cycles on NC-v2", 0.30),
        Row("micro", "trn2: dependent 1-element ScalarE chain", "abs", 222, "ns per instruction",
            lambda: 1000 * chain_trn2(), "PERF", "Opt #5a on NeuronCore-v3 (trn2): the same chain, 222 ns = 266 "
            "ScalarE cycles at 1.2 GHz", 0.30),
        Row("micro", "matvec, short operand moving", "abs", 64 / 2.8, "ns per matmul", lambda: 1000 * sm(), "PERF",
            "Opt #7: [1,128]x[128,128], MM issued every ~64 cycles (MM_INIT_LATENCY on trn1)", 0.30),
        Row("micro", "matvec: short stationary -> short moving", "ratio", 128 / 64, "x", lambda: ss() / sm(),
            "PERF", "Opt #7: MM every ~128 cycles vs ~64 cycles", 0.25),
        Row("micro", "2 x 64-partition reduce -> 1 x 128-partition", "ratio", 2.0, "x", lambda: red2() / red1(),
            "PERF", "Opt #5b: partition vectorization, 'performs the reduction 2x faster'", 0.25),
        Row("micro", "multiply+add+exp -> one activation", "ratio", 3.0, "x", lambda: c3() / c1(), "PERF",
            "Opt #6: [128,512] tile, (P,1) scale and bias, 'impl 2 is 3x faster in terms of latency'", 0.25),
        Row("dma", "128-partition loads, 4 KiB per partition", "abs", 272, "GB/s", lambda: dma_rate_gbps(4096),
            "DMABW", "TRN1: 17 B/ns per DMA engine x 16 engines with >= 4 KiB per partition", 0.30),
        Row("dma", "128-partition loads, 32 KiB per partition", "abs", 272, "GB/s", lambda: dma_rate_gbps(32768),
            "DMABW", "as above (saturated)", 0.30),
    ]
    # the DMAOV figure has no y-axis numbers: its points read off relative to the 32 KiB point
    for b, rel in ((256, 0.103), (1024, 0.424), (2048, 0.813), (4096, 0.966)):
        out.append(Row("dma", f"rate at {b} B / rate at 32 KiB per partition", "abs", rel, "fraction",
                       lambda b=b: dma_rate_gbps(b) / dma_rate_gbps(32768), "DMAOV",
                       "figure 'DMA Throughput varying Bytes per Partition for p_dim = 128' (generation not "
                       "stated; values read off the plot)", 0.30,
                       "a stream of transfers whose fixed cost is not hidden; see params.toml dma_* entries",
                       miss="" if b > 256 else "the matmul tutorial's three DMA-bound kernels move 256 B rows at "
                       "about the rate of their 1 KiB rows (params.toml dma_efficiency_curve), which this figure's "
                       "256 B point contradicts; the simulator follows the measured kernels"))
    return out


def table(selected: list[Row] | None = None) -> list[dict]:
    return [r.evaluate() for r in (selected if selected is not None else rows())]
