"""Parameters of the gemmini-sim timing model, each with the Gemmini RTL fact
(file and parameter of ucb-bar/gemmini's src/main/scala/gemmini/, or of
Chipyard / rocket-chip) it stands for. The C model (csrc/timing.c,
csrc/memtiming.c) receives them by name in every job, so this dataclass is the
single place to change the simulated machine.

The defaults describe Gemmini's default configuration (16x16 int8 systolic
array, int32 accumulators) attached to a Rocket core over RoCC in Chipyard's
GemminiRocketConfig. Four values are not in the RTL: the memory latency the
DMA sees and the CPU cycles per issued instruction (calibrated together
against the Exo kernels of the Autocomp paper's GEMM chart), and the scalar
cycles per block of Gemmini's CPU-issued software library, GEMM and
convolution (each fitted to one published ratio). bench/bench_gemmini_sim.py
prints the calibration table and sweeps the first two, showing that the
kernel ordering (naive < hand-tuned < hardware loop) holds across their
plausible ranges.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

DIM = 16  # systolic array rows = columns: meshRows * tileRows = 16 * 1 (GemminiConfigs.scala)


def array_latency(cfg: "TimingConfig", dim: int = DIM) -> int:
    """Cycles from a compute's issue until its results are in the accumulator (csrc/timing.c array_latency) on
    a dim x dim array: scratchpad read, the operands' skew across the array and the mesh's output and
    accumulator delays."""
    return (1 + cfg.spad_read_delay + 1 + (dim - 1) + dim * (cfg.tile_latency + 1) + cfg.mesh_output_delay
            + cfg.acc_latency)


@dataclass(frozen=True)
class TimingConfig:
    # -- local memories ------------------------------------------------------
    spad_rows: int = 16384
    """Scratchpad rows of DIM int8: sp_capacity = CapacityInKilobytes(256) with 16-byte rows
    (GemminiConfigs.scala); a row address has log2(16384) = 14 bits (LocalAddr.scala)."""
    spad_banks: int = 4
    """sp_banks = 4 (GemminiConfigs.scala). Banks are single-ported for writes against reads
    (Scratchpad.scala: a bank being written cannot be read in that cycle; writes win)."""
    acc_rows: int = 1024
    """Accumulator rows of DIM int32: acc_capacity = CapacityInKilobytes(64) with 64-byte rows
    (GemminiConfigs.scala)."""
    acc_banks: int = 2
    """acc_banks = 2 (GemminiConfigs.scala); compute writes to a bank win over mvout reads of it
    (AccumulatorMem.scala)."""

    # -- DMA -----------------------------------------------------------------
    dma_beat_bytes: int = 16
    """Bytes per bus beat: dma_buswidth = 128 (GemminiConfigs.scala), Chipyard's GemminiRocketConfig
    sets WithSystemBusWidth(128). Each direction moves one beat per cycle (DMA.scala StreamReader,
    StreamWriter)."""
    dma_max_bytes: int = 64
    """dma_maxbytes = 64: an mvin/mvout sends one memory request per DRAM row, at most 64 bytes
    (LoadController.scala / DMA.scala); 16-column int8 rows use a quarter of a request."""
    dma_inflight_reqs: int = 16
    """max_in_flight_mem_reqs = 16 (GemminiConfigs.scala): the DMA's TileLink source ids, i.e.
    requests in flight per direction. Narrow rows therefore cannot use the full bandwidth."""
    dma_inflight_cmds: int = 2
    """mvin commands in flight: DMACommandTracker nCmds = max_in_flight_mem_reqs / DIM + 1 = 2
    (LoadController.scala)."""
    dma_latency: int = 80
    """Cycles from a DMA request to its data (or write acknowledge) through the system bus and L2 to
    memory. Not an RTL parameter (it depends on the L2 hit rate and the DRAM model; FireSim's default
    latency-bandwidth DRAM model adds 30 memory cycles to the bus and L2 crossings). Calibrated with
    cpu_issue_cycles against the Autocomp paper's chart (docs/gemmini-published.md 1.2): the Exo GEMMs'
    unoptimized and optimized kernels against the hardware FSM, 12 ratios all within 25% (-23% to +24%) at
    80 and 8; bench/bench_gemmini_sim.py --calibration prints them, and the bench sweeps 32 to 128."""

    # -- reservation station ---------------------------------------------------
    ld_rs: int = 8
    """reservation_station_entries_ld = 8 (GemminiConfigs.scala; also the loop FSMs' max_lds)."""
    ex_rs: int = 16
    """reservation_station_entries_ex = 16 (GemminiConfigs.scala; the loop FSMs' max_exs)."""
    st_rs: int = 4
    """reservation_station_entries_st = 4 (GemminiConfigs.scala; the loop FSMs' max_sts)."""

    # -- CPU and execute costs ---------------------------------------------------
    cpu_issue_cycles: int = 8
    """Rocket cycles per instruction the CPU issues to Gemmini: one RoCC instruction plus the integer
    instructions packing its two 64-bit operands (rows << 48 | cols << 32 | address, the DRAM address) and
    the straight-line address arithmetic around it; Rocket is single-issue in order and sends the RoCC
    command from writeback without stalling while Gemmini's command queue has room. Calibrated with
    dma_latency (see there): 8 puts Exo's optimized GEMMs, which are bound by this cost, at 1.03-1.20x of
    their published speedups over the library, and lets a CPU-issued schedule (a preload and a compute per
    16-cycle block) keep the array busy, as Autocomp's best GEMMs did (86-94% of the hardware FSM in the
    chart); the bench sweeps 3 to 12. Scalar code beyond this (loops
    with heavier arithmetic) is not measured for kernels: only the library declares its own (below)."""
    config_cycles: int = 1
    """Cycles a config_* occupies its controller (config_ld/config_st retire on issue,
    ReservationStation.scala)."""
    min_rows: int = 4
    """Fewest cycles a preload/compute group occupies the array: total_rows = max(rows_a, rows_b, 4)
    when no real weights are preloaded and nothing is transposed, DIM otherwise
    (ExecuteController.scala: writes to one accumulator row must be 4 cycles apart)."""
    spad_read_delay: int = 4
    """spad_read_delay = 4 (GemminiConfigs.scala): scratchpad read pipeline (+1 cycle SRAM read)."""
    mesh_output_delay: int = 1
    """mesh_output_delay = 1 (GemminiConfigs.scala)."""
    acc_latency: int = 2
    """acc_latency = 2 (GemminiConfigs.scala): an accumulator write lands 2 cycles after its request."""
    tile_latency: int = 0
    """tile_latency = 0 (GemminiConfigs.scala): one register per PE hop."""
    mvin_scale_latency: int = 4
    """mvin_scale_args latency 4 (Configs.scala defaultConfig): the mvin scale unit's pipeline."""
    acc_scale_latency: int = 8
    """acc_scale_args latency 8 (Configs.scala defaultConfig): the mvout scale unit's pipeline."""

    # -- loop FSMs ---------------------------------------------------------------
    loop_ws_commands: int = 6
    """RoCC instructions per gemmini_loop_ws: 5 LOOP_WS_CONFIG_* and LOOP_WS (gemmini.h)."""
    loop_conv_commands: int = 7
    """RoCC instructions per gemmini_loop_conv_ws: 6 LOOP_CONV_WS_CONFIG_* and LOOP_CONV_WS (gemmini.h;
    LoopConv.scala decodes them)."""
    concurrent_loops: int = 2
    """concurrent_loops = 2 (LoopMatmul.scala, LoopConv.scala): a third loop's configuration waits
    until the oldest has issued its last instruction, and non-loop instructions wait until every
    configured loop has."""
    fsm_start_cycles: int = 2
    """Cycles from LOOP_WS to the unrollers' first command: the command passes LoopMatmul's input
    register and the loop becomes `configured` the cycle after (LoopMatmul.scala). The FSMs issue
    at most one command per cycle in all (one Arbiter in front of the reservation station)."""

    # -- Gemmini's software library (csrc/gemmini_lib.c) --------------------------
    library_hwloop: int = 0
    """0: tiled_matmul_auto issues every 16x16 block from the CPU, the library the Autocomp paper measured
    (its chart puts the library 5.9-6.5x below the hardware FSM on the 6 Exo GEMMs; only a CPU-issued library is
    that slow). 1: every tile goes to LOOP_WS, as mainline gemmini-rocc-tests' gemmini.h does today."""
    library_block_cycles: int = 80
    """Rocket cycles of the CPU-issued library's scalar code per 16x16x16 block, besides issuing its
    instructions: the k/j/i loop, three local addresses, six padding tests, the three mvin/mvout conditions and
    the packing of preload's and compute's operands, about 60-70 RV64 instructions at Rocket's in-order CPI.
    Fitted: the value that puts the library at the chart's 6.13x (geomean) below the hardware FSM
    (docs/gemmini-published.md 1.2); bench/bench_gemmini_sim.py prints the per-shape error."""
    library_conv_block_cycles: int = 25
    """The same for the CPU-issued convolution library, per compute (up to 16 output pixels x 16 input x 16
    output channels of one kernel tap), besides issuing the loop's instructions. Fitted: the value that puts
    Exo's optimized convolutions at the paper's 2.45x (geomean) over the library (2.7x for Autocomp over
    the library, 1.1x for Autocomp over Exo-opt: the v2 abstract)."""

    # -- the Rocket core's scalar code: the harness helpers of Autocomp's ADMM harness (csrc/cpuops.c) -----
    scalar_call_cycles: int = 12
    """Rocket cycles of one add_matrix/negate_matrix call besides its elements: call and return, argument
    moves, the two loop set-ups and the row loop's test (about 12 RV64 instructions; Rocket is single-issue and
    in order, RocketCore.scala, so an instruction is a cycle when nothing stalls). The replayer charges it
    (the kernel process only records the call), so the count cannot be forged."""
    scalar_add_cycles: int = 11
    """Rocket cycles per element of add_matrix: two flw, fadd.s, fsw and four loop instructions (three
    pointer increments and the branch), 8 issue slots, plus 3 stall cycles: the fsw waits for fadd.s, whose
    pipeline is sfmaLatency = 3 (rocket-chip tile/FPU.scala FPUParams), and fadd.s waits a cycle for its
    second load. Assumes L1 hits (the operands are a few 64-byte lines)."""
    scalar_negate_cycles: int = 8
    """Rocket cycles per element of negate_matrix: flw, fsgnjn.s, fsw and three loop instructions (6 issue
    slots), plus 2 stall cycles: fsgnjn.s waits a cycle for the load and the fsw a cycle for the
    sign-injection unit (fpmuLatency = 2, rocket-chip tile/FPU.scala FPUParams)."""

    # -- safety -----------------------------------------------------------------
    max_instructions: int = 50_000_000
    """Stop kernels that issue more instructions than any sensible schedule needs (not hardware)."""

    @property
    def array_latency(self) -> int:
        """Cycles from an operand row's scratchpad read to its result in the accumulator: SRAM read,
        spad_read_delay, the mesh input register, the input skew (DIM-1), DIM PE hops, the output
        delay and the accumulator write (MeshWithDelays.scala, Mesh.scala, AccumulatorMem.scala)."""
        return array_latency(self)

    @property
    def dma_bytes_per_cycle(self) -> float:
        """Best-case DMA bandwidth per direction (full 64-byte rows)."""
        return min(float(self.dma_beat_bytes), self.dma_inflight_reqs * self.dma_max_bytes / self.dma_latency)

    @property
    def macs_per_cycle(self) -> int:
        return DIM * DIM

    def header_lines(self) -> list[str]:
        return [f"cfg {k} {int(v)}" for k, v in asdict(self).items()]

    @classmethod
    def sources(cls) -> list[tuple[str, int, str]]:
        """(parameter, default, the fact behind it) for every parameter, for tables and docs."""
        import inspect
        import re
        text = inspect.getsource(cls)
        docs = dict(re.findall(r'^    (\w+): int = [^\n]*\n    """(.*?)"""', text, re.M | re.S))
        return [(f.name, f.default, " ".join(docs.get(f.name, "").split())) for f in fields(cls)]

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
            # zero is a real value of these (FP32DefaultConfig's mesh_output_delay; a CPU cost left out)
            if getattr(cfg, f.name) < (0 if f.name in ("tile_latency", "mesh_output_delay") or
                                       f.name.startswith(("library_", "scalar_")) else 1):
                raise ValueError(f"timing parameter {f.name} must be positive")
        if cfg.library_hwloop not in (0, 1):
            raise ValueError("timing parameter library_hwloop must be 0 (the CPU-issued library) or 1 (the loop FSM)")
        for name in ("spad_rows", "acc_rows"):
            if getattr(cfg, name) & (getattr(cfg, name) - 1):
                raise ValueError(f"{name} must be a power of two (row addresses wrap around)")
        if cfg.spad_rows % cfg.spad_banks or cfg.acc_rows % cfg.acc_banks:
            raise ValueError("spad_rows and acc_rows must be multiples of their bank counts")
        return cfg
