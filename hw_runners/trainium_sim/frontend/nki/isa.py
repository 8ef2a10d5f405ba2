"""nki.isa (NKI v2) as trainium-sim provides it: destination-passing instructions, each recorded as the v1
instruction that computes the same thing (neuronxcc/nki/isa.py), written into the `dst` the kernel passed.

Signatures follow the NKI API reference, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.isa.html
(the stubs of github.com/aws-neuron/aws-neuron-sdk nki/api/nki/isa/__init__.py, NKI 0.6/0.7). Instructions the
reference documents but trainium-sim does not simulate are refused by name (see UNSUPPORTED), never approximated.
"""
from __future__ import annotations

from enum import Enum

import numpy as _np

from neuronxcc.nki import isa as _v1
from neuronxcc.nki import language as _nl1
from neuronxcc.nki._index import IndexExpr, NKIError, Predicate, _int
from neuronxcc.nki._trace import RECORDER, dtype_name
from neuronxcc.nki._trace import RECORDER as _RECORDER      # kept: the public name is deleted below
from neuronxcc.nki._trace import dtype_name as _dtype_name     # kept: the public name is deleted below
from nki import _fp8, _trn3, _v2
from nki._v2 import into, on_chip, touched, view


class engine(str, Enum):
    """nisa.engine: where an instruction runs (values are the recorder's engine names)."""
    tensor = "pe"
    vector = "dve"
    scalar = "act"
    gpsimd = "pool"
    unknown = "unknown"


tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown
reduce_cmd = _v1.reduce_cmd
dge_mode, oob_mode = _v1.dge_mode, _v1.oob_mode


matmul_perf_mode = _fp8.matmul_perf_mode


class nc_version(str, Enum):
    gen2 = "gen2"
    gen3 = "gen3"
    gen4 = "gen4"


def get_nc_version() -> nc_version:
    return nc_version(_v2.NC_VERSION[_v2.PLATFORM["name"]])


def _eng(e) -> str:
    return e.value if isinstance(e, engine) else ("unknown" if e is None else e)


# -- data movement -------------------------------------------------------------------------------------
def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown, engine=engine.unknown,
             name=None) -> None:
    """dst = src by DMA between HBM and SBUF. NKI 0.3.0 removed reading PSUM ('copy the PSUM tensor to SBUF first
    using nisa.tensor_copy') and dst_rmw_op ('use nisa.dma_compute')."""
    d, s = view(dst, "nisa.dma_copy's dst"), view(src, "nisa.dma_copy's src")
    if "psum" in (d.buffer, s.buffer):
        raise NKIError("nisa.dma_copy cannot read or write PSUM (NKI 0.3.0): copy the PSUM tile to SBUF with "
                       "nisa.tensor_copy(dst=sbuf_tile, src=psum_tile) first")
    touched(d, s)
    _v1.dma_copy(d, s)


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown, oob_mode=oob_mode.error,
                  name=None) -> None:
    """A 2-D transpose by the DMA engines (trainium-sim models the 2-D case only)."""
    into(dst, "nisa.dma_transpose", lambda: _v1.dma_transpose(view(src, "nisa.dma_transpose's src"), axes=axes,
                                                             dtype=view(dst, "dst").dtype_name))


def tensor_copy(dst, src, engine=engine.unknown, name=None, dtype=None) -> None:
    s = on_chip(src, "nisa.tensor_copy's src")
    d = on_chip(dst, "nisa.tensor_copy's dst")
    # NKI v2's signature has no dtype: dst's dtype is the cast. Autocomp's published v2 gemm still passes
    # dtype= naming dst's own dtype (a redundant spelling, kept working); any other dtype would be a cast
    # this call cannot make, so it is refused rather than silently ignored
    if dtype is not None and _dtype_name(dtype) != d.dtype_name:
        raise NKIError(f"nisa.tensor_copy: dtype={_dtype_name(dtype)} differs from dst's dtype {d.dtype_name}; in "
                       "NKI v2 the dst's dtype decides the cast (allocate dst with the dtype you want and drop dtype=)")
    e = _eng(engine)
    if e == "pool" and "psum" in (s.buffer, d.buffer):
        raise NKIError("nisa.tensor_copy: GpSimd cannot access PSUM; use the Vector or Scalar engine")
    if e == "act" and _v2.PLATFORM["name"] == "trn1":
        # https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.1/nki/api/generated/nki.isa.tensor_copy.html
        raise NKIError("nisa.tensor_copy: on NeuronCore-v2 (trn1) tensor_copy is not supported on the Scalar "
                       "engine; use nisa.activation(dst=..., op=nl.copy, data=...)")
    # engine=unknown: the compiler picks by workload among the engines this NeuronCore copies on (not Scalar on v2)
    choices = ("dve", "pool") if _v2.PLATFORM["name"] == "trn1" else _v1.COPY_ENGINES
    into(d, "nisa.tensor_copy", lambda: _v1.tensor_copy(s, dtype=d.dtype_name, engine=e, choices=choices), s)


def memset(dst, value, engine=engine.unknown, name=None) -> None:
    d = on_chip(dst, "nisa.memset's dst")
    if d.dtype_name in ("int32", "int8", "uint8", "uint32") and not float(value).is_integer():
        raise NKIError("nisa.memset: value must match the dst dtype (NKI 0.3.0): pass an integer for an integer tile")
    into(d, "nisa.memset", lambda: _v1.memset(d.shape, value, d.dtype_name, engine=_eng(engine)))


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None) -> None:
    d = on_chip(dst, "nisa.tensor_copy_predicated's dst")
    touched(d, src, predicate)
    _v1.tensor_copy_predicated(src, d, view(predicate, "predicate"), reverse_pred=reverse_pred)


# -- Tensor engine -------------------------------------------------------------------------------------
def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              accumulate=None, tile_position=(), tile_size=(), perf_mode=matmul_perf_mode.none, name=None) -> None:
    """dst[M, N] (PSUM, fp32) = stationary[K, M].T @ moving[K, N]. accumulate=None: the first write to a PSUM
    location overwrites, later ones accumulate (see _v2.accumulates); True/False as given."""
    d = on_chip(dst, "nisa.nc_matmul's dst", ("psum",))
    s = on_chip(stationary, "nisa.nc_matmul's stationary", ("sbuf",))
    m = on_chip(moving, "nisa.nc_matmul's moving", ("sbuf",))
    double = _fp8.perf_mode(perf_mode, s, m, is_transpose, tile_size)
    if d.dtype_name not in ("float32", "bfloat16") or (d.dtype_name == "bfloat16" and _v2.PLATFORM["name"] != "trn3"):
        if d.dtype_name == "bfloat16":
            raise _trn3.refuse("BF16 PSUM accumulation", "nisa.nc_matmul into a bfloat16 PSUM tile")
        raise NKIError(f"nisa.nc_matmul: dst must be a float32 PSUM tile (or bfloat16 on trn3), not {d.dtype_name}")
    acc = _v2.accumulates(d) if accumulate is None else bool(accumulate)
    make = (lambda: _fp8.double_row_matmul(s, m)) if double else (lambda: _v1.nc_matmul(s, m))
    instr = into(d, "nisa.nc_matmul", make, s, m, closes_dst=False)
    instr[4]["acc"] = acc
    _v2.opened(d)


def nc_transpose(dst, data, engine=engine.unknown, name=None) -> None:
    x = on_chip(data, "nisa.nc_transpose's data")
    into(dst, "nisa.nc_transpose", lambda: _v1.nc_transpose(x, dtype=view(dst, "dst").dtype_name,
                                                            engine=_eng(engine)), x)


# -- Vector / Scalar / GpSimd --------------------------------------------------------------------------
def _operand(x):
    return x if isinstance(x, (int, float, _np.number)) else on_chip(x, "an operand")


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None) -> None:
    a, b = on_chip(data1, "nisa.tensor_tensor's data1"), on_chip(data2, "nisa.tensor_tensor's data2")
    into(dst, "nisa.tensor_tensor", lambda: _v1.tensor_tensor(a, b, op, dtype=view(dst, "dst").dtype_name,
                                                              engine=_eng(engine)), a, b)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None) -> None:
    x = on_chip(data, "nisa.tensor_scalar's data")
    into(dst, "nisa.tensor_scalar", lambda: _v1.tensor_scalar(
        x, op0, _operand(operand0), reverse0=reverse0, op1=op1,
        operand1=None if operand1 is None else _operand(operand1), reverse1=reverse1,
        dtype=view(dst, "dst").dtype_name, engine=_eng(engine)), x, operand0, operand1)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None) -> None:
    x, t = on_chip(data, "nisa.scalar_tensor_tensor's data"), on_chip(operand1, "operand1")
    into(dst, "nisa.scalar_tensor_tensor", lambda: _v1.scalar_tensor_tensor(
        x, op0, _operand(operand0), op1, t, reverse0=reverse0, reverse1=reverse1,
        dtype=view(dst, "dst").dtype_name), x, t, operand0)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False,
                         name=None) -> None:
    """op0(data, operand0) into dst, reduced along the free axes into reduce_res. trainium-sim models the
    default reduce_cmd (reset_reduce) with reduce_res given; other register commands are refused."""
    if reduce_res is None or reduce_cmd != _v1.reduce_cmd.reset_reduce or reduce_init is not None or reduce_res_negate:
        raise NKIError("nisa.tensor_scalar_reduce: trainium-sim models reduce_cmd=reset_reduce with a reduce_res "
                       "tile only (no reduce_init / reduce_res_negate)")
    x, r = on_chip(data, "nisa.tensor_scalar_reduce's data"), on_chip(reduce_res, "reduce_res")
    into(dst, "nisa.tensor_scalar_reduce", lambda: _v1.tensor_scalar_reduce(
        x, op0, _operand(operand0), reduce_op, r, reverse0=reverse0, dtype=view(dst, "dst").dtype_name), x, r)


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None) -> None:
    x = on_chip(data, "nisa.tensor_reduce's data")
    into(dst, "nisa.tensor_reduce", lambda: _v1.tensor_reduce(op, x, axis, dtype=view(dst, "dst").dtype_name,
                                                              negate=negate, keepdims=keepdims), x)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None) -> None:
    a, b = on_chip(data0, "data0"), on_chip(data1, "data1")
    into(dst, "nisa.tensor_tensor_scan", lambda: _v1.tensor_tensor_scan(
        a, b, _operand(initial), op0, op1, reverse0=reverse0, reverse1=reverse1,
        dtype=view(dst, "dst").dtype_name), a, b, initial)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               name=None) -> None:
    """op(data * scale + bias) into dst on the Scalar engine; the accumulator registers follow reduce_cmd and
    reduce_res (if given) reads them out afterwards (the reference's pseudo code)."""
    x = on_chip(data, "nisa.activation's data")
    b = None if bias is None else _bias(bias, x)
    into(dst, "nisa.activation", lambda: _v1.activation(
        op, x, bias=b, scale=_operand(scale), reduce_op=reduce_op,
        reduce_res=None if reduce_res is None else on_chip(reduce_res, "reduce_res"),
        reduce_cmd=reduce_cmd, dtype=view(dst, "dst").dtype_name), x, b, reduce_res)


def _bias(bias, x):
    """A bias is a (P, 1) tile; NKI v2 also takes a number (a constant for every partition), which the v1 stream
    expresses as a per-partition tile of that constant."""
    if isinstance(bias, (int, float, _np.number)):
        t = _nl1.full((x.shape[0], 1), float(bias), "float32")
        return t.view()
    return on_chip(bias, "bias")


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None) -> None:
    """op(data * scale + bias) into dst, its free-axis reduction (reduce_op) into reduce_res."""
    x = on_chip(data, "nisa.activation_reduce's data")
    b = None if bias is None else _bias(bias, x)
    into(dst, "nisa.activation_reduce", lambda: _v1.activation_reduce(
        op, x, reduce_op, on_chip(reduce_res, "reduce_res"), bias=b, scale=_operand(scale),
        dtype=view(dst, "dst").dtype_name), x, b, reduce_res)


def reciprocal(dst, data, name=None) -> None:
    x = on_chip(data, "nisa.reciprocal's data")
    into(dst, "nisa.reciprocal", lambda: _v1.reciprocal(x, dtype=view(dst, "dst").dtype_name), x)


def bn_stats(dst, data, name=None) -> None:
    x = on_chip(data, "nisa.bn_stats's data")
    into(dst, "nisa.bn_stats", lambda: _v1.bn_stats(x, dtype=view(dst, "dst").dtype_name), x)


def bn_aggr(dst, data, name=None) -> None:
    x = on_chip(data, "nisa.bn_aggr's data")
    into(dst, "nisa.bn_aggr", lambda: _v1.bn_aggr(x, dtype=view(dst, "dst").dtype_name), x)


def _affine(d, pattern, offset, channel_multiplier, what: str) -> IndexExpr:
    """offset + channel_multiplier * p + sum(step * i) over dst's axes: the pattern [[step, num], ...] must
    name dst's free axes in order (sizes of 1 may be left out), which covers the documented uses."""
    pattern = [(_int(s), _int(n)) for s, n in pattern]
    free = [n for n in d.shape[1:]]
    sized = [(s, n) for s, n in pattern if n != 1]
    if [n for _, n in sized] != [n for n in free if n != 1]:
        raise NKIError(f"{what}: trainium-sim supports patterns whose sizes are dst's free sizes in order "
                       f"(dst {d.shape}, pattern {pattern})")
    rank = len(d.shape)
    terms = [(d.shape[0], rank, 0, _int(channel_multiplier))]
    steps = iter(sized)
    for pos, n in enumerate(d.shape[1:], 1):
        if n != 1:
            terms.append((n, rank, pos, next(steps)[0]))
    return IndexExpr(_int(offset), tuple(terms))


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None) -> None:
    d = on_chip(dst, "nisa.iota's dst", ("sbuf",))
    expr = _affine(d, pattern, offset, channel_multiplier, "nisa.iota")
    into(d, "nisa.iota", lambda: _v1.iota(expr, d.dtype_name))


def nc_n_gather(dst, data, indices, name=None) -> None:
    """dst[p, j] = data[p, indices[p, j]] in each partition, over data's flattened free elements (GpSimd; SBUF
    only; indices uint32; dst of data's dtype). The trusted replayer checks the indices' values on every input
    set. https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_n_gather.html"""
    x = on_chip(data, "nisa.nc_n_gather's data", ("sbuf",))
    i = on_chip(indices, "nisa.nc_n_gather's indices", ("sbuf",))
    d = on_chip(dst, "nisa.nc_n_gather's dst", ("sbuf",))
    if i.dtype_name != "uint32":
        raise NKIError(f"nisa.nc_n_gather: indices must be uint32, not {i.dtype_name}")
    if d.dtype_name != x.dtype_name:
        raise NKIError(f"nisa.nc_n_gather: dst ({d.dtype_name}) must have data's dtype ({x.dtype_name})")
    if not x.shape[0] == i.shape[0] == d.shape[0] or x.shape[0] > 128:
        raise NKIError(f"nisa.nc_n_gather: data {x.shape}, indices {i.shape} and dst {d.shape} must share one "
                       f"partition size of at most 128")
    if _np.prod(i.shape[1:]) != _np.prod(d.shape[1:]):
        raise NKIError(f"nisa.nc_n_gather: dst {d.shape} must hold as many elements per partition as indices "
                       f"{i.shape}")

    def make():
        out = _nl1._new(d.shape, d.dtype_name, _nl1.sbuf)
        _RECORDER.emit("gather", "pool", [out.view()], [x, i], {})
        return out.view()
    into(d, "nisa.nc_n_gather", make, x, i)


_CMP = {"equal": "==", "not_equal": "!=", "greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<="}


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0,
                  name=None) -> None:
    """dst = on_true_tile where cmp_op(offset + channel_multiplier * p + pattern, 0), else on_false_value."""
    d = on_chip(dst, "nisa.affine_select's dst")
    cmp = _CMP.get(_v1.op_name(cmp_op) if cmp_op is not None else "equal")
    if cmp is None:
        raise NKIError(f"nisa.affine_select: cmp_op must be a comparison (nl.equal, nl.greater_equal, ...)")
    expr = _affine(d, pattern, offset, channel_multiplier, "nisa.affine_select")
    x = on_chip(on_true_tile, "on_true_tile")
    pred = Predicate([[expr.encode(), cmp, 0]], expr.shape)
    into(d, "nisa.affine_select", lambda: _v1.affine_select(pred, x, on_false_value, dtype=d.dtype_name), x)


UNSUPPORTED = {"nc_matmul_mx", "tensor_partition_reduce", "tensor_scalar_cumulative", "activate2", "local_gather",
               "nc_stream_shuffle", "rng", "dropout", "set_rng_seed", "rand_set_state",
               "rand_get_state", "rand2", "exponential", "max8", "sequence_bounds", "core_barrier", "dma_compute",
               "quantize_mx", "range_select", "select_reduce", "sendrecv", "register_alloc", "register_move",
               "register_load", "register_store", "nc_find_index8", "nc_match_replace8", "nonzero_with_count",
               "topk", "get_nc_sub_version", "dma_engine"}


def __getattr__(name: str):
    if name in _trn3.REFUSED_ISA:
        raise _trn3.refuse(_trn3.REFUSED_ISA[name], f"nisa.{name}")
    if name in UNSUPPORTED:
        raise NKIError(f"nisa.{name} is part of NKI v2 but trainium-sim does not simulate it")
    if name in ("tensor_copy_dynamic_src", "tensor_copy_dynamic_dst"):
        raise NKIError(f"nisa.{name} was removed in NKI 0.4.0: use nisa.tensor_copy with .ap() and scalar_offset")
    raise AttributeError(f"module 'nki.isa' has no attribute {name!r}")


for _name in [n for n, f in list(globals().items()) if callable(f) and not n.startswith("_")
              and getattr(f, "__module__", None) == __name__ and not isinstance(f, type)]:
    globals()[_name] = _v2.refuse_mask(globals()[_name], f"nisa.{_name}")

del dtype_name, RECORDER
