"""NeuronCore timing of a replayed NKI instruction stream (NeuronCore-v2 figures by default; platforms.py has v3/v4).

The engines work in parallel: Tensor (PE), Vector (DVE), Scalar (ACT), GpSimd (POOL) and 16 DMA engines. The
compiler schedules the unrolled stream, so a compute instruction runs in the earliest time its engine (and any
shared port) is free for it, an earlier gap included (slots.py); DMA queues start transfers in program order.
An instruction starts when every earlier instruction it depends on through memory has finished: read-after-write,
write-after-read and write-after-write on overlapping bytes of the same physical buffer. Tiles are placed as
an allocator would (layout.py): the tiles of one kernel line rotate through that line's buffers, so reusing a
buffer waits for its previous readers, which is what multi-buffering avoids.

Instruction costs follow the published NKI ISA cost formulas and the architecture guide (cycles()); a
dependent instruction waits a latency after its producer and Vector/GpSimd (SBUF) and Vector/Scalar (PSUM)
share ports (EngineTiming); loads and stores share the 16 DMA engines from in-order queues (DmaQueues);
PSUM zero-fills that a matmul accumulation group overwrites are dropped and copies of a result read by
nothing else merged into its producer, as the compiler does (rewrites.py). Every parameter and its source is
in params.toml; the calibration against AWS's published trn1 measurements is tests/trainium_sim/calibration
(bench_trainium_sim.py --calibration).
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.slots import Resource
from autocomp_zmq.hw_runners.trainium_sim import loops as compiler_loops
from autocomp_zmq.hw_runners.trainium_sim.deadline import Clock
from autocomp_zmq.hw_runners.trainium_sim.deps import Buffer
from autocomp_zmq.hw_runners.trainium_sim.dma import DmaQueues, dma_efficiency, dma_ns  # noqa: F401  (its API)
from autocomp_zmq.hw_runners.trainium_sim.platforms import DMA_FIGURES, PLATFORMS, params  # noqa: F401  (the cost model's API)
from autocomp_zmq.hw_runners.trainium_sim.layout import Layout, layout  # noqa: F401  (layout: part of the cost model's API)
from autocomp_zmq.hw_runners.trainium_sim.replay import Step
from autocomp_zmq.hw_runners.trainium_sim.rewrites import elided_psum_zero_fills, merged_copies, merged_instruction

COMPUTE = ("pe", "dve", "act", "pool")


def is_broadcast_view(step: Step) -> bool:
    """A copy that spreads one partition over many (tile.broadcast_to / nl.broadcast_to): NKI makes it a view
    of the source ('no copy will occur'), read in place by the instruction that consumes it."""
    return (step.op == "ew" and step.fn == "copy" and len(step.reads) == 1 and step.reads[0].partitions == 1
            and step.writes[0].partitions > 1)


def inner_stride_bytes(a) -> int:
    """Byte stride of an on-chip access along its innermost free axis with more than one element (0: one
    element per partition, or a broadcast)."""
    t = a.tensor
    strides, s = [0] * len(t.shape), 1
    for d in range(len(t.shape) - 1, -1, -1):
        if d != t.pdim:
            strides[d], s = s, s * t.shape[d]
    idx = a.index[1:]
    if all(isinstance(e, (int, slice)) for e in idx):      # basic slicing: per dimension a step
        for d in range(len(idx) - 1, -1, -1):
            e = idx[d]
            if d != t.pdim and isinstance(e, slice) and len(range(e.start, e.stop, e.step)) > 1:
                return abs(e.step) * strides[d] * t.itemsize
        return 0
    arrays = [np.broadcast_to(e, a.shape) if not isinstance(e, (int, slice)) else e for e in idx]
    for ax in range(len(a.shape) - 1, 0, -1):                # tile axes, the partition axis (0) excluded
        if a.shape[ax] > 1:
            z, o = [0] * len(a.shape), [0] * len(a.shape)
            o[ax] = 1
            off = [sum(int(np.asarray(arr)[tuple(pt)]) * strides[d] for d, arr in enumerate(arrays)
                       if d != t.pdim and not isinstance(arr, (int, slice))) for pt in (z, o)]
            return abs(off[1] - off[0]) * t.itemsize
    return 0


def _strided(step: Step, p: dict) -> bool:
    """An on-chip operand walked with a stride past the threshold (`strided`: a vectorized loop's, loops.py)."""
    limit = p["strided_access_threshold_bytes"]
    return step.extra.get("strided", False) or any(a.tensor.buffer in ("sbuf", "psum") and inner_stride_bytes(a) > limit
                                                   for a in step.reads + step.writes)


_HALF = ("bfloat16", "float16")


def perf_mode_factor(step: Step, p: dict) -> float:
    """The BF16/FP16 performance modes of NeuronCore-v3/v4 (1 on NeuronCore-v2, whose params say so): VectorE
    tensor_copy / tensor_scalar 4x with SBUF operands of contiguous inner elements, 2x when strided or one side
    is in PSUM; tensor_tensor 2x with SBUF inputs; ScalarE tensor_copy / tensor_scalar on NeuronCore-v4."""
    if p["vector_perf_copy_factor"] == p["vector_perf_half_factor"] == p["scalar_perf_copy_factor"] == 1:
        return 1.0                          # NeuronCore-v2: nothing to look at
    copy_like = (step.op == "ew" and step.fn == "copy" and len(step.reads) == 1) or \
        (step.op == "tensor_scalar" and not step.extra.get("tensor1") and not step.extra.get("reduce"))
    # the data tile and the result (tensor_scalar's per-partition operands are not streamed)
    accs = step.reads[:1] + step.writes[:1] if copy_like else step.reads + step.writes
    if not accs or any(a.tensor.dtype not in _HALF for a in accs):
        return 1.0
    if step.engine == "act" and copy_like:
        return p["scalar_perf_copy_factor"]
    if step.engine != "dve":
        return 1.0
    in_sbuf = all(a.tensor.buffer == "sbuf" for a in accs)
    if copy_like:
        contiguous = not step.extra.get("strided") and all(inner_stride_bytes(a) <= a.tensor.itemsize for a in accs)
        return p["vector_perf_copy_factor"] if in_sbuf and contiguous else p["vector_perf_half_factor"]
    if step.op == "ew" and len(step.reads) == 2 and all(r.tensor.buffer == "sbuf" for r in step.reads):
        return p["vector_perf_half_factor"]
    return 1.0


def cycles(step: Step, p: dict) -> float:
    """Engine cycles one compute instruction occupies its engine (its initiation interval, the NKI ISA
    'estimated instruction cost'), with the architecture guide's strided-access penalty and, for small tiles
    on Vector/Scalar, the static instruction overhead. What a dependent instruction waits for its producer
    is a latency, in EngineTiming, not occupancy."""
    min_ii, n = p["min_ii"], step.free
    if step.op == "matmul":
        # background LoadStationary overlaps the previous MultiplyMoving; fast LoadStationary takes a quarter
        # of a MultiplyMoving of the same free size, so it binds only for a wide stationary and a narrow moving
        c = max(min(p["matmul_min_moving"], step.stationary), step.moving,
                step.stationary / p["loadstationary_speedup"])
        # fp8 runs at the bf16 rate; FP8 double_row contracts 2x128 rows in a bf16 MultiplyMoving's time
        c *= p["matmul_double_row_time_factor"] if step.extra.get("perf") == "double_row" else 1
        return c * (p["matmul_fp32_factor"] if step.fp32_matmul else 1) + p["matmul_fixed_cycles"]
    if step.op == "transpose" and step.engine == "pe":
        # a matmul against an identity: fp32 data streams at the Tensor engine's fp32 rate
        c = max(step.moving, min(p["matmul_min_moving"], step.stationary))
        return c * (p["matmul_fp32_factor"] if step.fp32_matmul else 1)
    if is_broadcast_view(step):
        return 0.0
    stream = p["strided_access_factor"] if _strided(step, p) else 1.0     # half the SBUF/PSUM bandwidth
    if step.engine == "pool":
        factor = 1 if step.op in ("iota", "select", "gather") else p["gpsimd_factor"]
        # nc_n_gather is "n groups of instructions in the underlying ISA, n = ceil(elems_per_partition / 512)"
        starts = math.ceil(n / 512) if step.op == "gather" else 1          # (its ISA reference), each started
        return p["gpsimd_start_cycles"] * starts + n * factor * stream
    k = 1.0                                 # elements streamed per output element, in Vector/Scalar cycles
    if step.extra.get("tensor1"):           # scalar_tensor_tensor streams a second tile
        k = two_input_factor(n, p)
    elif step.op == "ew" and len(step.reads) == 2 and step.engine == "dve":
        bf16 = all(r.tensor.dtype == "bfloat16" for r in step.reads) and step.fn in ("add", "subtract", "multiply")
        # an operand with one element per partition is a free-axis broadcast: tensor_scalar's cost (ISA
        # tensor_tensor: 'consider tensor_scalar ... for broadcasting in the free dimension')
        scalar = min(r.free for r in step.reads) == 1 < n
        if not (step.psum_read or bf16 or scalar):
            k = two_input_factor(n, p)
    elif step.op == "ew" and step.fn == "reciprocal" and step.engine == "dve":
        k = p["vector_reciprocal_factor"]
    elif step.op == "scan":
        k = two_input_factor(n, p)
    elif step.op == "reduce":
        half = step.reads[0].tensor.dtype == "bfloat16" and step.fn in ("add", "maximum")
        k = 0.5 if half else 1.0
    elif step.op == "memset":
        half = step.extra.get("fill") == 0.0 and step.writes[0].tensor.dtype in ("bfloat16", "float16")
        k = 0.5 if half else 1.0
    k /= perf_mode_factor(step, p)
    body = max(min_ii, k * n * stream)
    if step.extra.get("reduce"):
        # activation's reduction is read out by an ActReadAccumulator; tensor_scalar_reduce adds MIN_II
        body += p["act_read_accumulator_cycles"] if step.engine == "act" else min_ii
    # back-to-back instructions with N << 128 expose the static instruction overhead (ramped out by N = 128),
    # less what the other iterations of an overlapped loop fill of it (loops.py: their instructions, one each)
    exposed = p["instruction_overhead_cycles"] * max(0.0, 1.0 - n / p["small_instruction_elements"])
    return body + max(0.0, exposed - hidden_by_other_iterations(step, body))


def two_input_factor(n: float, p: dict) -> float:
    """Vector cycles per output element of an instruction streaming two fp32 SBUF tiles of n elements per
    partition: params.toml vector_two_input_factor, log-linear in n between its points, flat outside them."""
    (n0, k0), (n1, k1) = p["vector_two_input_factor"]
    if n <= n0 or n >= n1:
        return k0 if n <= n0 else k1
    return k0 + (k1 - k0) * math.log2(n / n0) / math.log2(n1 / n0)


def hidden_by_other_iterations(step: Step, cycles_each: float) -> float:
    """Engine cycles of a wait the compiler fills with the other iterations of a verified independent loop
    (loops.py marks their instructions `overlapped` with the loop's trip count): one instruction of each other
    iteration, as long as this one. 0 outside such a loop; the whole wait in a long loop (conv1d's 2,048
    iterations ran at MIN_II per instruction), only part of it in a loop of two."""
    trip = step.extra.get("overlapped", 0)
    return max(0, trip - 1) * cycles_each


def clock_ghz(engine: str, p: dict) -> float:
    return {"pe": p["tensor_clock_ghz"], "dve": p["vector_clock_ghz"], "act": p["scalar_clock_ghz"],
            "pool": p["gpsimd_clock_ghz"]}[engine]


class EngineTiming:
    """When each compute instruction runs: one initiation interval (cycles()) on its engine, at the earliest time
    the engine (and the ports it shares) is free that long once its inputs are ready, in a gap left open before
    an instruction issued earlier if one fits. AWS: static loops are fully unrolled and, outside a no_reorder
    block, 'the compiler scheduler is free to reorder independent operations' (nki.language.no_reorder, which
    the front end refuses, so every kernel here is scheduled). A dependent instruction (its latest input, or the buffer it
    overwrites, came from a compute instruction) starts no earlier than instruction_overhead_cycles after
    its producer ended: the producer's writes must be committed to SBUF/PSUM before the reads start (the
    SBUF access overhead that independent instructions hide behind each other). TensorE's accumulation into
    PSUM is pipelined and waits on nothing of its own. NeuronCore-v2's shared ports serialize VectorE with
    GpSimdE for SBUF and VectorE with ScalarE for PSUM. A partition-broadcast view takes no engine time."""

    def __init__(self, p: dict) -> None:
        self.p = p
        self.slots = {e: Resource() for e in COMPUTE}
        self.port_slots: dict[str, Resource] = {}
        self.free = {e: 0.0 for e in COMPUTE}

    def _ports(self, st: Step) -> list[str]:
        buffers = {a.tensor.buffer for a in st.reads + st.writes}
        held = []
        if self.p["sbuf_vector_gpsimd_exclusive"] and st.engine in ("dve", "pool") and "sbuf" in buffers:
            held.append("sbuf:dve+pool")
        if self.p["psum_vector_scalar_exclusive"] and st.engine in ("dve", "act") and "psum" in buffers:
            held.append("psum:dve+act")
        return held

    def _plan(self, st: Step, ready: float, cause: str) -> tuple[float, float, list, str]:
        """(start, busy ns, the resources it holds, what it waited for), occupying nothing."""
        e, ghz = st.engine, clock_ghz(st.engine, self.p)
        busy = cycles(st, self.p) / ghz
        if busy == 0.0:                      # a view: nothing runs, its data is there when its source is
            return ready, 0.0, [], cause
        if cause in COMPUTE and not (e == "pe" and cause == "pe"):
            wait = self.p["instruction_overhead_cycles"] - hidden_by_other_iterations(st, busy * ghz)
            ready += max(0.0, wait) / ghz
        resources = [self.slots[e]] + [self.port_slots.setdefault(port, Resource()) for port in self._ports(st)]
        start = ready
        while True:
            later = max(r.earliest(start, busy) for r in resources)
            if later <= start:
                break
            start = later
        return start, busy, resources, cause if start <= ready else e

    def place(self, st: Step, ready: float, cause: str) -> tuple[Step, tuple | None]:
        """The instruction on the engine the compiler gives it, and its plan there (None: not planned yet): for
        one it places itself (a copy with no engine named, replay._placements), the engine on which it ends
        first, as AWS's tensor_copy reference says the compiler picks ('best engine based on engine workload');
        ties keep the recorded engine, which comes first."""
        choices = st.extra.get("engines")
        if not choices:
            return st, None
        best = None
        for e in choices:
            candidate = st if e == st.engine else _on_engine(st, e)
            plan = self._plan(candidate, ready, cause)
            if best is None or plan[0] + plan[1] < best[1][0] + best[1][1]:
                best = candidate, plan
        return best

    def run(self, st: Step, ready: float, cause: str, plan: tuple | None = None) -> tuple[float, float, float, str]:
        """(start, end, busy ns, what it waited for) of one compute instruction whose inputs and output
        buffer are available at `ready` (cause: the engine that produced the latest of them); `plan`: the one
        place() made for it just now, when nothing has run since."""
        start, busy, resources, waited = plan or self._plan(st, ready, cause)
        if not resources:
            return start, start, 0.0, waited
        for r in resources:
            r.occupy(start, busy)
        end = start + busy
        self.free[st.engine] = max(self.free[st.engine], end)
        return start, end, busy, waited


def _on_engine(st: Step, engine: str) -> Step:
    out = object.__new__(Step)
    out.__dict__.update(st.__dict__)
    out.engine = engine
    return out


@dataclass
class Timeline:
    total_ns: float = 0.0
    busy_ns: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    waits_ns: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    site_ns: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    dma_bytes: int = 0
    dma_small_rows: int = 0
    spill_bytes: int = 0        # moved between HBM and SBUF for tiles the compiler would have spilled


def _base(t) -> int:
    return t.alias if t.alias != -1 else t.tid


def simulate(steps: list[Step], lay: Layout, p: dict, deadline: float | None = None, loops=None) -> Timeline:
    """loops: the front end's record of affine_range iterations (a claim, verified by loops.transform)."""
    steps = compiler_loops.transform(steps, loops, p, deadline)
    tl = Timeline()
    engines = EngineTiming(p)
    dma = DmaQueues(p)
    elided = elided_psum_zero_fills(steps, deadline)
    merged = merged_copies(steps, deadline)
    merged_into = {producer: copy for copy, producer in merged.items()}
    buffers: dict[tuple, Buffer] = defaultdict(Buffer)
    latency = dma.completion_ns
    hbm_bytes = 0
    # a read waits only for writes and only a later write waits for it: reads of an HBM tensor that nothing
    # writes (the kernel's inputs) need no dependence records (a third of gemm's accesses)
    written_hbm = {_base(a.tensor) for st in steps for a in st.writes if a.tensor.buffer == "hbm"}

    def keys(a) -> list[tuple]:
        t = a.tensor
        if t.buffer == "hbm":
            return [("hbm", t.alias if t.alias != -1 else t.tid)]
        if t.pdim == 0:
            return [lay.slot_of[(t.tid, ())]]
        return [lay.slot_of[(t.tid, b)] for b in itertools.product(*(range(lo, hi + 1) for lo, hi in
                                                                     zip(a.lo[:t.pdim], a.hi[:t.pdim])))]

    def spill_io(a, share: int, ready: float, after: bool) -> float:
        """When a spilled tile's share of an access (loaded before a read, stored after a write) has moved."""
        done = dma.spill(share, a.partitions, ready, store=after, row_bytes=a.tensor.block_bytes)
        tl.spill_bytes += share
        return done + p["dma_fixed_us"] * 1000.0

    def regions_of(st) -> list[tuple]:
        """(buffer key, region, is_write, access, bytes per key) of the accesses that take part in dependences,
        each access's keys listed once (one per block it touches: looking them up per key was quadratic)."""
        found = []
        for w, accs in ((False, st.reads), (True, st.writes)):
            for a in accs:
                if w or a.tensor.buffer != "hbm" or _base(a.tensor) in written_hbm:
                    ks, region = keys(a), a.region()
                    share = a.nbytes // max(1, len(ks))
                    found += [(k, region, w, a, share) for k in ks]
        return found

    clock = Clock(deadline, f"timing the kernel's {len(steps):,} instructions")
    for n, st in enumerate(steps):
        if n in elided or n in merged:
            continue
        ready, cause = 0.0, "dma"
        if n in merged_into:            # it writes the copy's destination itself, as the copy would have
            st = merged_instruction(st, steps[merged_into[n]])
        regions = regions_of(st)
        clock.tick(n)
        for k, (p0, p1, f0, f1), is_write, a, share in regions:
            t, why = buffers[k].ready(p0, p1, f0, f1, is_write)
            if k[0] == "spill" and not is_write:
                t, why = spill_io(a, share, t, after=False), "dma"
            if t > ready:
                ready, cause = t, why
        if st.engine == "dma":
            start, duration, picked, queue, busy = dma.plan(st, ready)
            done = start + duration
            # both directions share the core's HBM bandwidth: no transfer completes before every HBM byte
            # issued up to it could have moved at that rate; an HBM->HBM copy reads and writes HBM
            sides = (st.reads[0].tensor.buffer == "hbm") + (st.writes[0].tensor.buffer == "hbm")
            if sides:
                hbm_bytes += sides * st.dma_bytes
                done = max(done, hbm_bytes / p["hbm_gbps_per_core"])
            dma.commit(st, picked, done)
            end = done + latency                       # completion latency overlaps other transfers
            tl.busy_ns["dma_" + queue] += busy
            tl.dma_bytes += st.dma_bytes
            if st.run_bytes < 512:
                tl.dma_small_rows += 1
        else:
            st, plan = engines.place(st, ready, cause)
            free_before = engines.free[st.engine]
            start, end, busy, waited = engines.run(st, ready, cause, plan)
            if busy and start > free_before:
                tl.waits_ns[(st.engine, waited)] += start - free_before
        tl.busy_ns[st.engine] = tl.busy_ns.get("dma_in", 0.0) + tl.busy_ns.get("dma_out", 0.0) \
            if st.engine == "dma" else tl.busy_ns[st.engine] + busy
        tl.site_ns[(st.site, st.engine)] += busy
        tl.counts[st.engine] += 1
        last = max(tl.total_ns, end)
        for k, (p0, p1, f0, f1), is_write, a, share in regions:
            done = spill_io(a, share, end, after=True) if k[0] == "spill" and is_write else end
            buffers[k].record(p0, p1, f0, f1, is_write, done, st.engine)
            if done > last:
                last = done
        tl.total_ns = last
    return tl
