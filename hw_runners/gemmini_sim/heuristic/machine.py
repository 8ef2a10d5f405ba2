"""The simulated Gemmini as the heuristic sees it: every size and delay is read from gemmini-sim's own
TimingConfig (hw_runners/gemmini_sim/timing.py), the one place that defines the machine."""
from __future__ import annotations

from autocomp_zmq.hw_runners.gemmini_sim.timing import DIM, TimingConfig, array_latency

_MACHINE = TimingConfig()
SPAD_ROWS = _MACHINE.spad_rows                            # scratchpad rows of DIM int8
BANK_ROWS = _MACHINE.spad_rows // _MACHINE.spad_banks     # rows per scratchpad bank
ACC_ROWS = _MACHINE.acc_rows                              # accumulator rows of DIM int32
ISSUE = _MACHINE.cpu_issue_cycles                         # CPU cycles per issued instruction
LATENCY = _MACHINE.dma_latency                            # cycles from a DMA request to its data
INFLIGHT = _MACHINE.dma_inflight_reqs                     # DMA requests in flight per direction
ARRAY_LATENCY = array_latency(_MACHINE)                   # a compute's issue to its results in the accumulator

__all__ = ["ACC_ROWS", "ARRAY_LATENCY", "BANK_ROWS", "DIM", "INFLIGHT", "ISSUE", "LATENCY", "SPAD_ROWS", "tiles"]


def tiles(n: int) -> int:
    """DIM-wide tiles covering n rows or columns: the last one is partial when DIM does not divide n."""
    return -(-n // DIM)
