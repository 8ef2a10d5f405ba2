"""Decode and validate a recorded NKI instruction stream (trusted side).

Everything in the stream came from the candidate's process, so nothing is assumed: tensor
declarations, index expressions and operands are checked here against NeuronCore-v2's rules and
limits, and every failure names the NKI call and the kernel line that issued it. Accesses are
resolved into numpy indexing (basic slices where the pattern allows, index arrays otherwise) over
value arrays that carry a leading axis of input sets.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.ops import ITEMSIZE

PARTITIONS = 128
PSUM_BANK_BYTES = 2048
SBUF_PARTITION_BYTES = 192 * 1024
MAX_RANK = 8
MAX_TILE_ELEMENTS = 1 << 28      # one access: a whole tensor of the largest a problem may hold
OP_NAMES = {"dma": "nl.load/nl.store (DMA)", "matmul": "nisa.nc_matmul / nl.matmul", "transpose": "nisa.nc_transpose",
            "ew": "an elementwise instruction", "tensor_scalar": "nisa.tensor_scalar", "reduce": "a reduction",
            "activation": "nisa.activation", "scan": "nisa.tensor_tensor_scan", "select": "nisa.affine_select",
            "iota": "nisa.iota", "memset": "nl.zeros/nisa.memset", "bn_stats": "nisa.bn_stats",
            "bn_aggr": "nisa.bn_aggr", "gather": "nisa.nc_n_gather"}


# the NKI functions behind each replayed instruction (nc_matmul, matmul; load, store; ...): an ISA profile's
# `forbid` names functions, and an instruction is forbidden when one of its functions (or its own name) is
API_NAMES = {op: frozenset(re.findall(r"\b(?:nisa|nl)\.(\w+)", text)) | {op} for op, text in OP_NAMES.items()}


class StreamError(Exception):
    """The kernel broke a rule of the NKI programming model or a hardware limit."""


def where(op: str, attrs: dict, site) -> str:
    name = OP_NAMES.get(op, repr(op))
    fn = attrs.get("fn") if isinstance(attrs, dict) else None
    if isinstance(fn, str) and op == "ew":
        name = f"nl.{fn}" if fn != "copy" else "a copy (nl.copy / tile assignment)"
    return f"{name} at kernel.py line {site}" if isinstance(site, int) and site > 0 else name


@dataclass
class TensorDecl:
    tid: int
    buffer: str           # hbm | sbuf | psum | dead
    shape: tuple[int, ...]
    dtype: str
    pdim: int
    site: int
    alias: int = -1       # an HBM tensor that reshapes another (tensor.reshape): the tid of its storage

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def partition_bytes(self) -> int:
        """Bytes per partition of an on-chip tensor."""
        return self.size // self.shape[self.pdim] * self.itemsize

    @functools.cached_property
    def region_strides(self) -> tuple[int, ...]:
        """Element strides of the bytes an access touches (Access.region): row-major over the whole tensor in
        HBM; on chip within one partition of one block (the partition and block dimensions count 0)."""
        strides, s = [0] * len(self.shape), 1
        for d in range(len(self.shape) - 1, -1, -1):
            if self.buffer != "hbm" and d <= self.pdim:
                continue
            strides[d], s = s, s * self.shape[d]
        return tuple(strides)

    @property
    def block_bytes(self) -> int:
        """Bytes per partition of one block of an on-chip tensor (the dimensions after the partition one)."""
        return math.prod(self.shape[self.pdim + 1:]) * self.itemsize


def decode_tensors(raw, hbm_budget_bytes: int, max_tensors: int = 1_000_000,
                   sbuf_partition_bytes: int = SBUF_PARTITION_BYTES) -> list[TensorDecl]:
    """sbuf_partition_bytes: the simulated NeuronCore's SBUF per partition (NeuronCore-v2's by default; the
    platform's params say it: 224 KiB on NeuronCore-v3, 256 KiB on v4)."""
    if not isinstance(raw, list):
        raise StreamError("malformed instruction stream: no tensor table")
    if len(raw) > max_tensors:
        raise StreamError(f"the kernel declared {len(raw):,} tensors and tiles; at most {max_tensors:,} are "
                          f"allowed (max_tiles)")
    out, hbm = [], 0
    tiles: dict[tuple, TensorDecl] = {}   # on-chip declarations already checked (tiles repeat per loop step)
    for tid, t in enumerate(raw):
        if type(t) is list and len(t) == 6 and t[0] in ("sbuf", "psum") and type(t[1]) is list:
            key = (t[0], tuple(t[1]), t[2], t[3], t[4], t[5])
            d = tiles.get(key)
            if d is not None:       # equal to a checked one: its checked (canonical) values
                out.append(TensorDecl(tid, d.buffer, d.shape, d.dtype, d.pdim, d.site, d.alias))
                continue
        else:
            key = None
        if not (isinstance(t, list) and len(t) == 6 and t[0] in ("hbm", "sbuf", "psum", "dead")
                and isinstance(t[1], list) and t[2] in ITEMSIZE and all(isinstance(v, int) for v in t[3:])):
            raise StreamError(f"malformed tensor declaration #{tid}")
        shape = tuple(t[1])
        if not shape or len(shape) > MAX_RANK or not all(isinstance(s, int) and 0 < s < 1 << 31 for s in shape):
            raise StreamError(f"tensor #{tid} has an invalid shape {shape}")
        decl = TensorDecl(tid, t[0], shape, t[2], t[3], t[4], t[5])
        if not 0 <= decl.pdim < len(shape):
            raise StreamError(f"tensor #{tid} has an invalid partition dimension")
        if decl.alias != -1:
            base = out[decl.alias] if 0 <= decl.alias < tid else None
            if base is None or base.buffer != "hbm" or decl.buffer != "hbm" or base.alias != -1 \
                    or base.size != decl.size or base.dtype != decl.dtype:
                raise StreamError(f"tensor #{tid}: invalid reshape of tensor #{decl.alias}")
            out.append(decl)
            continue
        if decl.buffer in ("sbuf", "psum"):
            if shape[decl.pdim] > PARTITIONS:
                raise StreamError(f"an {decl.buffer.upper()} tensor of shape {shape} (kernel.py line {decl.site}) has "
                                  f"{shape[decl.pdim]} partitions; the partition dimension is at most {PARTITIONS}")
            tile_bytes = math.prod(shape[decl.pdim + 1:]) * decl.itemsize
            if decl.buffer == "psum" and tile_bytes > PSUM_BANK_BYTES:
                raise StreamError(f"a PSUM tile of shape {shape} (kernel.py line {decl.site}) holds {tile_bytes} bytes "
                                  f"per partition; a PSUM tile fits one 2 KiB bank (512 fp32 values)")
            if decl.block_bytes > sbuf_partition_bytes:
                raise StreamError(f"an {decl.buffer.upper()} tile of shape {shape} (kernel.py line {decl.site}) "
                                  f"needs {decl.block_bytes:,} bytes per partition; SBUF has "
                                  f"{sbuf_partition_bytes:,}")
            if key is not None and decl.alias == -1:
                tiles[key] = decl
        elif decl.buffer == "hbm":
            hbm += decl.size * decl.itemsize
            if hbm > hbm_budget_bytes:
                raise StreamError(f"the kernel allocated more than {hbm_budget_bytes >> 20} MiB of HBM "
                                  f"(kernel.py line {decl.site})")
        out.append(decl)
    return out


def _terms(e, what: str):
    if not (isinstance(e, list) and len(e) == 2 and isinstance(e[0], int) and isinstance(e[1], list)):
        raise StreamError(f"malformed index expression in {what}")
    for t in e[1]:
        if not (isinstance(t, list) and len(t) == 4 and all(isinstance(v, int) for v in t)
                and 0 < t[0] <= 1 << 24 and 0 < t[1] <= MAX_RANK and 0 <= t[2] < t[1] and abs(t[3]) < 1 << 31):
            raise StreamError(f"malformed index term in {what}")
    return e[0], e[1]


def expr_array(expr, rank: int, what: str, fit: tuple[int, ...] | None = None) -> np.ndarray:
    """The values of an index expression as an int64 array of `rank` dims (broadcastable); with `fit`,
    every axis must match that shape (checked before anything is built)."""
    const, terms = _terms(expr, what)
    out = np.int64(const)
    for extent, r, pos, coef in terms:
        if r > rank:
            raise StreamError(f"an index expression in {what} has more dimensions than the tile")
        if fit is not None and extent not in (1, fit[pos + rank - r]):
            raise StreamError(f"an index expression in the mask of {what} does not match the tile shape {fit}")
        shape = [1] * rank
        shape[pos + rank - r] = extent
        out = out + coef * np.arange(extent, dtype=np.int64).reshape(shape)
    return np.asarray(out)


def tile_shape(idx: list, what: str) -> tuple[int, ...]:
    terms = [t for e in idx if not isinstance(e, int) for t in _terms(e, what)[1]]
    rank = max((t[1] for t in terms), default=0)
    shape = [1] * rank
    for extent, r, pos, _ in terms:
        p = pos + rank - r
        if shape[p] not in (1, extent) and extent != 1:
            raise StreamError(f"index expressions of {what} do not broadcast (extents {shape[p]} and {extent})")
        shape[p] = max(shape[p], extent)
    return tuple(shape) or (1,)


@dataclass(slots=True)
class Access:
    tensor: TensorDecl
    shape: tuple[int, ...]
    index: tuple            # numpy index into the set-stacked array (leading slice for the set axis)
    lo: tuple[int, ...]     # bounding box per tensor dimension (inclusive)
    hi: tuple[int, ...]
    run_bytes: int          # contiguous bytes per row of this access (DMA efficiency)
    axis0_is_partition: bool = True   # on chip: the tile's first axis walks the tensor's partitions, and only it
    dense: bool = False     # it touches every element of its bounding box lo..hi (unit-step slices, no mask)
    # an unmasked access that index arrays express (overlapping windows, diagonals): its elements as a strided
    # view of the row-major tensor, (first element, element stride per tile axis); None otherwise
    strided: tuple | None = None
    lanes: tuple = (-1, True, frozenset())   # on chip, how the tile meets partitions: see _lanes

    @property
    def partitions(self) -> int:
        """Partitions the access spans: on chip, its extent along the tensor's partition dimension (a
        tile with a leading block dimension, (2, par_dim(128), 512), still spans 128)."""
        if self.tensor.buffer in ("sbuf", "psum"):
            return self.hi[self.tensor.pdim] - self.lo[self.tensor.pdim] + 1
        return self.shape[0]

    @property
    def free(self) -> int:
        """Elements per partition."""
        return max(1, math.prod(self.shape) // max(1, self.partitions))

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.tensor.itemsize

    def region(self) -> tuple[int, int, int, int]:
        """(first partition, last partition, first byte, last byte) of the bytes this access touches; on
        chip, within one block (blocks are allocated apart)."""
        t = self.tensor
        strides = t.region_strides
        f_lo = sum(map(int.__mul__, self.lo, strides)) * t.itemsize
        f_hi = (sum(map(int.__mul__, self.hi, strides)) + 1) * t.itemsize - 1
        if t.buffer == "hbm":
            return 0, 0, f_lo, f_hi
        return self.lo[t.pdim], self.hi[t.pdim], f_lo, f_hi


def resolve(enc, tensors: list[TensorDecl], what: str, mask: np.ndarray | None = None) -> Access:
    """Check an encoded access against its tensor and turn it into numpy indexing."""
    if not (isinstance(enc, list) and len(enc) == 2 and isinstance(enc[0], int) and isinstance(enc[1], list)):
        raise StreamError(f"malformed operand in {what}")
    tid, idx = enc
    if not 0 <= tid < len(tensors):
        raise StreamError(f"{what} names an unknown tensor")
    t = tensors[tid]
    if t.buffer == "dead":
        raise StreamError(f"{what} uses a tile whose producing instruction was redirected elsewhere")
    if len(idx) != len(t.shape):
        raise StreamError(f"{what}: {len(idx)} indices for a tensor of shape {t.shape}")
    shape = tile_shape(idx, what)
    if mask is not None and mask.shape != shape:
        mask = None          # a source shaped unlike the masked destination (broadcast operand)
    if math.prod(shape) > MAX_TILE_ELEMENTS:
        raise StreamError(f"{what}: a tile of {math.prod(shape):,} elements is too large")
    rank = len(shape) if any(not isinstance(e, int) for e in idx) else 0
    lo, hi, fast, slices, axes_seen = [], [], mask is None, [], []
    for d, e in enumerate(idx):
        if isinstance(e, int):
            lo.append(e)
            hi.append(e)
            slices.append(e)
            continue
        const, terms = _terms(e, what)
        lo.append(const + sum(min(0, c * (n - 1)) for n, _, _, c in terms))
        hi.append(const + sum(max(0, c * (n - 1)) for n, _, _, c in terms))
        if len(terms) == 1 and terms[0][3] > 0:
            n, r, pos, c = terms[0]
            axes_seen.append(pos + rank - r)
            slices.append(slice(const, const + c * (n - 1) + 1, c))
        else:
            fast = False
    fast = fast and axes_seen == sorted(set(axes_seen)) and len(axes_seen) == rank \
        and all(shape[p] == (s.stop - s.start + s.step - 1) // s.step
                for p, s in zip(axes_seen, [s for s in slices if isinstance(s, slice)]))
    if mask is None and any(lo[d] < 0 or hi[d] >= t.shape[d] for d in range(len(idx))):
        d = next(d for d in range(len(idx)) if lo[d] < 0 or hi[d] >= t.shape[d])
        raise StreamError(f"{what} accesses indices {lo[d]}..{hi[d]} of dimension {d} of a tensor of shape "
                          f"{t.shape}: out of bounds")
    if fast:
        index = (slice(None), *slices)
    else:
        # kept compact (broadcast views of per-axis ranges): a decoded stream holds every access's index
        compact = [np.int64(e) if isinstance(e, int) else expr_array(e, max(rank, 1), what) for e in idx]
        if mask is not None:
            for d, c in enumerate(compact):
                a = np.broadcast_to(c, shape)
                bad = mask & ((a < 0) | (a >= t.shape[d]))
                if bad.any():
                    raise StreamError(f"{what} accesses index {int(a[bad][0])} of dimension {d} of a tensor of "
                                      f"shape {t.shape} (inside the mask): out of bounds")
            compact = [np.clip(c, 0, t.shape[d] - 1) for d, c in enumerate(compact)]
        index = (slice(None), *[np.broadcast_to(c, shape) for c in compact])
    dense = fast and all(s.step == 1 for s in slices if isinstance(s, slice))
    strided = None if fast or mask is not None else _strided(t, idx, shape)
    return Access(t, shape, index, tuple(lo), tuple(hi), _run_bytes(t, idx, rank, shape),
                  _axis0_is_partition(t, idx, rank), dense, strided, _lanes(t, idx, rank, shape))


def _strided(t: TensorDecl, idx: list, shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(first element, element stride per tile axis) of an affine access over the row-major tensor: every
    index is const + sum(coef * axis), so each tile axis steps by a fixed number of elements."""
    dim_stride = _row_major(t.shape)
    first, strides = 0, [0] * len(shape)
    for d, e in enumerate(idx):
        if isinstance(e, int):
            first += e * dim_stride[d]
            continue
        first += e[0] * dim_stride[d]
        for extent, r, pos, coef in e[1]:
            if extent > 1:
                strides[pos + len(shape) - r] += coef * dim_stride[d]
    return first, tuple(strides)


@functools.lru_cache(maxsize=1024)
def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a row-major array of this shape."""
    out, n = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        out[d], n = n, n * shape[d]
    return tuple(out)


def _run_bytes(t: TensorDecl, idx: list, rank: int, shape: tuple[int, ...]) -> int:
    """Contiguous bytes per row of an access, from its actual strides: the tile is moved in row-major tile
    order, so a row is the innermost tile axes whose elements sit next to each other in the tensor (unit
    stride for the innermost, then each outer axis stepping exactly over what is inside it). A transposed
    view (tile axes fed by tensor dims in another order) is one element per row, whatever its extents. On
    chip a row never spans partitions (each partition is its own memory)."""
    on_chip = t.buffer in ("sbuf", "psum")
    elem_stride, s = [0] * len(t.shape), 1
    for d in range(len(t.shape) - 1, -1, -1):
        if on_chip and d == t.pdim:
            continue
        elem_stride[d], s = s, s * t.shape[d]
    stride = [0] * len(shape)
    across_partitions = [False] * len(shape)
    for d, e in enumerate(idx):
        if isinstance(e, int):
            continue
        for extent, r, pos, coef in e[1]:
            p = pos + len(shape) - r
            if on_chip and d == t.pdim:
                across_partitions[p] = True
            stride[p] += coef * elem_stride[d]
    run = 1
    for p in range(len(shape) - 1, -1, -1):
        if shape[p] == 1:
            continue
        if across_partitions[p] or stride[p] != run:
            break
        run *= shape[p]
    return run * t.itemsize


def _axis0_is_partition(t: TensorDecl, idx: list, rank: int) -> bool:
    """Whether an on-chip access's first tile axis is fed by the partition dimension alone. An engine reads
    the partition axis in parallel, so instructions that give that axis a meaning (a matmul contracts over
    it, a transpose swaps it) are only valid on such tiles, whatever the recorded shape claims."""
    if t.buffer not in ("sbuf", "psum"):
        return True
    if rank == 0:
        return False
    for d, e in enumerate(idx):
        if isinstance(e, int):
            continue
        for extent, r, pos, _ in e[1]:
            axis0 = pos + rank - r == 0
            if (d == t.pdim) != axis0 and extent > 1:
                return False
    return not isinstance(idx[t.pdim], int)


def _lanes(t: TensorDecl, idx: list, rank: int, shape: tuple[int, ...]) -> tuple[int, bool, frozenset]:
    """How an on-chip access's tile meets partitions (capabilities.py): (the tile axis that walks the
    tensor's partition dimension, -1 when the access touches one partition, -2 when several axes do; whether
    that axis moves nothing else; every tile axis that moves some index). Axes of extent 1 and zero
    coefficients move nothing. An HBM access has no lanes: (-1, True, frozenset())."""
    if t.buffer not in ("sbuf", "psum"):
        return -1, True, frozenset()
    feeds: dict[int, set[int]] = {}            # tile axis -> tensor dims it moves
    for d, e in enumerate(idx):
        if isinstance(e, int):
            continue
        for extent, r, pos, coef in e[1]:
            if extent > 1 and coef != 0:
                feeds.setdefault(pos + rank - r, set()).add(d)
    lane = [p for p, dims in feeds.items() if t.pdim in dims]
    axis = lane[0] if len(lane) == 1 else (-1 if not lane else -2)
    return axis, axis < 0 or feeds[axis] == {t.pdim}, frozenset(feeds)


def mask_array(clauses, shape: tuple[int, ...], what: str) -> np.ndarray:
    if not isinstance(clauses, list) or not clauses:
        raise StreamError(f"malformed mask in {what}")
    ok = np.ones(shape, dtype=bool)
    for c in clauses:
        if not (isinstance(c, list) and len(c) == 3 and c[1] in ("<", "<=", ">", ">=", "==", "!=")
                and isinstance(c[2], int)):
            raise StreamError(f"malformed mask clause in {what}")
        v = expr_array(c[0], len(shape), what, fit=shape)
        try:
            test = {"<": v < c[2], "<=": v <= c[2], ">": v > c[2], ">=": v >= c[2], "==": v == c[2],
                    "!=": v != c[2]}[c[1]]
            ok = ok & np.broadcast_to(test, shape)
        except ValueError:
            raise StreamError(f"the mask of {what} does not match the tile shape {shape}") from None
    return ok
