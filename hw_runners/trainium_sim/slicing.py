"""What the value check of an evaluation computes (trusted side).

At the paper's shapes, computing every output of a kernel on every input set costs several times what
numpy takes for the reference (gemm: 2^40 multiply-adds on one core, plus bf16 rounding of every tile),
so an evaluation checks part of the output, chosen so that a wrong kernel is still caught:

1. Coverage, exactly: the last instruction to write each output element is found from the decoded stream
   (no values needed). An element nobody writes fails the kernel, whichever elements are checked.
2. Values, on whole final writes: the check draws points of each output from a secret seed after the
   stream is recorded (every corner, one point on each face, `regions` uniform points) and
   takes the instructions that last wrote them; every element those instructions last wrote is checked,
   on the public and every hidden set. The kernel cannot know which writes are drawn. A kernel whose values
   are wrong in w of its W output writes passes with probability about (1 - w/W)^regions (gemm, 512 tile
   stores, 16 regions: a bug in 1/8 of the tiles is caught with probability 0.88, in half of them with
   probability 1 - 2^-16). A mistake along a whole edge of the output (the usual result of mishandled
   remainders) meets a face point and is caught always, as is a wrong corner tile.
   Outputs small enough to compute whole (TrainiumSim's full_check_elements) are checked in full.
3. Only the instructions those checked elements depend on are computed (a backward slice over the
   decoded accesses), every other instruction is decoded, checked against the NKI rules and timed as
   before, so the latency and every rule are exactly those of a full replay.

The slice is conservative: an instruction is computed if it writes anything that is read later by a
computed instruction or checked, judged on bounding boxes of accesses; only a write known to cover a
box (unit-step, unmasked, not accumulating) ends the need for what was there before. So every checked
element has the value a full replay gives.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.deadline import Clock
from autocomp_zmq.hw_runners.trainium_sim.program import TensorDecl
from autocomp_zmq.hw_runners.trainium_sim.replay import Step, store, strided_view

MAX_CORNERS = 64
MAX_BOXES = 64          # per tensor; beyond it the needed boxes merge into their hull (still conservative)


@dataclass
class Check:
    needed: bytearray | None                 # per instruction: compute it (None: all)
    masks: dict[int, np.ndarray | None]      # output tid -> elements to compare (None: all of them)
    checked: int = 0                         # output elements compared
    elements: int = 0
    writes: int = 0                          # instructions writing an output whose last writes are checked, of
    final_writes: int = 0                    # the instructions writing an output

    def describe(self) -> str:
        if self.needed is None and all(m is None for m in self.masks.values()):
            return "every output element checked"
        computed = sum(self.needed) if self.needed is not None else 0
        return (f"values checked on {self.checked:,} of {self.elements:,} output elements (the last writes of "
                f"{self.writes} of {self.final_writes} output-writing instructions, drawn after tracing: every "
                f"corner and face plus random points); every element is written; {computed:,} of "
                f"{len(self.needed or ()):,} instructions computed")


def _base(t: TensorDecl) -> int:
    return t.alias if t.alias != -1 else t.tid


def last_writers(steps: list[Step], decoded: list, tensors: list[TensorDecl], outs: list[int],
                 clock: Clock | None = None):
    """(base tid of each output -> array (1, *shape) holding 1 + the ordinal of the output-writing instruction
    that last writes each element, 0 where none does; those instructions in order: (index, accesses)). The
    arrays start as zeros (pages the kernel's writes then touch once) and are 16-bit when they can be. Marking
    costs what the writes cover, which a kernel chooses (16,000 whole-output stores took minutes): the clock
    is looked at after each writer."""
    clock = clock or Clock(None, "")
    bases = {_base(tensors[o]) for o in outs}
    writers = []
    for n, step in enumerate(steps):
        mine = [(i, w) for i, w in enumerate(step.writes) if _base(w.tensor) in bases]
        if mine:
            writers.append((n, mine))
    dtype = np.uint16 if len(writers) < 1 << 16 else np.int32
    last = {b: np.zeros((1, *tensors[b].shape), dtype=dtype) for b in bases}
    for k, (n, mine) in enumerate(writers):
        clock.tick(n)
        for i, w in mine:
            mask = decoded[n][4] if i == 0 else None
            view = last[_base(w.tensor)].reshape((1, *w.tensor.shape))
            store(view, w, dtype(k + 1), mask if mask is not None and mask.shape == w.shape else None)
    return last, [(n, [w for _, w in mine]) for n, mine in writers]


def plan(steps: list[Step], decoded: list, tensors: list[TensorDecl], outs: list[int], regions: int,
         rng: np.random.Generator, deadline: float | None = None) -> tuple[Check, str | None]:
    """The check of one evaluation; (check, None), or (partial check, what is never written)."""
    clock = Clock(deadline, "choosing the output elements to check")
    last, writers = last_writers(steps, decoded, tensors, outs, clock)
    for o in outs:
        b = _base(tensors[o])
        if last[b].min() == 0:
            missing = int((last[b] == 0).sum())
            return Check(None, {}), (f"{missing:,} of {last[b].size:,} elements of output #{outs.index(o)} are "
                                     f"never written by any instruction")
    elements = sum(a.size for a in last.values())
    everything = Check(None, {o: None for o in outs}, elements, elements, len(writers), len(writers))
    if regions <= 0:
        return everything, None
    drawn = {int(arr[(0, *p)]) for arr in last.values() for p in _points(arr.shape[1:], regions, rng)}
    if len(drawn) == len(writers):
        return everything, None
    seeds = {writers[k - 1][0] for k in drawn}
    # the checked elements: those whose last write is a seed (marked through the seeds' own accesses, so
    # the cost follows what is checked, not the output's size)
    checked = {b: np.zeros(arr.shape, dtype=bool) for b, arr in last.items()}
    for k, (n, accesses) in enumerate(writers, 1):
        clock.tick(n)
        if n in seeds:
            for w in accesses:
                b = _base(w.tensor)
                shape = (1, *w.tensor.shape)
                mark = checked[b].reshape(shape)
                view = strided_view(mark, w, writeable=True) if _gathers(w) else None
                if view is not None:     # index arrays of an affine access: through strided views, no gathers
                    view |= strided_view(last[b].reshape(shape), w) == k
                else:
                    mark[w.index] = mark[w.index] | (last[b].reshape(shape)[w.index] == k)
    masks = {o: checked[_base(tensors[o])][0].reshape(tensors[o].shape) for o in outs}
    count = sum(int(m.sum()) for m in checked.values())
    needed = backward(steps, decoded, tensors, seeds, deadline)
    return Check(needed, masks, count, elements, len(seeds), len(writers)), None


def _gathers(a) -> bool:
    """Whether the access indexes by arrays (basic slices make views already)."""
    return any(isinstance(x, np.ndarray) for x in a.index[1:])


def _points(shape: tuple[int, ...], regions: int, rng: np.random.Generator):
    """Every corner (at most MAX_CORNERS), a random point on each face (one coordinate at its first or last
    index) and `regions` uniform points."""
    ends = [sorted({0, n - 1}) for n in shape]
    yield from itertools.islice(itertools.product(*ends), MAX_CORNERS)
    for d, n in enumerate(shape):
        for end in (0, n - 1):
            p = [int(rng.integers(m)) for m in shape]
            p[d] = end
            yield tuple(p)
    for _ in range(regions):
        yield tuple(int(rng.integers(m)) for m in shape)


class _Needs:
    """Per tensor (its storage), the bounding boxes whose current values something computed will read."""

    def __init__(self, tensors: list[TensorDecl]) -> None:
        self.tensors, self.boxes = tensors, {}

    def _box(self, a):
        t = a.tensor
        if t.alias != -1:           # a reshaped HBM view: the whole storage, never an exact box
            base = self.tensors[t.alias]
            return base.tid, tuple(0 for _ in base.shape), tuple(n - 1 for n in base.shape), False
        return t.tid, a.lo, a.hi, a.dense

    def hit(self, a) -> bool:
        tid, lo, hi, _ = self._box(a)
        for blo, bhi in self.boxes.get(tid, ()):
            if all(l1 <= h2 and l2 <= h1 for l1, h1, l2, h2 in zip(lo, hi, blo, bhi)):
                return True
        return False

    def kill(self, a) -> None:
        tid, lo, hi, dense = self._box(a)
        if dense and tid in self.boxes:
            self.boxes[tid] = [(blo, bhi) for blo, bhi in self.boxes[tid]
                               if not all(l1 <= l2 and h2 <= h1 for l1, h1, l2, h2 in zip(lo, hi, blo, bhi))]

    def add(self, a) -> None:
        tid, lo, hi, _ = self._box(a)
        boxes = self.boxes.setdefault(tid, [])
        if (lo, hi) in boxes:
            return
        boxes.append((lo, hi))
        if len(boxes) > MAX_BOXES:
            self.boxes[tid] = [(tuple(min(b[0][d] for b in boxes) for d in range(len(lo))),
                                tuple(max(b[1][d] for b in boxes) for d in range(len(lo))))]


def backward(steps: list[Step], decoded: list, tensors: list[TensorDecl], seeds: set[int],
             deadline: float | None = None) -> bytearray:
    """Which instructions the seeds' values depend on (the seeds included)."""
    needed = bytearray(len(steps))
    needs = _Needs(tensors)
    registers = False             # the Scalar engine's accumulator registers (activation reduce_cmd)
    clock = Clock(deadline, "choosing the instructions to compute")
    for n in range(len(steps) - 1, -1, -1):
        clock.tick(n)
        step = steps[n]
        attrs, mask = decoded[n][3], decoded[n][4]
        registers_used = step.op == "activation" and "reduce_cmd" in attrs
        if not (n in seeds or (registers_used and registers) or any(needs.hit(w) for w in step.writes)):
            continue
        needed[n] = 1
        reads_dst = (step.op == "matmul" and bool(attrs.get("acc"))) or "rmw" in attrs
        if mask is None and not reads_dst and not registers_used:
            for w in step.writes:
                needs.kill(w)
        for a in step.reads + (step.writes if reads_dst else []):
            needs.add(a)
        registers = registers or registers_used
    return needed
