"""neuronxcc.nki.isa as trainium-sim provides it: one recorded instruction per call, on the engine the
NeuronCore-v2 ISA runs it on (or the one `engine=` names where the ISA lets the kernel choose)."""
from __future__ import annotations

import math
from enum import IntEnum
from types import SimpleNamespace

import numpy as _np

from neuronxcc.nki import language as nl
from neuronxcc.nki._index import IndexExpr, NKIError, Predicate, _broadcast
from neuronxcc.nki._trace import RECORDER, Tensor, View, dtype_name

engine = SimpleNamespace(unknown="unknown", tensor="pe", vector="dve", scalar="act", gpsimd="pool")
_ENGINES = {"unknown", "pe", "dve", "act", "pool"}
# the module-level spellings NKI also exports (nisa.vector_engine, ...)
unknown_engine, tensor_engine, vector_engine, scalar_engine, gpsimd_engine = "unknown", "pe", "dve", "act", "pool"

_ALIASES = {"true_divide": "divide", "absolute": "abs", "max": "maximum", "amax": "maximum", "min": "minimum",
            "amin": "minimum", "sum": "add", "identity": "copy", "bypass": "copy", "fabs": "abs", "remainder": "mod"}


def op_name(op) -> str:
    """The instruction's ALU or activation function from an nl function, a numpy ufunc or a name."""
    name = getattr(op, "_nki_op", None) or getattr(op, "__name__", None) or (op if isinstance(op, str) else None)
    if name is None:
        raise NKIError(f"{op!r} is not an NKI operator: pass an nl.* function or a numpy ufunc such as np.add")
    return _ALIASES.get(name, name)


for _name, _op in (("sum", "add"), ("max", "maximum"), ("min", "minimum"), ("prod", "multiply"), ("mean", "mean"),
                   ("copy", "copy")):
    getattr(nl, _name)._nki_op = _op


def _engine(value, default: str) -> str:
    e = default if value in (None, "unknown") else value
    if e not in _ENGINES - {"unknown"}:
        raise NKIError(f"unknown engine {value!r}: use nisa.engine.vector, scalar, gpsimd or tensor")
    return e


def _scalar_or_tile(x, what: str):
    if isinstance(x, (int, float, _np.number)):
        return float(x)
    if isinstance(x, (View, Tensor)):
        return nl._view(x, what)
    raise NKIError(f"{what} must be a Python number or a per-partition tile of shape (P, 1)")


def remap_mask(clauses: list, rank: int, axis_map: dict, out_rank: int, what: str) -> list:
    """Comparisons over a tile of `rank` axes rewritten over another tile's axes (axis_map: old -> new);
    terms of extent 1 or coefficient 0 vary over nothing and are dropped."""
    out = []
    for (const, terms), cmp, value in clauses:
        moved = []
        for extent, r, pos, coef in terms:
            if extent == 1 or coef == 0:
                continue
            axis = pos + rank - r
            if axis not in axis_map:
                raise NKIError(f"{what}: an operand mask on the contraction (partition) axis is not supported; "
                               f"slice the operands' partitions instead")
            moved.append([extent, out_rank, axis_map[axis], coef])
        out.append([[const, moved], cmp, value])
    return out


def _sbuf_operand(v: View) -> View:
    """The Tensor engine reads its operands from SBUF only. A PSUM operand (an nc_transpose result fed straight
    to nc_matmul) is legalized by the Neuron compiler with a copy to SBUF; trainium-sim issues that copy (on the
    Scalar engine) explicitly, so its cost shows."""
    if v.buffer != "psum":
        return v
    return nl._compute("ew", "act", [v], {"fn": "copy"}, v.dtype_name, nl.sbuf, shape=v.shape)


def nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, mask=None,
              is_transpose=False, **_) -> View:
    """stationary[K, M].T @ moving[K, N] -> PSUM [M, N] (fp32): K on the partitions, M <= 128, N <= 512.
    Operand masks (`stationary[i_m < 64]`, `moving[i_n < 256]`, NKI's operand masking) restrict the
    instruction to part of the free axes: they become a mask of the result tile (rows from the stationary
    free axis, columns from the moving free axes), whose other elements the instruction leaves alone."""
    s, m = nl._view(stationary, "nc_matmul's stationary"), nl._view(moving, "nc_matmul's moving")
    operand_masks = []
    if s.opmask is not None or m.opmask is not None:
        for v, axis_map in ((s, {1: 0}), (m, {a: a for a in range(1, len(m.shape))})):
            if v.opmask is False:
                mask = False
            elif v.opmask:
                operand_masks += remap_mask(v.opmask, len(v.shape), axis_map, len(m.shape), "nc_matmul")
    s, m = _sbuf_operand(View(s.tensor, s.idx, s.shape)), _sbuf_operand(View(m.tensor, m.idx, m.shape))
    if len(s.shape) != 2 or len(m.shape) < 2:
        raise NKIError(f"nc_matmul takes a 2-D stationary tile and a moving tile with partitions first, got "
                       f"stationary {s.shape} and moving {m.shape}")
    moving_free = math.prod(m.shape[1:])
    if s.shape[1] > 128:
        raise NKIError(f"nc_matmul: the stationary tile's free size is {s.shape[1]}; at most 128 "
                       f"(nl.tile_size.gemm_stationary_fmax)")
    if moving_free > 512:
        raise NKIError(f"nc_matmul: the moving tile's free size is {moving_free}; at most 512 "
                       f"(nl.tile_size.gemm_moving_fmax)")
    if s.shape[0] != m.shape[0] or s.shape[0] > 128:
        raise NKIError(f"nc_matmul: stationary {s.shape} and moving {m.shape} must share the contraction "
                       f"(partition) size, at most 128")
    attrs = nl._attrs(mask, acc=False)
    if operand_masks and attrs.get("mask") is not False:
        attrs["mask"] = attrs.get("mask", []) + operand_masks
    return nl._compute("matmul", "pe", [s, m], attrs, "float32", nl.psum, shape=(s.shape[1], *m.shape[1:]))


def nc_transpose(data, mask=None, dtype=None, engine=engine.unknown, **_) -> View:
    x = nl._view(data, "nc_transpose's data")
    if len(x.shape) != 2:
        raise NKIError("nc_transpose takes a 2-D tile")
    big = x.shape[0] > 32 or x.shape[1] > 32
    eng = _engine(engine, "pe" if big else "dve")
    if big and eng == "dve":
        # the Vector engine transposes 32x32 at most; asked for more, the compiler transposes on the Tensor engine
        # (Autocomp's sd-attention step 3 transposes a (128, 64) tile with engine=vector_engine and ran correctly
        # on a trn1: examples/trn-tutorial/5_sd_attention_trace.py)
        eng = "pe"
    buffer = nl.psum if eng == "pe" else nl.sbuf
    return nl._compute("transpose", eng, [x], nl._attrs(mask), dtype or x.dtype, buffer, shape=x.shape[::-1])


def tensor_tensor(data1, data2, op, dtype=None, mask=None, engine=engine.unknown, **_) -> View:
    a, b = nl._view(data1, "tensor_tensor's data1"), nl._view(data2, "tensor_tensor's data2")
    return nl._compute("ew", _engine(engine, "dve"), [a, b], nl._attrs(mask, fn=op_name(op)), dtype)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, dtype=None,
                  mask=None, engine=engine.unknown, **_) -> View:
    """op1(op0(data, operand0), operand1): operands are numbers or per-partition (P, 1) tiles."""
    x = nl._view(data, "tensor_scalar's data")
    srcs = [x, _scalar_or_tile(operand0, "tensor_scalar's operand0")]
    attrs = {"op0": op_name(op0), "reverse0": bool(reverse0)}
    if op1 is not None:
        srcs.append(_scalar_or_tile(operand1, "tensor_scalar's operand1"))
        attrs.update(op1=op_name(op1), reverse1=bool(reverse1))
    return nl._compute("tensor_scalar", _engine(engine, "dve"), srcs, nl._attrs(mask, **attrs), dtype,
                       shape=x.shape)


def scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None, mask=None,
                         engine=engine.unknown, **_) -> View:
    """op1(op0(data, operand0), operand1) in one instruction: operand0 is a number or a (P, 1) tile,
    operand1 a tile shaped like data."""
    x = nl._view(data, "scalar_tensor_tensor's data")
    t = nl._view(operand1, "scalar_tensor_tensor's operand1")
    if _broadcast(x.shape, t.shape) != x.shape:
        raise NKIError(f"scalar_tensor_tensor: operand1 {t.shape} must match data {x.shape}")
    attrs = nl._attrs(mask, op0=op_name(op0), reverse0=bool(reverse0), op1=op_name(op1), reverse1=bool(reverse1),
                      tensor1=True)
    return nl._compute("tensor_scalar", _engine(engine, "dve"),
                       [x, _scalar_or_tile(operand0, "scalar_tensor_tensor's operand0"), t], attrs, dtype,
                       shape=x.shape)


def tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **_) -> View:
    """op0(data, operand0), also reduced with reduce_op along the free axes into reduce_res (P, 1)."""
    x = nl._view(data, "tensor_scalar_reduce's data")
    out = nl._new(x.shape, nl._result_dtype(dtype, [x]), nl.sbuf)
    attrs = nl._attrs(mask, op0=op_name(op0), reverse0=bool(reverse0), reduce=op_name(reduce_op))
    RECORDER.emit("tensor_scalar", "dve", [out.view(), nl._view(reduce_res, "tensor_scalar_reduce's reduce_res")],
                  [x, _scalar_or_tile(operand0, "tensor_scalar_reduce's operand0")], attrs)
    return out.view()


class dge_mode(IntEnum):
    """Descriptor generation for DMA (a scheduling hint; trainium-sim prices every DMA the same way)."""
    unknown, swdge, hwdge, none = 0, 1, 2, 3


class oob_mode(IntEnum):
    """Out-of-bounds handling of indirect DMA (trainium-sim has no indirect DMA: accesses are always checked)."""
    error, skip = 0, 1


fp32 = nl.fp32


def dma_copy(dst, src, mask=None, dst_rmw_op=None, oob_mode=None, dge_mode=None, **_) -> None:
    """A DMA transfer between any two memories (HBM or SBUF); dst_rmw_op=np.add adds src into dst."""
    d, s = nl._view(dst, "dma_copy's dst"), nl._view(src, "dma_copy's src")
    if nl._core(s.shape) != nl._core(d.shape) and _broadcast(s.shape, d.shape) != d.shape:
        raise NKIError(f"dma_copy: src {s.shape} does not match dst {d.shape}")
    attrs = nl._attrs(mask)
    if dst_rmw_op is not None:
        if op_name(dst_rmw_op) != "add":
            raise NKIError(f"dma_copy: dst_rmw_op supports np.add only, not {op_name(dst_rmw_op)}")
        attrs["rmw"] = "add"
    RECORDER.emit("dma", "dma", [d], [s], attrs)


def dma_transpose(src, axes=None, mask=None, dtype=None, **_) -> View:
    """A 2-D transpose done by the DMA engine (HBM or SBUF source) into a new SBUF tile."""
    x = nl._view(src, "dma_transpose's src")
    if len(x.shape) != 2 or axes not in (None, (1, 0), [1, 0]):
        raise NKIError("dma_transpose: trainium-sim supports 2-D tiles with axes (1, 0)")
    out = nl._new(x.shape[::-1], dtype_name(dtype) if dtype is not None else x.dtype_name, nl.sbuf)
    result = out.view()
    RECORDER.emit("dma", "dma", [result], [x], nl._attrs(mask, transpose=True))
    return result


def tensor_copy_predicated(src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **_) -> None:
    """dst = src where predicate (nonzero) holds (where it does not, with reverse_pred); dst keeps the rest."""
    d = nl._view(dst, "tensor_copy_predicated's dst")
    pred = nl._view(predicate, "tensor_copy_predicated's predicate")
    value = _scalar_or_tile(src, "tensor_copy_predicated's src")
    srcs = [pred, d, value] if reverse_pred else [pred, value, d]
    RECORDER.emit("ew", "dve", [d], srcs, nl._attrs(mask, fn="where"))


def tensor_reduce(op, data, axis, mask=None, dtype=None, negate=False, keepdims=False, **_) -> View:
    x = nl._view(data, "tensor_reduce's data")
    return nl._reduce(op_name(op), x, axis, dtype, mask, keepdims, name="nisa.tensor_reduce", negate=bool(negate))


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, dtype=None, mask=None,
                       **_) -> View:
    """Along the free axis: out[:, i] = op1(op0(out[:, i-1], data0[:, i]), data1[:, i]), out[:, -1] = initial."""
    a, b = nl._view(data0, "tensor_tensor_scan's data0"), nl._view(data1, "tensor_tensor_scan's data1")
    srcs = [a, b, _scalar_or_tile(initial, "tensor_tensor_scan's initial")]
    attrs = nl._attrs(mask, op0=op_name(op0), op1=op_name(op1), reverse0=bool(reverse0), reverse1=bool(reverse1))
    return nl._compute("scan", "dve", srcs, attrs, dtype, shape=nl.tile_broadcast(a.shape, b.shape))


# Copies whose engine is left to the compiler (nisa.tensor_copy's engine=unknown, the default, and nl.copy): AWS's
# tensor_copy reference says the compiler "selects best engine based on engine workload" (v2.28.1), and the NKI v1
# reference (v2.26.1) lists Vector, Scalar and GpSimd as copy engines on NeuronCore-v2. The replayer keeps those of
# them that may run this copy (GpSimd cannot reach PSUM) and the cost model runs it on the one free first.
COPY_ENGINES = ("dve", "act", "pool")


def tensor_copy(src, mask=None, dtype=None, engine=engine.unknown, choices=COPY_ENGINES, **_) -> View:
    x = nl._view(src, "tensor_copy's src")
    picked = engine in (None, "unknown")
    attrs = nl._attrs(mask, fn="copy", engines=list(choices)) if picked else nl._attrs(mask, fn="copy")
    return nl._compute("ew", _engine(engine, "dve"), [x], attrs, dtype or x.dtype)


class reduce_cmd(IntEnum):
    """Commands for the Scalar engine's accumulator registers (one per partition), kept across activations."""
    idle = 0            # leave the registers alone (reduce_res, if given, reads them out)
    reset = 1           # set them to zero
    reduce = 2          # accumulate this instruction's free-axis reduction into them
    reset_reduce = 3    # zero them, then accumulate this instruction's reduction


_REDUCE_CMD = reduce_cmd


def _reduce_cmd_name(cmd) -> str:
    if isinstance(cmd, str) and cmd in _REDUCE_CMD.__members__:
        return cmd
    try:
        return _REDUCE_CMD(cmd).name
    except ValueError:
        raise NKIError(f"unknown reduce_cmd {cmd!r}: use nisa.reduce_cmd.idle, reset, reduce or reset_reduce") from None


def activation(op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=None, mask=None,
               dtype=None, **_) -> View:
    """op(data * scale + bias) on the Scalar engine; bias is a (P, 1) tile, scale a number or a (P, 1) tile.
    Without reduce_cmd, reduce_res (if given) receives this instruction's results reduced along the free axes
    with reduce_op (as nisa.activation_reduce). With reduce_cmd, the engine's accumulator registers follow the
    command (idle / reset / reduce / reset_reduce) and reduce_res (if given) receives their values after it."""
    x = nl._view(data, "activation's data")
    srcs = [x, _scalar_or_tile(scale, "activation's scale"),
            nl._view(bias, "activation's bias") if bias is not None else None]
    out = nl._new(x.shape, nl._result_dtype(dtype, [x]), nl.sbuf)
    result = out.view()
    dsts = [result]
    attrs = nl._attrs(mask, fn=op_name(op))
    if reduce_cmd is not None:
        attrs["reduce_cmd"] = _reduce_cmd_name(reduce_cmd)
        if attrs["reduce_cmd"] in ("reduce", "reset_reduce"):
            attrs["reduce"] = op_name(reduce_op if reduce_op is not None else nl.add)
    elif reduce_res is not None:
        attrs["reduce"] = op_name(reduce_op if reduce_op is not None else nl.add)
    if reduce_res is not None:
        dsts.append(nl._view(reduce_res, "activation's reduce_res"))
    RECORDER.emit("activation", "act", dsts, srcs, attrs)
    return result


def activation_reduce(op, data, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **_) -> View:
    return activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, mask=mask,
                      dtype=dtype)


def affine_select(pred, on_true_tile, on_false_value, mask=None, dtype=None, **_) -> View:
    """Where the affine predicate over the tile's indices holds, on_true_tile; elsewhere on_false_value."""
    if not isinstance(pred, Predicate):
        raise NKIError("affine_select's pred must compare nl.arange index expressions, e.g. (i_p - i_f >= 0)")
    x = nl._view(on_true_tile, "affine_select's on_true_tile")
    if not isinstance(on_false_value, (int, float, _np.number)):
        raise NKIError("affine_select's on_false_value must be a Python number")
    attrs = nl._attrs(mask, pred=pred.clauses)
    # GpSimd cannot reach PSUM: a select straight out of PSUM runs on the Vector engine
    engine_name = "dve" if x.buffer == "psum" else "pool"
    return nl._compute("select", engine_name, [x, float(on_false_value)], attrs, dtype, shape=x.shape)


def bn_stats(data, mask=None, dtype=None, **_) -> View:
    """Per-partition statistics of up to 512 elements (count, mean, M2), for bn_aggr; shape (P, 6)."""
    x = nl._view(data, "bn_stats's data")
    return nl._compute("bn_stats", "dve", [x], nl._attrs(mask), dtype or "float32", shape=(x.shape[0], 6))


def bn_aggr(data, mask=None, dtype=None, **_) -> View:
    """Combine bn_stats results laid side by side (P, 6 * k) into (P, 2): mean and (population) variance."""
    x = nl._view(data, "bn_aggr's data")
    return nl._compute("bn_aggr", "dve", [x], nl._attrs(mask), dtype or "float32", shape=(x.shape[0], 2))


def reciprocal(data, dtype=None, mask=None, **_) -> View:
    return nl._ew("reciprocal", "dve", data, dtype=dtype, mask=mask)


def iota(expr, dtype, mask=None, **_) -> View:
    if not isinstance(expr, IndexExpr):
        raise NKIError("iota takes an affine expression of nl.arange indices")
    shape = expr.shape if len(expr.shape) >= 2 else expr.shape + (1,)
    out = nl._new(shape, dtype_name(dtype), nl.sbuf)
    RECORDER.emit("iota", "pool", [out.view()], [], nl._attrs(mask, expr=expr.encode()))
    return out.view()


def memset(shape, value, dtype, mask=None, engine=engine.unknown, **_) -> View:
    out = nl._new(shape, dtype, nl.sbuf)
    RECORDER.emit("memset", _engine(engine, "dve"), [out.view()], [], nl._attrs(mask, value=float(value)))
    return out.view()


def get_nc_version():
    return "gen2"


nc_version = SimpleNamespace(gen2="gen2", gen3="gen3")
