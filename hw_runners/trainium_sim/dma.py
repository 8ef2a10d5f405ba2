"""The DMA side of trainium-sim's cost model: how fast a transfer's rows move (dma_efficiency, dma_ns) and how the
16 DMA engines are shared between the kernel's in-order queues and the compiler's spill traffic (DmaQueues).
Every parameter and its source is in params.toml (dma_*)."""
from __future__ import annotations

import heapq
import math

from autocomp_zmq.hw_runners.trainium_sim.replay import Step


def dma_efficiency(run_bytes: int, p: dict) -> float:
    """Fraction of an engine's sustained rate that rows of run_bytes contiguous bytes achieve: the published
    points of params.toml dma_efficiency_curve, log-linear between them, proportional to the row below the
    first (per-row overhead), never under dma_min_efficiency."""
    curve = p["dma_efficiency_curve"]
    run = max(1, run_bytes)
    b0, e0 = curve[0]
    if run <= b0:
        return max(p["dma_min_efficiency"], e0 * run / b0)
    for (b_lo, e_lo), (b_hi, e_hi) in zip(curve, curve[1:]):
        if run <= b_hi:
            return e_lo + (e_hi - e_lo) * math.log2(run / b_lo) / math.log2(b_hi / b_lo)
    return curve[-1][1]


def dma_ns(step: Step, p: dict) -> tuple[float, int]:
    """(occupancy in ns, DMA engines used): partitions spread over engines, efficiency by row size."""
    engines = max(1, min(int(p["dma_queues"]), math.ceil(step.partitions / p["dma_partitions_per_engine"])))
    return step.dma_bytes / (engines * p["dma_queue_gbps"] * dma_efficiency(step.run_bytes, p)), engines


class DmaQueues:
    """NeuronCore-v2's 16 DMA engines, each moving one transfer at a time, fed from in-order queues: loads
    from one, stores from another (so a store waiting for its compute never holds up the next load).

    A transfer's fixed cost (dma_fixed_us: descriptor setup, synchronization, semaphore-to-start) is split in
    two: its queue spends dma_queue_issue_us setting it up before the data moves, one transfer after the
    other in program order (a transfer waiting for its inputs or its destination buffer holds up the ones
    queued behind it, as the trigger engine waits on a semaphore), while earlier transfers' data keeps moving;
    the rest is completion latency after the data moved, overlapping everything. Both queues share the 16
    engines: each queue keeps its own engine timeline (so a load may run before a store that program order
    puts ahead of it), and no transfer completes before all the engine time issued up to it could have been
    spent on 16 engines."""

    def __init__(self, p: dict) -> None:
        self.p = p
        self.count = int(p["dma_queues"])
        self.engines = {"in": [0.0] * self.count, "out": [0.0] * self.count}
        self.setup_free = {"in": 0.0, "out": 0.0}
        self.setup_ns = p["dma_queue_issue_us"] * 1000.0
        self.completion_ns = p["dma_fixed_us"] * 1000.0 - self.setup_ns
        self.work = 0.0                                      # engine-ns issued so far, both queues
        self.everyone = list(range(self.count))

    def plan(self, st: Step, ready: float) -> tuple[float, float, list[int], str, float]:
        """(start, duration, engines, queue, busy) of one transfer whose dependences are met at `ready`: its
        data moves from start for duration; busy is its share of the 16 engines' time."""
        occupancy, n = dma_ns(st, self.p)
        queue = "out" if st.writes[0].tensor.buffer == "hbm" else "in"
        engines = self.engines[queue]
        picked = self.everyone if n >= self.count else heapq.nsmallest(n, range(self.count), key=engines.__getitem__)
        setup_end = self.setup_free[queue] = max(ready, self.setup_free[queue]) + self.setup_ns
        start = max(setup_end, max(engines) if picked is self.everyone else max(engines[i] for i in picked))
        self.work += occupancy * n
        duration = max(occupancy, self.work / self.count - start)
        return start, duration, picked, queue, occupancy * n / self.count

    def commit(self, st: Step, picked: list[int], done: float) -> None:
        engines = self.engines["out" if st.writes[0].tensor.buffer == "hbm" else "in"]
        for i in picked:
            engines[i] = done

    def spill(self, nbytes: int, partitions: int, ready: float, store: bool, row_bytes: int) -> float:
        """When a compiler spill (store) or reload of nbytes over `partitions` has moved its data: the
        compiler's own queues (not the kernel's), the shared engines. The compiler moves whole rows of the
        spilled block (row_bytes per partition), however small the kernel's access: Autocomp's conv1d chain
        wrote a spilled [128, 2048] fp32 block one column at a time (65,536 one-element writes; steps 0-2 of
        examples/trn-advanced/4_conv1d_trace.py, trn1.2xlarge) and ran 8.01 ms against 7.93 ms without the
        spill (step 3), where 65,536 four-byte-row transfers would take several times the kernel."""
        n = max(1, min(self.count, math.ceil(partitions / self.p["dma_partitions_per_engine"])))
        engines = self.engines["out" if store else "in"]
        picked = heapq.nsmallest(n, range(self.count), key=engines.__getitem__)
        occupancy = nbytes / (n * self.p["dma_queue_gbps"] * dma_efficiency(row_bytes, self.p))
        start = max(ready, max(engines[i] for i in picked))
        self.work += occupancy * n
        done = max(start + occupancy, self.work / self.count)
        for i in picked:
            engines[i] = done
        return done
