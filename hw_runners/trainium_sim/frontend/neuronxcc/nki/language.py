"""neuronxcc.nki.language as trainium-sim provides it: the nl.* calls lowered to recorded instructions.

Engines follow NeuronCore-v2: loads and stores are DMA transfers, transcendental functions run on the
Scalar (activation) engine, arithmetic, comparisons and reductions on the Vector engine, matmul and
transpose on the Tensor engine. Which engine a call uses matters only to the cost model.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as _np

from neuronxcc.nki._index import IndexExpr, NKIError, Predicate, _broadcast, _int, arange, mgrid, tile_broadcast
from neuronxcc.nki._trace import RECORDER, DTYPES, Tensor, View, _core, bfloat16, dtype_name

float32, float16, int32, int8, uint8 = _np.float32, _np.float16, _np.int32, _np.int8, _np.uint8
tfloat32 = _np.float32
bool_ = _np.uint8

# buffers: where a tensor lives
sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"
_HBM = (hbm, shared_hbm, private_hbm)

tile_size = SimpleNamespace(pmax=128, gemm_stationary_fmax=128, gemm_moving_fmax=512, psum_fmax=512,
                            psum_partition_bytes=16384, sbuf_partition_bytes=196608, total_available_sbuf_size=196608,
                            bn_stats_fmax=512)


class par_dim(int):
    """Marks the partition dimension of an on-chip tensor's shape, e.g. (2, nl.par_dim(128), 512)."""


def ds(start, size) -> slice:
    start, size = _int(start), _int(size)
    return slice(start, start + size)


def affine_range(*args, **_):
    """Independent iterations (the compiler may overlap them); traced by unrolling."""
    return range(*(_int(a) for a in args))


sequential_range = static_range = affine_range


def program_id(axis=0) -> int:
    return 0            # one NeuronCore, no SPMD launch grid


def num_programs(axes=None) -> int:
    return 1


def program_ndim() -> int:
    return 0


def device_print(*_args, **_kwargs) -> None:
    """Printing device values is not possible in a trace; ignored."""


# -- allocation -----------------------------------------------------------------------------------
def _new(shape, dtype, buffer) -> Tensor:
    if buffer in _HBM:
        return RECORDER.tensor("hbm", shape, dtype)
    if buffer not in (sbuf, psum):
        raise NKIError(f"unknown buffer {buffer!r}: use nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")
    shape = tuple(shape)
    pdim = next((i for i, s in enumerate(shape) if isinstance(s, par_dim)), 0)
    return RECORDER.tensor(buffer, shape, dtype, pdim)


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


# -- helpers shared with isa.py -------------------------------------------------------------------
def _view(x, what: str) -> View:
    if isinstance(x, Tensor):
        return x.view()
    if isinstance(x, View):
        return x
    if isinstance(x, _LoopReduce):
        raise NKIError(_LoopReduce.MISUSE)
    raise NKIError(f"{what} must be a tensor or a tile, not {type(x).__name__}")


def _attrs(mask, **attrs) -> dict:
    if isinstance(mask, (bool, _np.bool_)):
        # A condition on loop indices, known while tracing: True masks nothing; False makes the
        # instruction a no-op (RECORDER.emit drops it).
        if not mask:
            attrs["mask"] = False
        return attrs
    if mask is not None:
        if not isinstance(mask, Predicate):
            raise NKIError("mask= takes a comparison of nl.arange index expressions, e.g. mask=(i_p < n)")
        attrs["mask"] = mask.clauses
    return attrs


def _result_dtype(dtype, operands) -> str:
    if dtype is not None:
        return dtype_name(dtype)
    names = [o.dtype_name for o in operands if isinstance(o, (View, Tensor))]
    if not names or "float32" in names:
        return "float32"
    return names[0]


def _compute(op: str, engine: str, operands: list, attrs: dict, dtype=None, buffer=sbuf, shape=None) -> View:
    """One instruction writing a fresh tile shaped like its broadcast operands."""
    ops = [o.view() if isinstance(o, Tensor) else o for o in operands]
    for o in ops:
        if isinstance(o, View) and o.buffer == "hbm":
            raise NKIError(f"{attrs.get('fn', op)} reads an HBM tensor: load it into SBUF with nl.load first")
    if shape is None:
        shape = tile_broadcast(*[o.shape for o in ops if isinstance(o, View)])
    out = _new(shape, _result_dtype(dtype, ops), buffer)
    RECORDER.emit(op, engine, [out.view()], ops, attrs)
    return out.view()


def _ew(fn: str, engine: str, *operands, dtype=None, mask=None, **_) -> View:
    for o in operands:
        if not isinstance(o, (View, Tensor, int, float, _np.number)):
            raise NKIError(f"nl.{fn} takes tiles and Python numbers, not {type(o).__name__}")
    if not any(isinstance(o, (View, Tensor)) for o in operands):
        raise NKIError(f"nl.{fn} needs at least one tile operand")
    return _compute("ew", engine, [float(o) if isinstance(o, (int, float, _np.number)) else o for o in operands],
                    _attrs(mask, fn=fn), dtype)


def _copy_into(dst: View, src: View) -> None:
    if _core(src.shape) == _core(dst.shape):
        pass
    elif _broadcast(src.shape, dst.shape) != dst.shape:
        raise NKIError(f"cannot assign a tile of shape {src.shape} to a view of shape {dst.shape}")
    if src.buffer == "hbm" or dst.buffer == "hbm":
        RECORDER.emit("dma", "dma", [dst], [src], {})
    else:
        RECORDER.emit("ew", "dve", [dst], [src], {"fn": "copy"})


def _fill(dst: View, value: float) -> None:
    RECORDER.emit("memset", "dve", [dst], [], {"value": value})


# -- data movement --------------------------------------------------------------------------------
def load(src, mask=None, dtype=None, **_) -> View:
    src = _view(src, "nl.load's source")
    if src.buffer != "hbm":
        raise NKIError(f"nl.load reads HBM tensors; this one is in {src.buffer} (use nl.copy between tiles)")
    out = _new(src.shape, dtype_name(dtype) if dtype is not None else src.dtype_name, sbuf)
    RECORDER.emit("dma", "dma", [out.view()], [src], _attrs(mask))
    return out.view()


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
    RECORDER.emit("dma", "dma", [dst], [value], _attrs(mask))


def load_transpose2d(src, mask=None, dtype=None, **_) -> View:
    src = _view(src, "nl.load_transpose2d's source")
    if src.buffer != "hbm" or len(src.shape) != 2:
        raise NKIError("nl.load_transpose2d loads a 2-D view of an HBM tensor")
    out = _new(src.shape[::-1], dtype_name(dtype) if dtype is not None else src.dtype_name, sbuf)
    RECORDER.emit("dma", "dma", [out.view()], [src], _attrs(mask, transpose=True))
    return out.view()


def copy(x, dtype=None, mask=None, **_) -> View:
    return _ew("copy", "act", x, dtype=dtype, mask=mask)


def broadcast_to(x, shape, **_) -> View:
    x = _view(x, "nl.broadcast_to's source")
    shape = tuple(_int(s) for s in shape)
    if _broadcast(x.shape, shape) != shape:
        raise NKIError(f"nl.broadcast_to: shape {x.shape} does not broadcast to {shape}")
    return _compute("ew", "dve", [x], {"fn": "copy"}, shape=shape)


def transpose(x, dtype=None, mask=None, **_) -> View:
    x = _view(x, "nl.transpose's source")
    if len(x.shape) != 2:
        raise NKIError("nl.transpose takes a 2-D tile")
    return _compute("transpose", "pe", [x], _attrs(mask), dtype, shape=x.shape[::-1])


def matmul(x, y, transpose_x: bool = False, mask=None, **_) -> View:
    """x @ y into PSUM (fp32). With transpose_x=False the Tensor engine first transposes x (as NKI does)."""
    x, y = _view(x, "nl.matmul's x"), _view(y, "nl.matmul's y")
    if not transpose_x:
        t = transpose(x)
        x = copy(t, dtype=x.dtype_name)
    from neuronxcc.nki import isa
    return isa.nc_matmul(x, y, mask=mask)


# -- elementwise and reductions -------------------------------------------------------------------
def _make_binary(fn):
    def op(x, y, dtype=None, mask=None, **kw):
        return _ew(fn, "dve", x, y, dtype=dtype, mask=mask)
    op.__name__ = fn
    op._nki_op = fn
    return op


def _make_unary(fn, engine="act"):
    def op(x, dtype=None, mask=None, **kw):
        return _ew(fn, engine, x, dtype=dtype, mask=mask)
    op.__name__ = fn
    op._nki_op = fn
    return op


_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal", "not_equal", "greater",
           "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
           "bitwise_or", "bitwise_xor")
_UNARY_ACT = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "silu",
              "softplus", "mish", "sin", "cos", "arctan", "erf", "square", "sign", "gelu_dx", "silu_dx")
_UNARY_DVE = ("abs", "negative", "reciprocal", "ceil", "floor", "trunc", "logical_not", "invert")
for _fn in _BINARY:
    globals()[_fn] = _make_binary(_fn)
for _fn in _UNARY_ACT:
    globals()[_fn] = _make_unary(_fn)
for _fn in _UNARY_DVE:
    globals()[_fn] = _make_unary(_fn, "dve")
max_ = maximum = globals()["maximum"]          # noqa: F821
min_ = minimum = globals()["minimum"]          # noqa: F821


def where(condition, x, y, dtype=None, mask=None, **_) -> View:
    return _ew("where", "dve", condition, x, y, dtype=dtype, mask=mask)


def _reduce(op: str, x, axis, dtype=None, mask=None, keepdims=False, name: str = "", negate=False, **_) -> View:
    name = name or f"a {op} reduction"
    x = _view(x, f"{name}'s input")
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(_int(a) % len(x.shape) for a in axes)
    if 0 in axes:
        raise NKIError(f"{name} cannot reduce along the partition dimension (axis 0): transpose the tile or "
                       f"use a matmul with a ones vector")
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape) if keepdims or d not in axes)
    shape = shape if len(shape) > 1 else shape + (1,)     # a per-partition result is a (P, 1) tile
    attrs = _attrs(mask, op=op, axes=list(axes), keepdims=bool(keepdims), negate=negate)
    return _compute("reduce", "dve", [x], attrs, dtype, shape=shape)


def sum(x, axis, dtype=None, mask=None, keepdims=False, **kw):      # noqa: A001
    return _reduce("add", x, axis, dtype, mask, keepdims, name="nl.sum")


def prod(x, axis, dtype=None, mask=None, keepdims=False, **kw):
    return _reduce("multiply", x, axis, dtype, mask, keepdims, name="nl.prod")


def max(x, axis, dtype=None, mask=None, keepdims=False, **kw):      # noqa: A001
    return _reduce("maximum", x, axis, dtype, mask, keepdims, name="nl.max")


def min(x, axis, dtype=None, mask=None, keepdims=False, **kw):      # noqa: A001
    return _reduce("minimum", x, axis, dtype, mask, keepdims, name="nl.min")


def mean(x, axis, dtype=None, mask=None, keepdims=False, **kw):
    return _reduce("mean", x, axis, dtype, mask, keepdims, name="nl.mean")


def all(x, axis, dtype=None, mask=None, keepdims=False, **kw):      # noqa: A001
    return _reduce("minimum", x, axis, dtype, mask, keepdims, name="nl.all")


class _LoopReduce:
    """What nl.loop_reduce returns: `acc[...] = nl.loop_reduce(x, op, loop_indices=[k])` makes acc = op(acc, x)
    in each iteration, so it becomes an instruction only once assigned into its accumulator."""

    def __init__(self, x: View, fn: str, mask) -> None:
        self.x, self.fn, self.mask = x, fn, mask

    def assign_into(self, dst: View) -> None:
        if tile_broadcast(self.x.shape, dst.shape) != dst.shape:
            raise NKIError(f"nl.loop_reduce: a tile of shape {self.x.shape} cannot accumulate into {dst.shape}")
        RECORDER.emit("ew", "dve", [dst], [dst, self.x], _attrs(self.mask, fn=self.fn))

    MISUSE = ("nl.loop_reduce's result must be assigned into its accumulator tile: "
              "acc[...] = nl.loop_reduce(x, op=np.add, loop_indices=[k])")

    def __getattr__(self, name):
        raise NKIError(self.MISUSE)


def loop_reduce(x, op, loop_indices=None, dtype=None, mask=None, **_) -> _LoopReduce:
    from neuronxcc.nki.isa import op_name
    return _LoopReduce(_view(x, "nl.loop_reduce's x"), op_name(op), mask)


def softmax(x, axis, dtype=None, mask=None, **_):
    m = max(x, axis, keepdims=True)
    e = exp(subtract(x, m))                                           # noqa: F821
    return divide(e, sum(e, axis, keepdims=True), dtype=dtype)      # noqa: F821


# operators on tensors and tiles call the nl functions above
def _install_operators() -> None:
    pairs = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "pow": "power",
             "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
             "and": "logical_and", "or": "logical_or", "xor": "logical_xor"}
    g = globals()
    for dunder, fn in pairs.items():
        f = g[fn]
        for cls in (Tensor, View):
            setattr(cls, f"__{dunder}__", lambda a, b, f=f: f(a, b))
            if dunder in ("add", "sub", "mul", "truediv", "pow", "and", "or", "xor"):
                setattr(cls, f"__r{dunder}__", lambda a, b, f=f: f(b, a))
    for cls in (Tensor, View):
        cls.broadcast_to = lambda a, shape: broadcast_to(a, shape)
        cls.__neg__ = lambda a: g["negative"](a)
        cls.__abs__ = lambda a: g["abs"](a)
        cls.__iadd__ = _iadd


def _iadd(self, other):
    """`psum_tile += nisa.nc_matmul(...)` accumulates in PSUM; otherwise an in-place add."""
    dst = self.view() if isinstance(self, Tensor) else self
    if isinstance(other, (View, Tensor)):
        src = _view(other, "+=")
        if src.tensor.skipped:
            return self          # `acc += nl.matmul(..., mask=False)` adds nothing
        producer = src.tensor.producer
        if (dst.buffer == "psum" and producer is not None and src.is_whole() and src.tensor.reads == 0
                and RECORDER.instrs[producer][0] == "matmul" and src.shape == dst.shape):
            instr = RECORDER.instrs[producer]
            instr[2][0] = dst.encode()
            instr[4]["acc"] = True
            RECORDER.tensors[src.tensor.tid][0] = "dead"
            src.tensor.producer = None
            src.tensor.gone = (f"the matmul result from kernel.py line {instr[5]} was accumulated into another "
                               f"PSUM tile with += and has no value of its own; use that tile, or keep a copy")
            dst.tensor.producer = producer
            return self
    RECORDER.emit("ew", "dve", [dst], [dst, other if not isinstance(other, (int, float)) else float(other)],
                  {"fn": "add"})
    return self


_install_operators()
__all__ = [n for n in globals() if not n.startswith("_")]
__all__ += ["arange", "mgrid", "IndexExpr", "bfloat16", "DTYPES"]
