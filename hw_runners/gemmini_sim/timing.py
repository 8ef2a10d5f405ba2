"""Parameters of the gemmini-sim timing model, each with the hardware fact it
stands for. The C model (csrc/timing.c) receives them by name in every job, so
this dataclass is the single place to change the simulated machine.

The defaults describe Gemmini's default configuration (16x16 int8 systolic
array, int32 accumulators) attached to a Rocket core over RoCC, with its DMA
on a 128-bit TileLink system bus. Values marked "estimate" are not published
numbers but chosen to reproduce Gemmini's qualitative behaviour: a naive
tile-at-a-time kernel reaches a small fraction of peak and the loop FSM
(LoopMatmul) reaches close to peak on large GEMMs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

DIM = 16  # systolic array rows = columns (Gemmini default DIM)


@dataclass(frozen=True)
class TimingConfig:
    # -- local memories ------------------------------------------------------
    spad_rows: int = 16384
    """Scratchpad rows of DIM int8: 256 KiB = 4 banks x 4096 rows x 16 B (sp_capacity = 256 KiB)."""
    spad_banks: int = 4
    """Scratchpad banks (sp_banks = 4). Same-bank operand reads of one fused preload+compute serialize."""
    acc_rows: int = 1024
    """Accumulator rows of DIM int32: 64 KiB = 1024 rows x 16 x 4 B (acc_capacity = 64 KiB)."""

    # -- DMA ---------------------------------------------------------------
    dma_beat_bytes: int = 16
    """Bytes per bus beat: the DMA sits on a 128-bit TileLink system bus (dma_buswidth = 128)."""
    dma_latency: int = 64
    """Cycles from a request to its data (estimate for an L2/DRAM round trip seen by the DMA)."""
    dma_inflight_bytes: int = 1024
    """Bytes the DMA may have outstanding: max_in_flight_mem_reqs = 16 requests of dma_maxbytes = 64 B.
    Bandwidth is min(beat, inflight / latency) bytes per cycle; the defaults give the full 16 B/cycle."""

    # -- reservation station (ROB) ------------------------------------------
    ld_rs: int = 8
    """Load-queue entries in Gemmini's reservation station (reservation_station_entries_ld = 8)."""
    ex_rs: int = 16
    """Execute-queue entries (reservation_station_entries_ex = 16)."""
    st_rs: int = 4
    """Store-queue entries (reservation_station_entries_st = 4)."""

    # -- CPU and execute costs ----------------------------------------------
    cpu_issue_cycles: int = 10
    """Rocket cycles per intrinsic the CPU issues: packing rows/cols/addresses into the two RoCC
    operands, address arithmetic, loop control and the RoCC handshake on an in-order core
    (estimate). At this cost a CPU-issued preload+compute pair (20 cycles) cannot keep up with a
    16-row compute (16 cycles), which is why Gemmini has loop FSMs."""
    config_cycles: int = 1
    """Cycles a config_* instruction occupies its queue."""
    unfused_preload_cycles: int = DIM
    """A preload that cannot overlap a preceding compute shifts DIM rows of weights into the array."""
    min_compute_cycles: int = 4
    """Shortest compute: the array pipeline accepts a new operation at most every 4 cycles."""
    array_latency: int = DIM + 4
    """Cycles for results to traverse the array and land in the accumulator (DIM plus pipeline)."""

    # -- loop FSMs -----------------------------------------------------------
    fsm_issue_cycles: int = 1
    """Each loop unroller (load, execute, store) issues one instruction per cycle."""
    loop_issue_instrs: int = 6
    """RoCC commands the CPU sends to start one gemmini_loop_ws (Gemmini's macro issues 6)."""

    # -- safety ---------------------------------------------------------------
    max_instructions: int = 50_000_000
    """Stop kernels that issue more instructions than any sensible schedule needs."""

    @property
    def dma_bytes_per_cycle(self) -> float:
        return min(float(self.dma_beat_bytes), self.dma_inflight_bytes / self.dma_latency)

    @property
    def macs_per_cycle(self) -> int:
        return DIM * DIM

    def header_lines(self) -> list[str]:
        return [f"cfg {k} {int(v)}" for k, v in asdict(self).items()]

    @classmethod
    def from_dict(cls, data: dict) -> "TimingConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown gemmini-sim timing parameters: {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(sorted(known))}")
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"timing parameter {key} must be an integer, not {value!r}")
        cfg = cls(**data)
        for f in fields(cls):
            if getattr(cfg, f.name) <= 0:
                raise ValueError(f"timing parameter {f.name} must be positive")
        if cfg.spad_rows % cfg.spad_banks:
            raise ValueError("spad_rows must be a multiple of spad_banks")
        return cfg
