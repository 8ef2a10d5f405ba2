"""NeuronCore-v2 timing of a replayed NKI instruction stream.

The engines work in parallel, each executing its own instructions in program order: Tensor (PE),
Vector (DVE), Scalar (ACT), GpSimd (POOL) and 16 DMA engines. An instruction starts when its engine
is free and every earlier instruction it depends on through memory has finished: read-after-write,
write-after-read and write-after-write on overlapping bytes of the same physical buffer. On-chip
tensors are placed as an allocator would: all tiles allocated at one kernel line share that line's
buffers (as many as are alive at once, and two, rotating, when the line allocates repeatedly and SBUF
has room), so reusing a buffer waits for its previous readers, which is what multi-buffering avoids.
Loads and stores each have the 16 DMA engines' bandwidth; the HBM limit on their sum is not enforced
per transfer (it enters the roofline bound), so a kernel that saturates both directions at once is
timed optimistically. Instruction costs follow the published NKI ISA cost formulas; every parameter
and its source is in params.toml.
"""
from __future__ import annotations

import functools
import heapq
import itertools
import math
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from hw_runners.trainium_sim.deps import Buffer
from hw_runners.trainium_sim.program import StreamError, TensorDecl
from hw_runners.trainium_sim.replay import Step

ENGINE_NAMES = {"pe": "Tensor", "dve": "Vector", "act": "Scalar", "pool": "GpSimd", "dma": "DMA"}


@functools.cache
def params(path: Path = Path(__file__).with_name("params.toml")) -> dict[str, float]:
    return {k: v["value"] for k, v in tomllib.loads(path.read_text()).items()}


@dataclass
class Layout:
    slot_of: dict[tuple, tuple]               # (tid, block) -> physical buffer key
    sbuf_bytes: int                           # per partition, all SBUF buffers kept on chip
    psum_banks: int
    buffers: dict[tuple, tuple[int, int]] = field(default_factory=dict)   # (buffer, site) -> (slots, bytes)
    spilled: dict[tuple, int] = field(default_factory=dict)  # (buffer, site) spilled to HBM -> bytes/partition


def _max_live(units: list[tuple], first: dict, last: dict) -> int:
    events = sorted([(first[u], 1) for u in units] + [(last[u] + 0.5, -1) for u in units])
    live = best = 0
    for _, d in events:
        live += d
        best = max(best, live)
    return best


def layout(tensors: list[TensorDecl], first: dict[tuple, int], last: dict[tuple, int], p: dict,
           deadline: float | None = None) -> Layout:
    """Place on-chip tiles as an allocator would, before anything runs. The unit is a tile block (program.uses):
    per (buffer, kernel line) as many rotating buffers of the line's largest block as its blocks need alive at
    once, and at least two when the line allocates repeatedly (the compiler's double buffering of loop tiles)
    while there is room. When SBUF is still over-full, whole lines are spilled to HBM, largest footprint first,
    as the compiler spills: their tiles then cost a DMA store after each write and a load before each read
    (simulate). PSUM cannot spill: an over-full PSUM is an error."""
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for unit in first:
        t = tensors[unit[0]]
        if t.buffer in ("sbuf", "psum"):
            groups[(t.buffer, t.site)].append(unit)
    size = {g: max(tensors[u[0]].block_bytes for u in us) for g, us in groups.items()}
    need = {g: _max_live(us, first, last) for g, us in groups.items()}
    bank = int(p["psum_bank_bytes"])
    for (buf, site), s in size.items():
        if buf == "psum" and s > p["psum_partition_bytes"]:
            raise StreamError(f"a PSUM tensor at kernel.py line {site} needs {s} bytes per partition; PSUM has "
                              f"{int(p['psum_partition_bytes'])} (8 banks of 2 KiB)")
    slots = {g: max(need[g], min(2, len(us))) for g, us in groups.items()}

    def unit(g: tuple) -> int:       # SBUF: bytes per partition; PSUM: whole banks
        return size[g] if g[0] == "sbuf" else math.ceil(size[g] / bank)

    def use(buf: str) -> int:
        return sum(slots[g] * unit(g) for g in groups if g[0] == buf)
    limits = {"sbuf": int(p["sbuf_usable_partition_bytes"]), "psum": int(p["psum_banks"])}
    spilled: dict[tuple, int] = {}
    for buf in ("sbuf", "psum"):
        used = use(buf)
        for g in sorted((g for g in groups if g[0] == buf and slots[g] > need[g]), key=lambda g: -size[g]):
            if used <= limits[buf]:
                break
            used -= (slots[g] - need[g]) * unit(g)
            slots[g] = need[g]    # no room to double-buffer this line's tiles
        if used > limits[buf] and buf == "sbuf":
            for g in sorted((g for g in groups if g[0] == "sbuf"), key=lambda g: -slots[g] * size[g]):
                if used <= limits[buf]:
                    break
                used -= slots[g] * size[g]
                spilled[g] = slots[g] * size[g]
        if used > limits[buf]:
            top = sorted((g for g in groups if g[0] == buf), key=lambda g: -slots[g] * size[g])[:4]
            detail = "; ".join(f"line {g[1]}: {slots[g]} x {size[g] / 1024:.1f} KiB" for g in top)
            raise StreamError(f"PSUM overflow: the kernel's PSUM tiles need {used} banks of 2 KiB per "
                              f"partition, PSUM has {limits[buf]} ({detail})")
    slot_of = {}
    for g, us in groups.items():
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"placing the kernel's {len(first):,} tiles exceeded the time limit")
        if g in spilled:
            slot_of.update({u: ("spill", u) for u in us})
            continue
        # each block takes the buffer free longest (a heap of (last use of its current block, buffer)), so
        # consecutive tiles of a loop alternate between buffers; slots >= the most alive at once, so the
        # top of the heap is always free by the time the next block is first used
        free_at = [(-1, i) for i in range(slots[g])]
        for u in sorted(us, key=first.__getitem__):
            _, i = heapq.heapreplace(free_at, (last[u], free_at[0][1]))
            slot_of[u] = (g[0], g[1], i)
    kept = {g: slots[g] for g in groups if g not in spilled}
    return Layout(slot_of, sum(kept[g] * size[g] for g in kept if g[0] == "sbuf"),
                  sum(kept[g] * unit(g) for g in kept if g[0] == "psum"),
                  {g: (slots[g], size[g]) for g in groups}, spilled)


def cycles(step: Step, p: dict) -> float:
    """Engine cycles of one compute instruction (NKI ISA 'estimated instruction cost')."""
    min_ii, n = p["min_ii"], step.free
    if step.op == "matmul":
        c = max(min(p["matmul_min_moving"], step.stationary), step.moving)
        return c * (p["matmul_fp32_factor"] if step.fp32_matmul else 1) + p["matmul_fixed_cycles"]
    if step.op == "transpose" and step.engine == "pe":
        return max(step.moving, min(p["matmul_min_moving"], step.stationary))
    if step.engine == "pool":
        factor = 1 if step.op in ("iota", "select") else p["gpsimd_factor"]
        return p["gpsimd_start_cycles"] + n * factor
    body = max(min_ii, n)
    if step.extra.get("tensor1"):       # scalar_tensor_tensor streams a second tile
        body = max(min_ii, p["vector_two_input_factor"] * n)
    elif step.op == "ew" and len(step.reads) == 2 and step.engine == "dve":
        bf16 = all(r.tensor.dtype == "bfloat16" for r in step.reads) and step.fn in ("add", "subtract", "multiply")
        if not (step.psum_read or bf16):
            body = max(min_ii, p["vector_two_input_factor"] * n)
    elif step.op == "ew" and step.fn == "reciprocal" and step.engine == "dve":
        body = max(min_ii, p["vector_reciprocal_factor"] * n)
    elif step.op == "scan":
        body = max(min_ii, p["vector_two_input_factor"] * n)
    elif step.op == "reduce":
        half = step.reads[0].tensor.dtype == "bfloat16" and step.fn in ("add", "maximum")
        body = max(min_ii, n / 2 if half else n)
    if step.extra.get("reduce"):
        body += min_ii
    return body + p["sbuf_access_overhead_cycles"]


def clock_ghz(engine: str, p: dict) -> float:
    return {"pe": p["tensor_clock_ghz"], "dve": p["vector_clock_ghz"], "act": p["scalar_clock_ghz"],
            "pool": p["gpsimd_clock_ghz"]}[engine]


def dma_ns(step: Step, p: dict) -> tuple[float, int]:
    """(occupancy in ns, DMA engines used): partitions spread over engines, efficiency by row size."""
    engines = max(1, min(int(p["dma_queues"]), math.ceil(step.partitions / p["dma_partitions_per_engine"])))
    run = max(1, step.run_bytes)
    eff = max(p["dma_min_efficiency"], run / (run + p["dma_half_efficiency_bytes"]))
    return step.dma_bytes / (engines * p["dma_queue_gbps"] * eff), engines


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


def simulate(steps: list[Step], lay: Layout, p: dict, deadline: float | None = None) -> Timeline:
    tl = Timeline()
    free = {"pe": 0.0, "dve": 0.0, "act": 0.0, "pool": 0.0}
    # loads (into SBUF) and stores (to HBM) are queued separately, as NKI issues them from different
    # engines' DMA queues, so a store waiting for its compute never holds up the next independent load
    queues = {"in": [0.0] * int(p["dma_queues"]), "out": [0.0] * int(p["dma_queues"])}
    buffers: dict[tuple, Buffer] = defaultdict(Buffer)
    latency = p["dma_fixed_us"] * 1000.0
    hbm_bytes = 0

    def keys(a) -> list[tuple]:
        t = a.tensor
        if t.buffer == "hbm":
            return [("hbm", t.alias if t.alias != -1 else t.tid)]
        return [lay.slot_of[(t.tid, b)] for b in itertools.product(*(range(lo, hi + 1) for lo, hi in
                                                                     zip(a.lo[:t.pdim], a.hi[:t.pdim])))]

    def spill_io(a, k, ready: float, after: bool) -> float:
        """A spilled tile's share of an access moves between HBM and SBUF: loaded before a read, stored after a
        write; returns when that transfer completes (its latency included)."""
        nbytes = a.nbytes // max(1, len(keys(a)))
        qs = queues["out" if after else "in"]
        engines = max(1, min(len(qs), math.ceil(a.partitions / p["dma_partitions_per_engine"])))
        picked = heapq.nsmallest(engines, range(len(qs)), key=qs.__getitem__)
        row = max(1, nbytes // max(1, a.partitions))
        eff = max(p["dma_min_efficiency"], row / (row + p["dma_half_efficiency_bytes"]))
        done = max(ready, max(qs[i] for i in picked)) + nbytes / (engines * p["dma_queue_gbps"] * eff)
        for i in picked:
            qs[i] = done
        tl.spill_bytes += nbytes
        return done + latency

    for n, st in enumerate(steps):
        if deadline is not None and n % 4096 == 0 and time.monotonic() > deadline:
            raise TimeoutError(f"timing the kernel's {len(steps):,} instructions exceeded the time limit "
                               f"(stopped at instruction {n:,})")
        ready, cause = 0.0, "dma"
        regions = [(k, a.region(), w, a) for w, accs in ((False, st.reads), (True, st.writes)) for a in accs
                   for k in keys(a)]
        for k, (p0, p1, f0, f1), is_write, a in regions:
            t, why = buffers[k].ready(p0, p1, f0, f1, is_write)
            if k[0] == "spill" and not is_write:
                t, why = spill_io(a, k, t, after=False), "dma"
            if t > ready:
                ready, cause = t, why
        if st.engine == "dma":
            occupancy, n_queues = dma_ns(st, p)
            qs = queues["out" if st.writes[0].tensor.buffer == "hbm" else "in"]
            picked = heapq.nsmallest(n_queues, range(len(qs)), key=qs.__getitem__)
            start = max(ready, max(qs[i] for i in picked))
            done = start + occupancy
            # both directions share the core's HBM bandwidth: no transfer completes before every HBM byte
            # issued up to it could have moved at that rate; an HBM->HBM copy reads and writes HBM
            sides = (st.reads[0].tensor.buffer == "hbm") + (st.writes[0].tensor.buffer == "hbm")
            if sides:
                hbm_bytes += sides * st.dma_bytes
                done = max(done, hbm_bytes / p["hbm_gbps_per_core"])
            for i in picked:
                qs[i] = done
            end = done + latency                       # the fixed latency overlaps other transfers
            busy = (done - start) * n_queues / len(qs)  # the share of this direction's DMA engines in use
            tl.busy_ns["dma_" + ("out" if qs is queues["out"] else "in")] += busy
            tl.dma_bytes += st.dma_bytes
            if st.run_bytes < 512:
                tl.dma_small_rows += 1
        else:
            busy = cycles(st, p) / clock_ghz(st.engine, p)
            start = max(ready, free[st.engine])
            if ready > free[st.engine]:
                tl.waits_ns[(st.engine, cause)] += ready - free[st.engine]
            end = free[st.engine] = start + busy
        tl.busy_ns[st.engine] = max(tl.busy_ns.get("dma_in", 0.0), tl.busy_ns.get("dma_out", 0.0)) \
            if st.engine == "dma" else tl.busy_ns[st.engine] + busy
        tl.site_ns[(st.site, st.engine)] += busy
        tl.counts[st.engine] += 1
        tl.total_ns = max(tl.total_ns, end)
        for k, (p0, p1, f0, f1), is_write, a in regions:
            done = spill_io(a, k, end, after=True) if k[0] == "spill" and is_write else end
            buffers[k].record(p0, p1, f0, f1, is_write, done, st.engine)
            tl.total_ns = max(tl.total_ns, done)
    return tl
