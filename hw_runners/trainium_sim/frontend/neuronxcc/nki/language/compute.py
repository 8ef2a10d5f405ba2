"""nl.* arithmetic of trainium-sim's NKI front end: elementwise functions, reductions and the operators
of tiles. Transcendental functions run on the Scalar (activation) engine, arithmetic, comparisons and
reductions on the Vector engine; which engine a call uses matters only to the cost model."""
from __future__ import annotations

from neuronxcc.nki._index import NKIError, _int, tile_broadcast
from neuronxcc.nki._trace import RECORDER, Tensor, View
from neuronxcc.nki.language._base import _LoopReduce, _attrs, _compute, _ew, _view
from neuronxcc.nki.language.memory import broadcast_to


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
           "bitwise_or", "bitwise_xor", "mod", "fmod", "left_shift", "right_shift")
_UNARY_ACT = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "silu",
              "softplus", "mish", "sin", "cos", "arctan", "erf", "square", "sign", "gelu_dx", "silu_dx", "tan",
              "erf_dx", "gelu_apprx_sigmoid")
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




def loop_reduce(x, op, loop_indices=None, dtype=None, mask=None, **_) -> _LoopReduce:
    from neuronxcc.nki.isa import op_name
    return _LoopReduce(_view(x, "nl.loop_reduce's x"), op_name(op), mask)


def var(x, axis, dtype=None, mask=None, **_):
    """Population variance along free axes: mean((x - mean(x))^2)."""
    d = subtract(x, mean(x, axis, keepdims=True), mask=mask)                # noqa: F821
    return mean(multiply(d, d, mask=mask), axis, dtype=dtype, mask=mask)    # noqa: F821


def static_cast(x, dtype, **_):
    """x converted to dtype (a copy)."""
    return _ew("copy", "act", x, dtype=dtype)


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
