"""What the compiler drops or merges in a kernel's instruction stream before it schedules it (costmodel.simulate).

Timing only: the values are those of the stream as written (replay.py), which each rewrite here leaves unchanged
by construction, so a kernel gains nothing from one that it could not have written itself.

- A PSUM zero-fill that a matmul accumulation group overwrites is dropped (elided_psum_zero_fills).
- A copy whose source tile is another compute instruction's result, read by nothing else, is merged into that
  instruction, which then writes the copy's destination itself (merged_copies).
"""
from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict

from autocomp_zmq.hw_runners.trainium_sim.deadline import Clock
from autocomp_zmq.hw_runners.trainium_sim.replay import Step


def elided_psum_zero_fills(steps: list[Step], deadline: float | None = None) -> set[int]:
    """Indices of PSUM zero-fills the compiler drops: a tile zeroed and then accumulated into by matmuls
    starts its accumulation group with a matmul that overwrites the bank (architecture guide, 'Near-memory
    accumulation'), so nl.zeros(..., buffer=nl.psum) costs nothing when the next access to the tile is such
    a matmul writing all of it."""
    pending: dict[int, tuple[int, tuple]] = {}              # PSUM tensor -> (memset index, region)
    elided = set()
    clock = Clock(deadline, f"finding the PSUM zero-fills the compiler drops ({len(steps):,} instructions)")
    for i, st in enumerate(steps):
        clock.tick(i)
        for a in st.reads + st.writes:
            if a.tensor.buffer != "psum" or a.tensor.tid not in pending:
                continue
            j, region = pending.pop(a.tensor.tid)
            if st.op == "matmul" and st.extra.get("acc") and a is st.writes[0] and a.region() == region:
                elided.add(j)
        if st.op == "memset" and st.extra.get("fill") == 0.0 and st.writes[0].tensor.buffer == "psum":
            pending[st.writes[0].tensor.tid] = (i, st.writes[0].region())
    return elided


# engines whose instructions may write their result straight to the copy's destination buffer
_WRITES = {"sbuf": ("act", "dve", "pool"), "psum": ("act", "dve")}
# instructions that compute a result (a fill, an iota or a matmul is never merged with a copy of it)
_COMPUTING = ("activation", "ew", "tensor_scalar", "select", "scan")


def merged_copies(steps: list[Step], deadline: float | None = None) -> dict[int, int]:
    """copy index -> index of the instruction it merges into. A plain copy (nl.copy, nisa.tensor_copy) of a
    tile that exactly one compute instruction wrote, all of it, and that nothing but the copy reads, is the
    producer writing the copy's destination in the copy's dtype: the result is the same bits (the engines
    compute in fp32 and round once to the output dtype, so a float32 or same-dtype intermediate changes
    nothing), provided nothing touches the destination between the two.

    The evidence is a measurement, not a published compiler pass: Autocomp's sd-attention chain (examples/
    trn-tutorial/5_sd_attention_trace.py, trn1.2xlarge) step 3 adds to step 2 an fp32 -> bf16 copy of each
    [128, 4096] exp result before the transposes, 32 copies of 4,096 elements per partition (at least 94 us on
    any engine that runs them, against a 0.43 ms kernel), and measured 2% faster (0.434 -> 0.424 ms): the copy
    cost the hardware nothing. Nothing weaker is merged: a partial copy, a reduced-precision intermediate (its
    rounding is part of the result), a PSUM source (the matmul's result has to leave PSUM), a tile read twice."""
    clock = Clock(deadline, f"finding the copies the compiler merges ({len(steps):,} instructions)")
    touched: dict[int, list[int]] = defaultdict(list)       # tensor -> indices of the instructions accessing it
    for i, st in enumerate(steps):
        clock.tick(i)
        for a in st.reads + st.writes:
            ids = touched[a.tensor.tid]
            if not ids or ids[-1] != i:
                ids.append(i)
    merged: dict[int, int] = {}
    producers: set[int] = set()
    for c, st in enumerate(steps):
        clock.tick(c)
        if not (st.op == "ew" and st.fn == "copy" and len(st.reads) == 1 and len(st.writes) == 1):
            continue
        src, dst = st.reads[0], st.writes[0]
        t = src.tensor
        if t.buffer != "sbuf" or dst.tensor.buffer not in _WRITES or t.dtype not in ("float32", dst.tensor.dtype):
            continue
        users = touched[t.tid]               # the producer, then this copy: nothing else touches the tile
        if len(users) != 2 or users[1] != c:
            continue
        p = users[0]
        producer = steps[p]
        if producer.op not in _COMPUTING or producer.engine not in _WRITES[dst.tensor.buffer] or p in producers:
            continue
        wrote = [a for a in producer.writes if a.tensor.tid == t.tid]
        if len(wrote) != 1 or wrote[0].region() != src.region() or src.shape != dst.shape:
            continue
        around = touched[dst.tensor.tid]                 # the destination untouched from the producer to the copy
        if bisect.bisect_right(around, c - 1) != bisect.bisect_right(around, p - 1):
            continue
        merged[c] = p
        producers.add(p)
    return merged


def merged_instruction(producer: Step, copy: Step) -> Step:
    """The producer of a merged copy as the compiler issues it: writing the copy's destination (its access
    pattern and dtype, which the instruction's cost sees: a strided destination costs what writing it
    directly costs) in place of the tile nothing else reads."""
    tile = copy.reads[0].tensor.tid
    return dataclasses.replace(producer, writes=[copy.writes[0] if a.tensor.tid == tile else a
                                                 for a in producer.writes])
