"""Helpers of trainium-sim's nl.* and nisa.* calls: allocation, operand checks and the one-instruction
pattern most calls follow (a fresh tile written by one recorded instruction)."""
from __future__ import annotations

import numpy as _np

from neuronxcc.nki._index import NKIError, Predicate, _broadcast, tile_broadcast
from neuronxcc.nki._trace import RECORDER, Tensor, View, _core, dtype_name
from neuronxcc.nki.language.constants import hbm, par_dim, private_hbm, psum, sbuf, shared_hbm

_HBM = (hbm, shared_hbm, private_hbm)


def _new(shape, dtype, buffer) -> Tensor:
    if buffer is sbuf or buffer is psum:        # the common case, as below
        shape = tuple(shape)
        pdim = 0
        for i, s in enumerate(shape):
            if isinstance(s, par_dim):
                pdim = i
                break
        return RECORDER.tensor(buffer, shape, dtype, pdim)
    if buffer == shared_hbm and RECORDER.grid:
        return RECORDER.shared_tensor(shape, dtype)     # one tensor for every instance of the launch grid
    if buffer in _HBM:
        return RECORDER.tensor("hbm", shape, dtype)
    if buffer not in (sbuf, psum):
        raise NKIError(f"unknown buffer {buffer!r}: use nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm")
    shape = tuple(shape)
    pdim = next((i for i, s in enumerate(shape) if isinstance(s, par_dim)), 0)
    return RECORDER.tensor(buffer, shape, dtype, pdim)


def _view(x, what: str) -> View:
    if isinstance(x, Tensor):
        return x.view()
    if isinstance(x, View):
        return x
    if isinstance(x, _LoopReduce):
        raise NKIError(_LoopReduce.MISUSE)
    raise NKIError(f"{what} must be a tensor or a tile, not {type(x).__name__}")


def _attrs(mask, **attrs) -> dict:
    if mask is None:
        return attrs
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
        if isinstance(o, View) and o.tensor.buffer == "hbm":
            raise NKIError(f"{attrs.get('fn', op)} reads an HBM tensor: load it into SBUF with nl.load first")
    if shape is None:
        shape = tile_broadcast(*[o.shape for o in ops if isinstance(o, View)])
    out = _new(shape, _result_dtype(dtype, ops), buffer)
    result = out.view()          # the instruction's destination, and what the call returns
    RECORDER.emit(op, engine, [result], ops, attrs)
    return result


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

