"""When a resource (an engine, a shared SBUF/PSUM port) is free: the gaps its instructions left open before its
last one, and where it is free from then on. The compiler schedules the unrolled instruction stream, not the
program's order (AWS, nki.language.no_reorder: without that block 'the compiler scheduler is free to reorder
independent operations for better hardware utilization'), so an instruction whose inputs are ready early runs
in an earlier gap of its engine when it fits there (costmodel.EngineTiming)."""
from __future__ import annotations

import bisect

# gaps kept per resource, the oldest dropped first: how far back the scheduler looks. An estimate (the compiler's
# scheduling window is not published) that also bounds the search per instruction; 32 and 1024 give the same
# latencies within 0.2% on Autocomp's attention, sd-attention and conv1d steps (bench_trainium_chains.py)
WINDOW = 256


class Resource:
    def __init__(self) -> None:
        self.starts: list[float] = []      # gap starts, sorted
        self.ends: list[float] = []        # gap ends
        self.end = 0.0                     # free from here on

    def earliest(self, t: float, d: float) -> float:
        """The earliest time >= t at which the resource is free for d."""
        i = bisect.bisect_right(self.ends, t)          # the first gap still open after t
        for j in range(i, len(self.starts)):
            s = max(self.starts[j], t)
            if s + d <= self.ends[j]:
                return s
        return max(t, self.end)

    def occupy(self, t: float, d: float) -> None:
        """Mark [t, t + d) busy: t is at or after the end, or inside a gap that earliest() found."""
        if t >= self.end:
            if t > self.end:
                self.starts.append(self.end)
                self.ends.append(t)
                if len(self.starts) > WINDOW:
                    del self.starts[0], self.ends[0]
            self.end = t + d
            return
        j = bisect.bisect_right(self.starts, t) - 1
        gs, ge = self.starts[j], self.ends[j]
        assert gs <= t and t + d <= ge + 1e-9, (gs, ge, t, d)
        pieces = [(a, b) for a, b in ((gs, t), (t + d, ge)) if b - a > 1e-9]
        self.starts[j:j + 1] = [a for a, _ in pieces]
        self.ends[j:j + 1] = [b for _, b in pieces]
