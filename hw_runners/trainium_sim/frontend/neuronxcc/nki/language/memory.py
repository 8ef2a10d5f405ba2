"""nl.* data movement, allocation and loops of trainium-sim's NKI front end.

Loads and stores are DMA transfers; nl.matmul and nl.transpose run on the Tensor engine.
"""
from __future__ import annotations

from neuronxcc.nki._index import NKIError, _broadcast, _int
from neuronxcc.nki._affine import AffineRange
from neuronxcc.nki._trace import RECORDER, View, _core, dtype_name
from neuronxcc.nki.language._base import _attrs, _compute, _ew, _new, _view
from neuronxcc.nki.language.constants import psum, sbuf  # noqa: F401


def ds(start, size) -> slice:
    start, size = _int(start), _int(size)
    return slice(start, start + size)


def affine_range(*args, **_):
    """Independent iterations (the compiler may overlap or vectorize them); traced by unrolling, each
    iteration's start recorded (AffineRange)."""
    return AffineRange(range(*(_int(a) for a in args)))


def sequential_range(*args, **_):
    """Iterations in order (a loop-carried dependence): traced by unrolling, nothing overlapped."""
    return range(*(_int(a) for a in args))


static_range = sequential_range      # fully unrolled by the compiler: instructions in program order


def program_id(axis=0) -> int:
    """This instance's index along `axis` of the SPMD launch grid (kernel[g0, g1](...)); 0 without a grid."""
    axis = _int(axis)
    ids = RECORDER.program
    if ids and not 0 <= axis < len(ids):
        raise NKIError(f"nl.program_id({axis}): the launch grid has {len(ids)} dimension(s)")
    return ids[axis] if ids else 0


def num_programs(axes=None) -> int:
    """Instances along `axes` of the launch grid (all of them when None); 1 without a grid."""
    grid = RECORDER.grid
    if axes is None:
        n = 1
        for g in grid:
            n *= g
        return n
    picked = (axes,) if isinstance(axes, int) else tuple(axes)
    n = 1
    for a in picked:
        if not 0 <= _int(a) < max(len(grid), 1):
            raise NKIError(f"nl.num_programs({axes}): the launch grid has {len(grid)} dimension(s)")
        n *= grid[a] if grid else 1
    return n


def program_ndim() -> int:
    return len(RECORDER.grid)


def nc(n) -> int:
    """nl.nc(n): a launch-grid dimension spread over NeuronCores; trainium-sim runs every instance on its one
    NeuronCore, one after another, as a trn1 core runs a grid."""
    return _int(n)


def device_print(*_args, **_kwargs) -> None:
    """Printing device values is not possible in a trace; ignored."""


# -- allocation -----------------------------------------------------------------------------------
def ndarray(shape, dtype, buffer=sbuf, name: str = "", **_) -> Tensor:
    return _new(shape, dtype, buffer)


def _filled(shape, dtype, buffer, value: float) -> Tensor:
    t = _new(shape, dtype, buffer)
    if t.buffer == "hbm":
        raise NKIError("nl.zeros/ones/full allocate on-chip tiles (sbuf or psum); for HBM use nl.ndarray")
    RECORDER.emit("memset", "dve", [t.view()], [], {"value": float(value)})
    return t


def zeros(shape, dtype, buffer=sbuf, name: str = "", **_):
    return _filled(shape, dtype, buffer, 0.0)


def ones(shape, dtype, buffer=sbuf, name: str = "", **_):
    return _filled(shape, dtype, buffer, 1.0)


def full(shape, fill_value, dtype, buffer=sbuf, name: str = "", **_):
    return _filled(shape, dtype, buffer, fill_value)


def zeros_like(a, dtype=None, buffer=sbuf, **_):
    return zeros(a.shape, dtype or a.dtype, buffer)


def ones_like(a, dtype=None, buffer=sbuf, **_):
    return ones(a.shape, dtype or a.dtype, buffer)


def empty_like(a, dtype=None, buffer=sbuf, **_):
    return ndarray(a.shape, dtype or a.dtype, buffer)



# -- data movement --------------------------------------------------------------------------------
def load(src, mask=None, dtype=None, **_) -> View:
    src = _view(src, "nl.load's source")
    if src.buffer != "hbm":
        raise NKIError(f"nl.load reads HBM tensors; this one is in {src.buffer} (use nl.copy between tiles)")
    out = _new(src.shape, dtype_name(dtype) if dtype is not None else src.dtype_name, sbuf)
    result = out.view()
    RECORDER.emit("dma", "dma", [result], [src], _attrs(mask))
    return result


def store(dst, value, mask=None, **_) -> None:
    dst = _view(dst, "nl.store's destination")
    if dst.buffer != "hbm":
        raise NKIError(f"nl.store writes HBM tensors; this one is in {dst.buffer} (assign tiles with t[...] = x)")
    if isinstance(value, (int, float)):
        raise NKIError("nl.store needs a tile value, not a Python number")
    value = _view(value, "nl.store's value")
    if value.buffer == "hbm":
        raise NKIError("nl.store's value must be an SBUF tile, not an HBM tensor")
    if _core(value.shape) != _core(dst.shape) and _broadcast(value.shape, dst.shape) != dst.shape:
        raise NKIError(f"nl.store: value shape {value.shape} does not match destination shape {dst.shape}")
    if value.buffer == "psum":
        # DMA cannot read PSUM: as NKI documents, an extra copy moves the tile to SBUF first (Scalar engine)
        value = _compute("ew", "act", [value], {"fn": "copy"}, value.dtype_name, sbuf, shape=value.shape)
    RECORDER.emit("dma", "dma", [dst], [value], _attrs(mask))


def load_transpose2d(src, mask=None, dtype=None, **_) -> View:
    src = _view(src, "nl.load_transpose2d's source")
    if src.buffer != "hbm" or len(src.shape) != 2:
        raise NKIError("nl.load_transpose2d loads a 2-D view of an HBM tensor")
    out = _new(src.shape[::-1], dtype_name(dtype) if dtype is not None else src.dtype_name, sbuf)
    result = out.view()
    RECORDER.emit("dma", "dma", [result], [src], _attrs(mask, transpose=True))
    return result


def copy(x, dtype=None, mask=None, **_) -> View:
    """The compiler picks the engine by workload (nisa.tensor_copy's default; Scalar when all are free)."""
    x = _view(x, "nl.copy's source")
    return _compute("ew", "act", [x], _attrs(mask, fn="copy", engines=["act", "dve", "pool"]), dtype)


def broadcast_to(x, shape, **_) -> View:
    x = _view(x, "nl.broadcast_to's source")
    shape = tuple(_int(s) for s in shape)
    if _broadcast(x.shape, shape) != shape:
        raise NKIError(f"nl.broadcast_to: shape {x.shape} does not broadcast to {shape}")
    return _compute("ew", "dve", [x], {"fn": "copy"}, shape=shape)


def expand_dims(data, axis) -> View:
    """The tile with a new axis of size 1 after its last one (what NKI supports): a view, no copy."""
    x = _view(data, "nl.expand_dims's data")
    rank = len(x.shape)
    if _int(axis) not in (rank, -1):
        raise NKIError(f"nl.expand_dims: only a new last axis is supported (axis={rank} or -1), got {axis}")
    idx = [e if isinstance(e, int) else [e[0], [[n, rank + 1, p + rank - r, c] for n, r, p, c in e[1]]]
           for e in x.idx]
    if all(isinstance(e, int) for e in idx):
        raise NKIError("nl.expand_dims takes a tile, not a single element")
    return View(x.tensor, idx, (*x.shape, 1))


def transpose(x, dtype=None, mask=None, **_) -> View:
    x = _view(x, "nl.transpose's source")
    if len(x.shape) != 2:
        raise NKIError("nl.transpose takes a 2-D tile")
    return _compute("transpose", "pe", [x], _attrs(mask), dtype, shape=x.shape[::-1])


def matmul(x, y, transpose_x: bool = False, mask=None, **_) -> View:
    """x @ y into PSUM (fp32). With transpose_x=False the Tensor engine first transposes x (as NKI does)."""
    from neuronxcc.nki import isa
    x, y = _view(x, "nl.matmul's x"), _view(y, "nl.matmul's y")
    if not transpose_x:
        opmask = x.opmask
        x = View(x.tensor, x.idx, x.shape)
        t = transpose(x)
        x = copy(t, dtype=x.dtype_name)
        if opmask is not None:     # x[M, K]'s operand mask, over the transposed tile [K, M]
            x.opmask = opmask if opmask is False else isa.remap_mask(opmask, 2, {0: 1, 1: 0}, 2, "nl.matmul")
    return isa.nc_matmul(x, y, mask=mask)

