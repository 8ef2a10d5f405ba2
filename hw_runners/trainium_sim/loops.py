"""What neuronx-cc does with a kernel's nl.affine_range loops, on the trusted side.

The front end records where each affine_range iteration begins (tracer: `loops`, [first instruction, loop id,
iteration, trip count], iteration -1 where the loop ends). That record comes from the sandbox, so it is a claim:
a loop is treated as the compiler treats one only after this module has checked, on the replayed instructions,
what makes the compiler's transformation legal. A forged claim therefore gains nothing an honest loop written
the same way would not.

Two behaviours, both of innermost loops (no loop inside), both measured on Autocomp's conv1d chain (its trace
examples/trn-advanced/4_conv1d_trace.py, each step measured on a trn1.2xlarge) and described in its case study
(ADRS blog, "Autocomp adds a new fixed-size loop inside the main convolution loop, enabling Trainium's
VectorEngine to more widely vectorize the element-wise and reduction operations inside this loop"):

- overlap: the iterations of an independent loop are independent instruction streams, and the compiler's
  scheduler interleaves them, so the dependent-instruction latency inside one iteration and the small-tile
  instruction overhead are hidden behind the other iterations' instructions. Steps 0-3 of the chain (65,536
  iterations of a [128, 3] multiply and a [128, 3] -> [128, 1] reduction, 8.0 ms) take 137 Vector cycles per
  iteration, i.e. MIN_II per instruction and nothing more (charged in program order, 470).
- vectorization: an independent innermost loop of at most `vectorize_max_trip` iterations whose body is only
  Vector/Scalar/GpSimd instructions with accesses affine in the iteration becomes one instruction per body
  instruction, over the iterations' elements together (its free size times the trip count). Step 6's 64-trip
  inner loop runs 10.7x faster than step 5's single 2,048-trip loop of the same instructions; steps 4 and 5
  (512 and 2,048 trips) show no such gain, so the bound lies in [64, 512).

Legal means: every iteration issues the same instructions (operation, engine, function, kernel line, shapes);
no element one iteration writes is read or written by another (bounding boxes per tensor: conservative, so a
loop it cannot prove independent keeps program-order timing); for vectorization, each access moves by the
same offset from one iteration to the next, except tiles an iteration allocates for itself.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from autocomp_zmq.hw_runners.trainium_sim.deadline import Clock
from autocomp_zmq.hw_runners.trainium_sim.replay import Step

VECTOR_ENGINES = ("dve", "act", "pool")


@dataclass(frozen=True)
class Loop:
    starts: tuple[int, ...]      # first instruction of each iteration
    end: int                     # one past the last instruction of the last iteration
    inner: tuple["Loop", ...]    # the loops directly inside it, in order

    @property
    def trip(self) -> int:
        return len(self.starts)


def loops_of(raw, n_instrs: int) -> list[Loop]:
    """The outermost loops of a recorded `loops` list (each holding its inner ones), complete and properly
    nested. Anything malformed: no loops (the kernel is then timed in program order, which no claim can make
    faster)."""
    if not isinstance(raw, list) or len(raw) > 4 * n_instrs + 1024:
        return []
    stack: list[list] = []            # [loop id, trip, starts, inner loops]
    top, last = [], 0
    for ev in raw:
        if not (isinstance(ev, list) and len(ev) == 4 and all(type(x) is int for x in ev)):
            return []
        at, lid, k, trip = ev
        if not last <= at <= n_instrs or trip < 1:
            return []
        last = at
        if k == -1:
            if not stack or stack[-1][0] != lid or len(stack[-1][2]) != trip:
                return []
            _, _, starts, inner = stack.pop()
            (stack[-1][3] if stack else top).append(Loop(tuple(starts), at, tuple(inner)))
        elif stack and stack[-1][0] == lid:
            if k != len(stack[-1][2]) or stack[-1][1] != trip:
                return []
            stack[-1][2].append(at)
        else:
            if k != 0 or any(s[0] == lid for s in stack):
                return []
            stack.append([lid, trip, [at], []])
    return [] if stack else top


def _base(a) -> int:
    t = a.tensor
    return t.alias if t.alias != -1 else t.tid


def _signature(st: Step) -> tuple:
    return (st.op, st.engine, st.fn, st.site, tuple(a.shape for a in st.reads), tuple(a.shape for a in st.writes))


def _same_body(its: list[list[Step]]) -> bool:
    if not its[0] or any(len(it) != len(its[0]) for it in its):
        return False
    sig = [_signature(st) for st in its[0]]
    return all(_signature(st) == s for it in its[1:] for st, s in zip(it, sig))


def _own_tiles(it: list[Step]) -> set[int]:
    """Tensors this iteration writes before it reads them: its own tiles (a fresh temporary each iteration;
    independent() has checked that no other iteration touches what it writes)."""
    seen, own = set(), set()
    for st in it:
        for a in st.reads:
            seen.add(a.tensor.tid)
        for a in st.writes:
            if a.tensor.tid not in seen and a.tensor.alias == -1:
                own.add(a.tensor.tid)
            seen.add(a.tensor.tid)
    return own


class _Spans:
    """Each access's element range in its tensor: row-major over every dimension but the partition one (so
    blocks of an on-chip tensor are apart), first to last element of its bounding box. Cached per access (a
    fused instruction holds its iterations' accesses, which the enclosing loop checks again)."""

    def __init__(self) -> None:
        self.strides: dict[int, tuple[int, ...]] = {}
        self.cache: dict[int, tuple[int, int]] = {}

    def __call__(self, a) -> tuple[int, int]:
        got = self.cache.get(id(a))
        if got is None:
            t = a.tensor
            strides = self.strides.get(t.tid)
            if strides is None:
                skip = t.pdim if t.buffer != "hbm" else -1
                out, n = [0] * len(t.shape), 1
                for d in range(len(t.shape) - 1, -1, -1):
                    if d != skip:
                        out[d], n = n, n * t.shape[d]
                strides = self.strides[t.tid] = tuple(out)
            got = (sum(map(int.__mul__, a.lo, strides)), sum(map(int.__mul__, a.hi, strides)))
            self.cache[id(a)] = got
        return got


def independent(its: list[list[Step]], span: _Spans, clock: Clock | None = None) -> bool:
    """No element written by one iteration is read or written by another. Compared by each access's element
    range (partitions aside): conservative, a loop it cannot prove independent keeps program order."""
    clock = clock or Clock(None, "")
    writes: dict[int, list[tuple]] = {}
    for k, it in enumerate(its):
        clock.tick(k)
        for st in it:
            for a in st.writes:
                f0, f1 = span(a)
                writes.setdefault(_base(a), []).append((f0, f1, k))
    if not writes:
        return True
    reads: dict[int, list[tuple]] = {}
    for k, it in enumerate(its):
        for st in it:
            for a in st.reads:
                base = _base(a)
                if base in writes:
                    f0, f1 = span(a)
                    reads.setdefault(base, []).append((f0, f1, k))
    for base, ws in writes.items():
        ws.sort()
        reach, owner, reaches = -1, -1, []      # the furthest end so far, and whose
        for f0, f1, k in ws:
            if f0 <= reach and owner != k:
                return False
            if f1 > reach:
                reach, owner = f1, k
            reaches.append(reach)
        starts = [w[0] for w in ws]
        for f0, f1, k in reads.get(base, ()):
            # the writes that can overlap [f0, f1]: from the first whose furthest reach gets to f0, to the last
            # that starts by f1 (writes never overlap across iterations, checked above)
            for w in ws[bisect.bisect_left(reaches, f0):bisect.bisect_right(starts, f1)]:
                if w[1] >= f0 and w[2] != k:
                    return False
    return True


def affine(its: list[list[Step]]) -> bool:
    """Every access moves by one fixed offset (partitions and bytes) per iteration, keeping its extent; tiles
    an iteration allocates for itself (a fresh temporary each time) aside."""
    own = [_own_tiles(it) for it in its]
    for j in range(len(its[0])):
        for side in ("reads", "writes"):
            accesses = [getattr(it[j], side) for it in its]
            for i, a0 in enumerate(accesses[0]):
                if all(acc[i].tensor.tid in own[k] for k, acc in enumerate(accesses)):
                    continue
                r0, r1 = a0.region(), accesses[1][i].region()
                step = (r1[0] - r0[0], r1[2] - r0[2])
                for k, acc in enumerate(accesses):
                    r = acc[i].region()
                    if acc[i].tensor.tid != a0.tensor.tid or r != (r0[0] + k * step[0], r0[1] + k * step[0],
                                                                    r0[2] + k * step[1], r0[3] + k * step[1]):
                        return False
    return True


def _strided_walk(its: list[list[Step]], j: int, p: dict) -> bool:
    """Whether body instruction j, fused over the iterations, walks an on-chip operand with a stride past the
    strided-access threshold: where each iteration touches one element per partition, the fused instruction's
    innermost walk is the iteration's step (every 8th column, one per iteration, is a 32-byte stride, as written
    in one instruction); a wider per-iteration access keeps its own innermost walk, which cycles() sees."""
    first, second = its[0][j], its[1][j]
    for a0, a1 in zip(first.reads + first.writes, second.reads + second.writes):
        if a0.tensor.buffer in ("sbuf", "psum") and a0.tensor.tid == a1.tensor.tid and a0.free == 1:
            if abs(a1.region()[2] - a0.region()[2]) > p["strided_access_threshold_bytes"]:
                return True
    return False


def _marked(st: Step, **extra) -> Step:
    """A copy of a Step with more in its `extra` (what dataclasses.replace makes, for less)."""
    out = object.__new__(Step)
    out.__dict__.update(st.__dict__)
    out.extra = {**st.extra, **extra}
    return out


def transform(steps: list[Step], raw_loops, p: dict, deadline: float | None = None) -> list[Step]:
    """The instructions as the compiler issues them: verified source-innermost loops of at most
    vectorize_max_trip iterations of Vector/Scalar/GpSimd work fused into one instruction per body instruction;
    the instructions of the other verified independent loops that are innermost once that is done (no loop
    inside, or only loops that were vectorized) marked `overlapped` with the loop's trip count: EngineTiming and
    cycles() then charge them only what the other iterations cannot fill of the dependent latency and the
    small-tile overhead."""
    top = loops_of(raw_loops, len(steps))
    clock = Clock(deadline, f"checking the kernel's loops ({len(steps):,} instructions)")
    return _region(steps, 0, len(steps), top, p, _Spans(), clock)[0] if top else steps


def _region(steps: list[Step], a: int, b: int, loops: tuple | list, p: dict, span: _Spans,
            clock: Clock) -> tuple[list[Step], bool]:
    """Instructions a..b with the loops among them as issued, and whether every one of those loops was
    vectorized."""
    out, at, vectorized = [], a, True
    for lp in loops:
        out += steps[at:lp.starts[0]]
        issued, v = _loop(steps, lp, p, span, clock)
        out += issued
        vectorized &= v
        at = lp.end
    out += steps[at:b]
    return out, vectorized


def _loop(steps: list[Step], lp: Loop, p: dict, span: _Spans, clock: Clock) -> tuple[list[Step], bool]:
    bounds = list(lp.starts) + [lp.end]
    its, children, inner_vectorized = [], list(lp.inner), True
    c = 0
    for k in range(lp.trip):
        mine = []
        while c < len(children) and children[c].starts[0] < bounds[k + 1]:
            mine.append(children[c])
            c += 1
        clock.tick(bounds[k])
        it, v = _region(steps, bounds[k], bounds[k + 1], mine, p, span, clock)
        its.append(it)
        inner_vectorized &= v
    flat = [st for it in its for st in it]
    # innermost as the compiler sees it (no loop inside, or only vectorized ones), identical and independent
    if lp.trip < 2 or (lp.inner and not inner_vectorized) or not _same_body(its) \
            or not independent(its, span, clock):
        return flat, False
    body = its[0]
    if not lp.inner and lp.trip <= p["vectorize_max_trip"] and all(st.engine in VECTOR_ENGINES for st in body) \
            and affine(its):
        fused = [_marked(st, vectorized=lp.trip, **({"strided": True} if _strided_walk(its, j, p) else {}))
                 for j, st in enumerate(body)]
        for j, st in enumerate(fused):
            st.reads = [a for it in its for a in it[j].reads]
            st.writes = [a for it in its for a in it[j].writes]
            st.free *= lp.trip
        return fused, True
    return [_marked(st, overlapped=lp.trip) for st in flat], False
