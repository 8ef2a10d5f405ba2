"""nl.affine_range's iterations as the front end records them, for the trusted side's loop model
(hw_runners/trainium_sim/loops.py): where each iteration's instructions begin, in RECORDER.loops."""
from __future__ import annotations

from neuronxcc.nki._trace import RECORDER

MAX_LOOP_EVENTS = 4_000_000     # affine_range iterations recorded (an empty loop body records only these)


class AffineRange:
    """nl.affine_range's iterations: a range (len, indexing, `in` work as on a range) whose iteration records
    where each iteration's instructions begin. Only a claim: the replayer verifies the iterations independent
    and affine before the cost model treats them as the compiler would (loops.py)."""
    __slots__ = ("r",)

    def __init__(self, r: range) -> None:
        self.r = r

    def __len__(self) -> int:
        return len(self.r)

    def __getitem__(self, i):
        return self.r[i]

    def __contains__(self, v) -> bool:
        return v in self.r

    def __getattr__(self, name):         # start, stop, step, index, count: as the range's
        return getattr(self.r, name)

    def __reversed__(self):
        return reversed(self.r)      # reversed iterations are not an affine_range the compiler sees: unmarked

    def __iter__(self):
        rec, trip = RECORDER, len(self.r)
        rec.loop_ids += 1
        lid = rec.loop_ids
        events = rec.loops
        if not trip:
            return
        try:
            for k, v in enumerate(self.r):
                if len(events) < MAX_LOOP_EVENTS:
                    events.append([len(rec.instrs), lid, k, trip])
                else:
                    rec.loops_dropped = True
                yield v
        finally:      # also on break (the generator is closed when the loop drops it)
            if len(events) < MAX_LOOP_EVENTS:
                events.append([len(rec.instrs), lid, -1, trip])
            else:
                rec.loops_dropped = True
