"""Memory dependences of one physical buffer for the cost model: which earlier accesses a new one must wait for.

A buffer's bytes are kept as sorted, disjoint byte segments; each segment holds a few records (partition
range, end time, read or write, engine) of the accesses that touched it. An access waits for the latest
end among the records of the segments it overlaps that conflict with it (any record for a write; writes
only for a read). Then the segments it covers become one segment: records that a write fully covers are
dropped (the write already waited for them), the others are kept, now attributed to the whole segment.

Cost: a lookup is a binary search plus one step per overlapped segment, and every access leaves at most
three segments behind while absorbing the ones it overlaps, so n accesses cost O(n log n) in all (the
segment lists are Python lists, whose inserts are memmoves). Two approximations, both toward waiting
longer, never shorter: a record absorbed into a wider segment applies to the whole of it, and past
MAX_RECORDS records in one segment the oldest reads (then writes) are merged into one bounding record.
Exact for the patterns kernels use (tiles written and read whole, rows or columns of one tensor).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

MAX_RECORDS = 16

# a record: (first partition, last partition, end time ns, is_write, engine)
Record = tuple[int, int, float, bool, str]


class Buffer:
    __slots__ = ("starts", "ends", "recs")

    def __init__(self) -> None:
        self.starts: list[int] = []       # first byte of each segment (sorted)
        self.ends: list[int] = []         # last byte of each segment (sorted: segments are disjoint)
        self.recs: list[list[Record]] = []

    def _span(self, f0: int, f1: int) -> tuple[int, int]:
        """Indices [lo, hi) of the segments overlapping bytes f0..f1."""
        return bisect_left(self.ends, f0), bisect_right(self.starts, f1)

    def ready(self, p0: int, p1: int, f0: int, f1: int, is_write: bool) -> tuple[float, str | None]:
        """(time, engine) of the latest earlier access this one must wait for; (0, None) if none."""
        best, cause = 0.0, None
        lo, hi = self._span(f0, f1)
        for i in range(lo, hi):
            for q0, q1, end, w, engine in self.recs[i]:
                if (w or is_write) and end > best and q0 <= p1 and p0 <= q1:
                    best, cause = end, engine
        return best, cause

    def record(self, p0: int, p1: int, f0: int, f1: int, is_write: bool, end: float, engine: str) -> None:
        lo, hi = self._span(f0, f1)
        if hi == lo + 1 and self.starts[lo] == f0 and self.ends[lo] == f1:
            # the bytes of exactly one segment (a tile accessed whole again): its records, updated in place,
            # as the general path below leaves them (no head or tail, the one segment's records merged)
            recs = self.recs[lo]
            merged = [r for r in recs if not (p0 <= r[0] and r[1] <= p1)] if is_write else list(recs)
            merged.append((p0, p1, end, is_write, engine))
            self.recs[lo] = _shrink(merged) if len(merged) > MAX_RECORDS else merged
            return
        self._merge(lo, hi, p0, p1, f0, f1, is_write, end, engine)

    def _merge(self, lo: int, hi: int, p0: int, p1: int, f0: int, f1: int, is_write: bool, end: float,
               engine: str) -> None:
        """record() in general: segments lo..hi-1 overlap the access's bytes f0..f1."""
        merged: list[Record] = []
        head = tail = None
        for i in range(lo, hi):
            s0, s1, recs = self.starts[i], self.ends[i], self.recs[i]
            if s0 < f0:
                head = (s0, f0 - 1, list(recs))       # the part before this access keeps its own records
            if s1 > f1:
                tail = (f1 + 1, s1, list(recs))
            merged.extend(recs)
        if is_write:
            merged = [r for r in merged if not (p0 <= r[0] and r[1] <= p1)]
        merged.append((p0, p1, end, is_write, engine))
        if len(merged) > MAX_RECORDS:
            merged = _shrink(merged)
        pieces = [x for x in (head, (f0, f1, merged), tail) if x is not None]
        self.starts[lo:hi] = [x[0] for x in pieces]
        self.ends[lo:hi] = [x[1] for x in pieces]
        self.recs[lo:hi] = [x[2] for x in pieces]


def _shrink(recs: list[Record]) -> list[Record]:
    """Merge the oldest records of a kind into one that covers them all and ends last (waits only grow)."""
    out = list(recs)
    for kind in (False, True):
        group = [r for r in out if r[3] == kind]
        if len(out) <= MAX_RECORDS // 2 or len(group) < 2:
            continue
        last = max(group, key=lambda r: r[2])
        one = (min(r[0] for r in group), max(r[1] for r in group), last[2], kind, last[4])
        out = [r for r in out if r[3] != kind] + [one]
    return out
