"""Where an allocator would put a kernel's on-chip tiles, decided before anything runs (the cost model's
buffers: two tiles that share a buffer wait for each other, which multi-buffering avoids)."""
from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass, field

from autocomp_zmq.hw_runners.trainium_sim.deadline import Clock
from autocomp_zmq.hw_runners.trainium_sim.program import StreamError, TensorDecl


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
           deadline: float | None = None, touches: dict[tuple, int] | None = None) -> Layout:
    """Place on-chip tiles as an allocator would, before anything runs. The unit is a tile block (liveness.uses): per
    (buffer, kernel line) as many rotating buffers of the line's largest block as its blocks need alive at once, and
    loop_tile_buffers times that when the line allocates repeatedly (the compiler's multi-buffering of loop tiles)
    while there is room. Capacity is counted by liveness: what the kernel's blocks need at once, each from its first
    to its last use, so tiles of different lines whose lifetimes do not overlap share memory (the compiler's
    allocator packs tiles by lifetime; nl.ndarray declares a tile, it does not reserve memory for the kernel's
    duration: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/nki_direct_allocation_guide.html contrasts
    it with direct allocation). When SBUF or PSUM is still over-full, whole lines are spilled to HBM: their tiles
    then cost a DMA store after each write and a load before each read (simulate). Which lines: those whose accesses
    per block are fewest first (what spilling costs per byte it gives back: `touches`, from liveness.uses), skipping
    a line not alive at the peak, which would free nothing, then keeping on chip again any that fits back: the
    classic allocator's choice of the value with the least spill cost for its benefit (Chaitin, "Register allocation
    & spilling via graph coloring", 1982); neuronx-cc's own policy is not published. Against AWS's fused-mamba v2 at
    seq_len 8192 (52.2 ms, SBUF over-full): spilling the largest lines first chose the per-state accumulator among
    them, 101 ms; by cost, u and the d_bu temporaries, 56 ms. PSUM spills too: Autocomp's attention kernel, whose
    (32, 8, par_dim(128), 512) fp32 PSUM tensor keeps all 256 banks' worth alive at once (32x PSUM), compiled and
    ran on a trn1 at 3.09 ms (its published trace, examples/trn-tutorial/4_attention_trace.py, step 0). The
    evacuation copy from PSUM that such a spill also needs is not charged, only its DMA traffic."""
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
    # multi-buffering keeps loop_tile_buffers sets of what a line has alive at once (a set: the blocks of a loop
    # tile that is loaded block by block before it is used, 8 blocks of lhsT in the matmul tutorial's optimized
    # kernel), fewer where SBUF/PSUM has no room for them (below)
    depth = int(p["loop_tile_buffers"])
    slots = {g: min(depth * need[g], len(us)) for g, us in groups.items()}

    def unit(g: tuple) -> int:       # SBUF: bytes per partition; PSUM: whole banks
        return size[g] if g[0] == "sbuf" else math.ceil(size[g] / bank)

    clock = Clock(deadline, f"placing the kernel's {len(first):,} tiles")
    spans = {g: (min(first[u] for u in us), max(last[u] for u in us)) for g, us in groups.items()}

    def use(buf: str, without: dict) -> int:
        """The most SBUF bytes per partition (PSUM banks) the kernel needs at once: every tile block from its
        first to its last use (tiles whose lifetimes do not overlap share memory, as the compiler allocates
        them), plus the extra buffers multi-buffering keeps for a line while the line runs."""
        clock.tick()
        events = []
        for g, us in groups.items():
            if g[0] != buf or g in without:
                continue
            n = unit(g)
            events += [(first[u], n) for u in us] + [(last[u] + 0.5, -n) for u in us]
            if slots[g] > need[g]:
                events += [(spans[g][0], (slots[g] - need[g]) * n), (spans[g][1] + 0.5, -(slots[g] - need[g]) * n)]
        live = peak = 0
        for _, n in sorted(events):
            live += n
            peak = max(peak, live)
        return peak
    # what spilling a line costs per byte of memory it gives back: a store after every write and a load before
    # every read of its blocks (simulate), i.e. its accesses per block
    traffic = {g: sum(touches.get(u, 2) if touches is not None else 2 for u in us) / max(1, slots[g])
               for g, us in groups.items()}
    limits = {"sbuf": int(p["sbuf_usable_partition_bytes"]), "psum": int(p["psum_banks"])}
    spilled: dict[tuple, int] = {}
    for buf in ("sbuf", "psum"):
        used = use(buf, spilled)
        while used > limits[buf]:     # one set of buffers fewer at a time, from the line whose extra sets are largest
            extra = [g for g in groups if g[0] == buf and slots[g] > need[g]]
            if not extra:
                break
            g = max(extra, key=lambda g: ((slots[g] - need[g]) * unit(g), g))
            slots[g] = max(need[g], slots[g] - need[g])
            used = use(buf, spilled)
        # PSUM keeps one bank to stage the spilled lines' results in before they leave it
        room = limits[buf] - (buf == "psum")
        if used > limits[buf]:
            for g in sorted((g for g in groups if g[0] == buf), key=lambda g: (traffic[g], -slots[g] * unit(g))):
                if used <= room:
                    break
                spilled[g] = slots[g] * size[g]
                now = use(buf, spilled)
                if now < used:
                    used = now
                else:           # not alive at the peak: spilling it would cost traffic and free nothing
                    del spilled[g]
            # the cheapest per byte may be small lines that did not make the difference: keep on chip each one
            # that fits back, costliest first
            for g in sorted((g for g in spilled if g[0] == buf), key=lambda g: -traffic[g] * slots[g] * size[g]):
                kept = dict(spilled)
                del kept[g]
                if use(buf, kept) <= room:
                    spilled = kept
    slot_of = {}
    for g, us in groups.items():
        clock.tick()
        if g in spilled:
            slot_of.update({u: ("spill", u) for u in us})
            continue
        # each block takes the buffer free longest (a heap of (last use of its current block, buffer)), so
        # consecutive tiles of a loop alternate between buffers; slots >= the most alive at once, so the
        # top of the heap is always free by the time the next block is first used
        free_at = [(-1, i) for i in range(slots[g])]
        for placed, u in enumerate(sorted(us, key=first.__getitem__)):
            if placed % 1024 == 1023:
                clock.tick()
            _, i = heapq.heapreplace(free_at, (last[u], free_at[0][1]))
            slot_of[u] = (g[0], g[1], i)
    staging = any(g[0] == "psum" for g in spilled)
    return Layout(slot_of, use("sbuf", spilled), use("psum", spilled) + staging,
                  {g: (slots[g], size[g]) for g in groups}, spilled)
