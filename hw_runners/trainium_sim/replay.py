"""Execute a validated NKI instruction stream on the evaluator's own inputs (trusted side).

Values are numpy arrays with a leading axis of input sets, so one pass over the stream computes every
set (public and hidden) at once. Uninitialised memory (outputs never stored, tiles read before
written) holds NaN, so a kernel that skips work fails the comparison instead of passing on zeros.
Each executed instruction also yields a Step: what the cost model needs (engine, sizes, the regions
it reads and writes). Data movement and the Tensor engine are here; the Vector/Scalar/GpSimd instructions
are in engine_ops.py.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim import capabilities, fp8, ops
from autocomp_zmq.hw_runners.trainium_sim.deadline import Clock
from autocomp_zmq.hw_runners.trainium_sim.engine_ops import EngineOps
from autocomp_zmq.hw_runners.trainium_sim.known import KnownForms, form_of
from autocomp_zmq.hw_runners.trainium_sim.program import PARTITIONS, Access, StreamError, TensorDecl, mask_array, tile_shape, where
from autocomp_zmq.hw_runners.trainium_sim.resolver import Resolver

ENGINES = ("pe", "act", "dve", "pool", "dma")
PSUM_BANK_BYTES = 2048
UNWRITTEN_INT = -(2 ** 31) + 7


@dataclass
class Step:
    op: str
    engine: str
    site: int
    fn: str
    reads: list[Access]
    writes: list[Access]
    partitions: int = 0          # of the instruction's output tile
    free: int = 0                # elements per partition of the output tile
    moving: int = 0              # nc_matmul: moving free size; stationary free size below
    stationary: int = 0
    fp32_matmul: bool = False
    psum_read: bool = False
    dma_bytes: int = 0
    run_bytes: int = 0
    extra: dict = field(default_factory=dict)


def _fresh(step: Step) -> Step:
    """A shallow copy of a decoded Step for computing its instruction again (what copy.copy makes, for less):
    the run sets the same fields the decoding did, and the decoded Step stays as it was."""
    out = object.__new__(Step)
    out.__dict__.update(step.__dict__)
    return out


class Replayer(EngineOps):
    def __init__(self, tensors: list[TensorDecl], inputs: dict[int, np.ndarray], sets: int,
                 last_use: dict[int, int] | None = None, compute: bool = True, rounded: bool = False) -> None:
        """last_use: tid -> index of the last instruction using an on-chip tensor (its values are freed then).
        compute=False: timing only (the calibration bench): every instruction is decoded and checked as usual
        and yields the same Step, but no value is computed (the outputs hold nothing meaningful).
        inputs: values per input tensor, set-stacked; rounded to the tensor's dtype here unless `rounded`
        says they already are (then they are used as given, and copied before anything writes them)."""
        self.tensors, self.sets, self.compute = tensors, sets, compute
        self.resolve = Resolver(tensors)
        self.known = KnownForms()           # instruction forms checked once for all their instances
        self.unfilled: set[int] = set()     # tensors nothing reads, whose unwritten elements nobody looks at
        self.mem: dict[int, np.ndarray] = {}
        self.act_acc: np.ndarray | None = None      # the Scalar engine's accumulator registers (nisa.reduce_cmd)
        self.free_after: dict[int, list[int]] = {}
        for tid, n in (last_use or {}).items():
            if tensors[tid].buffer in ("sbuf", "psum"):
                self.free_after.setdefault(n, []).append(tid)
        for tid, value in inputs.items():
            if rounded:
                self.mem[tid] = value
            else:
                self._array(tid)[...] = ops.round_to(value, tensors[tid].dtype)

    def _array(self, tid: int) -> np.ndarray:
        """A tensor's values, allocated at first use; never-written memory reads as NaN (ints: a sentinel)."""
        arr = self.mem.get(tid)
        if arr is None:
            t = self.tensors[tid]
            if t.alias != -1:
                arr = self._array(t.alias).reshape((self.sets, *t.shape))
            elif tid in self.unfilled:
                arr = np.empty((self.sets, *t.shape), dtype=ops.storage(t.dtype))
            else:
                fill = np.nan if ops.storage(t.dtype) is np.float32 else UNWRITTEN_INT
                arr = np.full((self.sets, *t.shape), fill, dtype=ops.storage(t.dtype))
            self.mem[tid] = arr
        return arr

    # -- operands ---------------------------------------------------------------------------------
    def read(self, a: Access) -> np.ndarray:
        if not self.sets:        # a dry run (see decode): the operand's shape, no values
            return np.empty((0, *a.shape), dtype=ops.storage(a.tensor.dtype))
        arr = self._array(a.tensor.tid)
        view = strided_view(arr, a)         # a strided view instead of gathering by index
        return view if view is not None else arr[a.index].reshape((self.sets, *a.shape))

    def write(self, a: Access, value, mask: np.ndarray | None, exact: bool = False) -> None:
        """exact: the values are already representable in the destination's dtype (a DMA between tensors
        of one dtype): no rounding pass."""
        shape = np.shape(value)[1:]
        if shape != a.shape and np.ndim(value) > 1 and ops.core_shape(shape) == ops.core_shape(a.shape):
            value = np.reshape(value, (self.sets, *a.shape))         # (P, 1) into (P,) and the like
            shape = a.shape
        if not self.sets:         # a dry run: the value must still fit
            if shape != a.shape or np.ndim(value) == 0:
                np.broadcast_to(value, (0, *a.shape))
            return
        value = np.broadcast_to(value, (self.sets, *a.shape))
        arr = self._array(a.tensor.tid)
        if not arr.flags.writeable:     # a shared input array (see __init__): this run gets its own copy
            base = a.tensor.alias if a.tensor.alias != -1 else a.tensor.tid
            self.mem[base] = self._array(base).copy()
            for tid in [t for t in self.mem if self.tensors[t].alias == base]:     # views of the old one
                del self.mem[tid]
            arr = self._array(a.tensor.tid)
        store(arr, a, value if exact else ops.round_to(value, a.tensor.dtype), mask)

    # -- the stream -------------------------------------------------------------------------------
    def run(self, instrs: list, deadline: float | None = None) -> list[Step]:
        """Decode and check every instruction, then compute all of them (unless compute=False)."""
        steps = self.decode(instrs, deadline)
        if self.compute:
            self.execute(None, deadline)
        return steps

    def decode(self, instrs: list, deadline: float | None = None) -> list[Step]:
        """Check every instruction and record its Step, computing nothing: each runs dry (on zero input
        sets), so every check an instruction makes on its operands is made, and no value exists yet.
        execute() then computes the instructions a check needs."""
        steps, self.decoded = [], []
        sets, self.sets = self.sets, 0
        clock = Clock(deadline, f"replaying the kernel's {len(instrs):,} instructions")
        try:
            for n, instr in enumerate(instrs):
                clock.tick(n)
                step, call = self.step(instr)
                steps.append(step)
                self.decoded.append(call)
        finally:
            self.sets = sets
        self.steps = steps
        return steps

    def execute(self, needed, deadline: float | None = None) -> None:
        """Compute the decoded instructions in order: all of them, or those whose flag in `needed` is set
        (the others' results are never read by what is checked; see slicing.py)."""
        clock = Clock(deadline, f"computing the kernel's {len(self.decoded):,} instructions")
        for n, (run, reads, writes, attrs, mask, what) in enumerate(self.decoded):
            if needed is None or needed[n]:
                clock.tick(n)
                run(self, _fresh(self.steps[n]), reads, writes, attrs, mask, what)
            for tid in self.free_after.get(n, ()):
                self.mem.pop(tid, None)

    def step(self, instr) -> tuple[Step, tuple]:
        if not (isinstance(instr, list) and len(instr) == 6 and isinstance(instr[0], str)
                and instr[1] in ENGINES and isinstance(instr[2], list) and isinstance(instr[3], list)
                and isinstance(instr[4], dict) and isinstance(instr[5], int)):
            raise StreamError("malformed instruction in the stream")
        op, engine, dsts, srcs, attrs, site = instr
        what = where(op, attrs, site)
        # the class's function, not a method bound to this replayer: the decoded stream then holds no reference
        # back to it, and everything an evaluation built is freed by reference counting (no cycles to collect)
        run = getattr(type(self), "_" + op, None)
        if run is None or not dsts:
            raise StreamError(f"unknown instruction {op!r}")
        # A reduction's mask ranges over its input (it selects the elements reduced); any other
        # instruction's over its destination tile.
        over_input = op in ("reduce", "bn_stats")
        mask = None
        if attrs.get("mask") is not None:
            space = srcs[0] if over_input and srcs else dsts[0]
            if not (isinstance(space, list) and len(space) == 2 and isinstance(space[1], list)):
                raise StreamError(f"malformed operand in {what}")
            mask = mask_array(attrs["mask"], tile_shape(space[1], what), what)
        resolve = self.resolve.keyed
        first, key = resolve(dsts[0], what, None if over_input else mask)
        writes, keys = [first], [key]
        for d in dsts[1:]:
            a, key = resolve(d, what)
            writes.append(a)
            keys.append(key)
        reads = []
        for i, s in enumerate(srcs):
            a, key = resolve(s, what, mask if self._same_space(op) or (over_input and i == 0) else None) \
                if isinstance(s, list) else (s, ("=", repr(s)))
            reads.append(a)
            keys.append(key)
        form = form_of(op, engine, attrs, reads, writes, keys) if mask is None else None
        step = self.known.step(form, site, reads, writes)     # an instruction of a form already checked
        if step is not None:
            return step, (run, reads, writes, attrs, mask, what)
        self._check_memories(op, engine, what, reads, writes)
        capabilities.check(op, engine, attrs, reads, writes, what)
        step = Step(op, engine, site, attrs.get("fn", attrs.get("op", op)) if op != "dma" else "dma",
                    [r for r in reads if isinstance(r, Access)], writes, partitions=first.partitions,
                    free=first.free)
        step.psum_read = any(r.tensor.buffer == "psum" for r in step.reads)
        if op == "memset":            # the cost model elides zero-fills that a matmul group overwrites
            step.extra["fill"] = attrs.get("value")
        elif op == "matmul":
            step.extra["acc"] = bool(attrs.get("acc"))
        if "engines" in attrs:        # the compiler places it (costmodel.EngineTiming.place)
            step.extra["engines"] = self._placements(op, engine, attrs, reads, writes, what)
        run(self, step, reads, writes, attrs, mask, what)
        self.known.add(form, step, reads, writes)
        return step, (run, reads, writes, attrs, mask, what)

    @staticmethod
    def _same_space(op: str) -> bool:
        """Sources indexed over the destination's tile (masks apply to them too)."""
        return op in ("dma", "ew", "tensor_scalar", "activation", "select")

    def _placements(self, op, engine, attrs, reads, writes, what) -> tuple[str, ...]:
        """The engines an instruction the compiler places may run on: the recorded one first, then those of the
        stream's `engines` on which the instruction passes every check the recorded engine passed (a copy the
        kernel could have placed there itself); empty when there is no other."""
        named = attrs["engines"]
        if not (isinstance(named, list) and len(named) <= len(ENGINES) and engine in named
                and all(e in ENGINES for e in named)):
            raise StreamError(f"malformed engine choice in {what}")
        out = [engine]
        for e in named:
            if e in out or e in ("dma", "pe"):
                continue
            try:
                self._check_memories(op, e, what, reads, writes)
                capabilities.check(op, e, attrs, reads, writes, what)
            except StreamError:
                continue
            out.append(e)
        return tuple(out) if len(out) > 1 else ()

    def _check_memories(self, op, engine, what, reads, writes) -> None:
        for a in [r for r in reads if isinstance(r, Access)] + writes:
            b = a.tensor.buffer
            if engine != "dma" and b == "hbm":
                raise StreamError(f"{what} accesses an HBM tensor: compute engines read and write SBUF/PSUM "
                                  f"only (load it into SBUF with nl.load)")
            if engine == "dma" and b == "psum":
                raise StreamError(f"{what}: DMA cannot access PSUM; copy the PSUM tile to SBUF first (nl.copy)")
            if engine == "pool" and b == "psum":
                raise StreamError(f"{what}: the GpSimd engine cannot access PSUM; copy to SBUF first")
            if b in ("sbuf", "psum") and a.partitions > PARTITIONS:
                raise StreamError(f"{what}: a tile of shape {a.shape} spans {a.partitions} partitions; the "
                                  f"partition dimension (the first) is at most {PARTITIONS}")

    # -- instructions -----------------------------------------------------------------------------
    def _dma(self, step, reads, writes, attrs, mask, what):
        (src,), (dst,) = reads, writes
        v = self.read(src)
        if attrs.get("transpose"):
            if len(src.shape) != 2:
                raise StreamError(f"{what}: a transposing load takes a 2-D source")
            v = _transposed(v)
        if ops.core_shape(v.shape[1:]) == ops.core_shape(dst.shape) or (
                len(v.shape) > 2 and len(dst.shape) > 1 and v.shape[1] == dst.shape[0]
                and math.prod(v.shape[2:]) == math.prod(dst.shape[1:])):
            # (P, 1) into (P,) and the like; and a DMA moves each partition's elements in row-major order
            # ('the total number of data elements in src must match that of dst'): (P, A, B) into (P, A * B)
            v = v.reshape((self.sets, *dst.shape))
        self._fits(v.shape[1:], dst.shape, what)
        if "rmw" in attrs:          # nisa.dma_copy(dst_rmw_op=np.add): the DMA adds into what dst holds
            if attrs["rmw"] != "add":
                raise StreamError(f"{what}: a DMA read-modify-write supports add only, not {attrs['rmw']!r}")
            v, step.reads = self.read(dst) + v, step.reads + [dst]
        # a copy between tensors of one dtype moves representable values: no rounding pass
        self.write(dst, v, mask, exact="rmw" not in attrs and src.tensor.dtype == dst.tensor.dtype)
        self._dma_fields(step, src, dst, attrs)

    @staticmethod
    def _dma_fields(step, src, dst, attrs) -> None:
        hbm = src if src.tensor.buffer == "hbm" else dst
        step.dma_bytes = max(src.nbytes, dst.nbytes)
        step.run_bytes = hbm.tensor.itemsize if attrs.get("transpose") else min(src.run_bytes, dst.run_bytes)

    def _matmul(self, step, reads, writes, attrs, mask, what):
        (s, m), (dst,) = reads, writes
        if s.tensor.buffer != "sbuf" or m.tensor.buffer != "sbuf" or dst.tensor.buffer != "psum":
            raise StreamError(f"{what}: matmul operands must be in SBUF and its result in PSUM")
        perf = attrs.get("perf")
        fp8.matmul_dtypes(s.tensor.dtype, m.tensor.dtype, perf, what)
        rows = 2 if perf == fp8.DOUBLE_ROW else 1      # contraction rows per partition (FP8 double_row: 2)
        if rows == 2:
            fp8.double_row_operands(s, m, what)
        elif len(s.shape) != 2 or len(m.shape) < 2 or s.shape[0] != m.shape[0]:
            raise StreamError(f"{what}: stationary {s.shape} (2-D) and moving {m.shape} must share the "
                              f"contraction (partition) size")
        # the Tensor engine contracts over the partitions: re-checked here from the recorded accesses, so a
        # stream that skipped the front end's checks gains nothing
        for role, a in (("stationary", s), ("moving", m), ("result", dst)):
            if not a.axis0_is_partition or a.shape[0] > PARTITIONS:
                raise StreamError(f"{what}: the {role} tile's first axis must be its tensor's partition "
                                  f"dimension, of at most {PARTITIONS} (the contraction runs over the partitions); "
                                  f"got a tile of shape {a.shape}")
        # a moving tile may have several free axes (conv windows): they are one free axis of their product
        k, mm, n = s.shape[0], s.shape[-1], math.prod(m.shape[rows:])
        if mm > 128:
            raise StreamError(f"{what}: the stationary tile's free size is {mm}; at most 128 "
                              f"(nl.tile_size.gemm_stationary_fmax)")
        if n > 512:
            raise StreamError(f"{what}: the moving tile's free size is {n}; at most 512 "
                              f"(nl.tile_size.gemm_moving_fmax)")
        if math.prod(dst.shape) != mm * n or dst.shape[0] != mm:
            raise StreamError(f"{what}: the result tile {dst.shape} does not match ({mm}, {n})")
        if n * 4 > PSUM_BANK_BYTES:
            raise StreamError(f"{what}: a PSUM result of {n * 4} bytes per partition exceeds one 2 KiB bank")
        r = np.matmul(self.read(s).reshape(self.sets, k * rows, mm).swapaxes(1, 2),
                      self.read(m).reshape(self.sets, k * rows, n))
        r = r.reshape((self.sets, *dst.shape))
        if attrs.get("acc"):
            r = r + self.read(dst)
        self.write(dst, r, mask)
        self._matmul_fields(step, s, m, rows)
        if rows == 2:
            step.extra["perf"] = fp8.DOUBLE_ROW

    @staticmethod
    def _matmul_fields(step, s, m, rows: int = 1) -> None:
        step.moving, step.stationary, step.partitions = math.prod(m.shape[rows:]), s.shape[-1], s.shape[0]
        step.fp32_matmul = "float32" in (s.tensor.dtype, m.tensor.dtype)

    def _transpose(self, step, reads, writes, attrs, mask, what):
        (x,), (dst,) = reads, writes
        if len(x.shape) != 2:
            raise StreamError(f"{what} takes a 2-D tile")
        for role, a in (("source", x), ("result", dst)):
            if not a.axis0_is_partition or a.shape[0] > PARTITIONS:
                raise StreamError(f"{what}: the {role} tile's first axis must be its tensor's partition "
                                  f"dimension, of at most {PARTITIONS}; got a tile of shape {a.shape}")
        if step.engine == "dve" and max(x.shape) > 32:
            raise StreamError(f"{what}: the Vector engine transposes tiles of at most 32x32, got {x.shape}")
        if step.engine not in ("pe", "dve"):
            raise StreamError(f"{what} runs on the Tensor or Vector engine")
        self._fits(x.shape[::-1], dst.shape, what)
        self.write(dst, _transposed(self.read(x)), mask)
        step.moving, step.stationary = x.shape[0], x.shape[1]
        step.fp32_matmul = x.tensor.dtype == "float32"


def _transposed(v: np.ndarray) -> np.ndarray:
    """The set-stacked 2-D tiles v transposed (a view), with their elements first gathered compactly when v is a
    strided view of a larger tensor: the copy that writes the transposed tile then walks a cache-resident
    block across its rows rather than the tensor (a strided 128 x 128 tile: 0.9 ms a write, compact: 0.03 ms)."""
    if v.size and not v.flags.c_contiguous:
        v = np.ascontiguousarray(v)
    return v.swapaxes(1, 2)


@functools.lru_cache(maxsize=4096)
def _one_to_one(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether an affine access reaches every element at most once (so writing through a strided view
    is the same as writing by index): sorted by stride, each axis steps past everything the shorter
    strides span."""
    span = 0
    for stride, n in sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1):
        if stride <= span:
            return False
        span += stride * (n - 1)
    return True


def strided_view(arr: np.ndarray, a: Access, writeable: bool = False) -> np.ndarray | None:
    """arr[a.index] (arr set-stacked and row-major) as a strided view instead of a gather by index arrays, or
    None when the access has no affine form; a writeable one only where it reaches each element once."""
    if a.strided is None or not arr.flags.c_contiguous or (writeable and not _one_to_one(a.shape, a.strided[1])):
        return None
    first, strides = a.strided
    flat = arr.reshape(arr.shape[0], -1)[:, first:]
    return np.lib.stride_tricks.as_strided(flat, (arr.shape[0], *a.shape),
                                           (arr.strides[0], *(s * arr.itemsize for s in strides)),
                                           writeable=writeable)


def store(arr: np.ndarray, a: Access, value, mask: np.ndarray | None) -> None:
    """arr[a] = value (set-stacked), only where the mask (over a's tile) is set."""
    view = strided_view(arr, a, writeable=True) if mask is None else None
    if view is not None:
        # an affine access written through a strided view: no index arrays to scatter by (a store of a
        # [128, 2, 2048] tile into a 5-D output by four index arrays took 40 ms, through the view 3 ms)
        view[...] = value if np.ndim(value) == 0 else np.reshape(value, view.shape)
        return
    if mask is None:
        arr[a.index] = value if np.ndim(value) == 0 else np.reshape(value, arr[a.index].shape)
        return
    if not any(isinstance(x, np.ndarray) for x in a.index[1:]):     # basic slicing: a view to write through
        sub = arr[a.index]
        keep = mask.reshape(sub.shape[1:])
        sub[:, keep] = np.broadcast_to(value, (sub.shape[0], *a.shape)).reshape(sub.shape)[:, keep]
        return
    idx = tuple(x[mask] if isinstance(x, np.ndarray) else x for x in a.index[1:])
    idx = tuple(np.broadcast_to(x, (int(mask.sum()),)) if not isinstance(x, np.ndarray) else x for x in idx)
    arr[(slice(None), *idx)] = np.broadcast_to(value, (arr.shape[0], *a.shape))[:, mask]
