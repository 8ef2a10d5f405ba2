"""When each allocation unit of a decoded stream is live (trusted side): the first and last instruction that
touches it, which buffer placement (layout.py) and the replayer's freeing of values use."""
from __future__ import annotations

import itertools
import math

from autocomp_zmq.hw_runners.trainium_sim.program import StreamError, TensorDecl, _terms


def uses(instrs, tensors: list[TensorDecl], max_items: int = 4_000_000,
         touches: dict | None = None) -> tuple[dict, dict]:
    """First and last instruction index that touches each allocation unit (checked lightly: replay checks
    fully). A unit is (tid, block): an on-chip tensor with dimensions before its partition dimension,
    (8, par_dim(128), 512), is allocated block by block as the compiler does, each block alive from its
    first to its last use; any other tensor is one unit, (tid, ()). `touches`, if given, gets how many
    accesses touch each unit (what spilling it would cost: layout.py)."""
    first: dict[tuple, int] = {}
    last: dict[tuple, int] = {}
    if not isinstance(instrs, list):
        raise StreamError("malformed instruction stream")
    count, items = len(tensors), 0
    for n, instr in enumerate(instrs):
        if not (isinstance(instr, list) and len(instr) == 6 and isinstance(instr[2], list)
                and isinstance(instr[3], list)):
            raise StreamError("malformed instruction in the stream")
        for a in instr[2] + instr[3]:
            if isinstance(a, list):
                if not (len(a) == 2 and isinstance(a[0], int) and 0 <= a[0] < count and isinstance(a[1], list)):
                    raise StreamError("malformed operand in the stream")
                blocks = block_span(tensors[a[0]], a[1])
                items += len(blocks)
                if items > max_items:
                    raise StreamError(f"the kernel's accesses touch more than {max_items:,} tile blocks in all")
                for b in blocks:
                    unit = (a[0], b)
                    first.setdefault(unit, n)
                    last[unit] = n
                    if touches is not None:
                        touches[unit] = touches.get(unit, 0) + 1
    return first, last


def last_use(last: dict[tuple, int]) -> dict[int, int]:
    """Per tensor, the last instruction that touches any of its blocks (when the replayer may drop its values)."""
    out: dict[int, int] = {}
    for (tid, _), n in last.items():
        if n > out.get(tid, -1):
            out[tid] = n
    return out


def block_span(t: TensorDecl, idx: list) -> list[tuple]:
    """The blocks (index tuples over the dimensions before the partition dimension) an access touches."""
    if t.buffer not in ("sbuf", "psum") or t.pdim == 0:
        return [()]
    if len(idx) != len(t.shape):
        return [()]          # replay reports the malformed access
    ranges = []
    for d in range(t.pdim):
        e = idx[d]
        if isinstance(e, int):
            lo = hi = e
        else:
            const, terms = _terms(e, "an access")
            lo = const + sum(min(0, c * (n - 1)) for n, _, _, c in terms)
            hi = const + sum(max(0, c * (n - 1)) for n, _, _, c in terms)
        lo, hi = max(lo, 0), min(hi, t.shape[d] - 1)       # out of bounds is replay's error to report
        if lo > hi:
            return [()]
        ranges.append(range(lo, hi + 1))
    if math.prod(len(r) for r in ranges) > 1 << 16:
        raise StreamError(f"an access touches more than {1 << 16:,} blocks of a tensor of shape {t.shape}")
    return list(itertools.product(*ranges))
