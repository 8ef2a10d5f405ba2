"""nki.language (NKI v2) as trainium-sim provides it: allocation, loops, tile sizes, dtypes, buffers, and the
convenience APIs NKI 0.3.0 (re)introduced (nl.load, nl.store, nl.add, nl.exp, nl.matmul, ...; the migration
guide: 'convenience wrappers around nki.isa APIs'). Each is the v1 call that records the same instructions,
without v1's forms: no mask=, no nl.arange / nl.mgrid, nl.par_dim only as the first dimension (see _v2.REMOVED).

Reference: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.language.html (stubs:
github.com/aws-neuron/aws-neuron-sdk nki/api/nki/language/__init__.py); tile sizes:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.language.tile_size.html
"""
from __future__ import annotations

from types import SimpleNamespace

from neuronxcc.nki import language as _v1
from neuronxcc.nki._index import NKIError
from neuronxcc.nki._trace import Tensor, View
from nki import _loops, _trn3, _v2

# dtypes trainium-sim's replayer holds (packed x4 / fp4 / e8m0 / int16 are not modelled; see __getattr__)
float32, bfloat16, float16, tfloat32 = _v1.float32, _v1.bfloat16, _v1.float16, _v1.tfloat32
int32, int8, uint8, uint32, bool_ = _v1.int32, _v1.int8, _v1.uint8, _v1.uint32, _v1.bool_
fp32, bfp16 = _v1.fp32, _v1.bfp16
# fp8: NKI's dtypes are strings (the stubs' `DType = str`); the replayer rounds to each format (fp8.py there)
float8_e4m3, float8_e4m3fn, float8_e5m2 = "float8_e4m3", "float8_e4m3fn", "float8_e5m2"


def _dtype(dtype):
    """float8_e4m3fn (OCP FP8) exists on NeuronCore-v4 only: the compiler refuses it for trn1/trn2 (NCC_EVRF051)."""
    if dtype == float8_e4m3fn and _v2.PLATFORM["name"] != "trn3":
        raise NKIError(f"nl.float8_e4m3fn is supported on trn3 (NeuronCore-v4) only, not {_v2.PLATFORM['name']} "
                       f"(compiler error NCC_EVRF051); use nl.float8_e4m3 or nl.float8_e5m2")
    return dtype

# buffers (NKI 0.3.0: objects, not strings; the recorder's names serve as the objects)
sbuf, psum, hbm, shared_hbm, private_hbm = _v1.sbuf, _v1.psum, _v1.hbm, _v1.shared_hbm, _v1.private_hbm
par_dim = _v1.par_dim      # accepted as the first dimension only (_shape)
NkiTensor = ndarray_type = Tensor


def is_hbm(buffer) -> bool:
    return buffer in (hbm, shared_hbm, private_hbm)


def is_on_chip(buffer) -> bool:
    return buffer in (sbuf, psum)


def is_psum(buffer) -> bool:
    return buffer == psum


def is_sbuf(buffer) -> bool:
    return buffer == sbuf


# set by the child from the platform the evaluator chose (set_platform); trn2 figures until then
tile_size = SimpleNamespace()


def set_platform(name: str, sizes: dict) -> None:
    """The tile-size constants of the chosen NeuronCore (the trusted side sends its params' figures)."""
    _v2.PLATFORM["name"] = name
    bank = int(sizes["psum_bank_bytes"])
    sbuf_usable = int(sizes["sbuf_usable_partition_bytes"])
    vars(tile_size).update(
        pmax=int(sizes["pmax"]), psum_fmax=bank // 4, psum_bank_fmax=bank // 4, psum_bank_fmax_bytes=bank,
        psum_num_banks=int(sizes["psum_banks"]), gemm_stationary_fmax=int(sizes["stationary_fmax"]),
        gemm_moving_fmax=int(sizes["moving_fmax"]), bn_stats_fmax=int(sizes["bn_stats_fmax"]),
        sbuf_size_bytes=int(sizes["sbuf_partition_bytes"]) * int(sizes["pmax"]), sbuf_fmax_bytes=sbuf_usable,
        sbuf_fmax=sbuf_usable // 4, total_available_sbuf_size=sbuf_usable)


set_platform("trn2", {"psum_bank_bytes": 2048, "sbuf_usable_partition_bytes": 212992, "pmax": 128, "psum_banks": 8,
                      "stationary_fmax": 128, "moving_fmax": 512, "bn_stats_fmax": 512, "sbuf_partition_bytes": 229376})


# -- allocation and loops --------------------------------------------------------------------------------
def _shape(shape) -> tuple:
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    # the partition dimension is the first; marking it so is harmless (Autocomp's NKI v2 gemm does, and ran on
    # trn2), a par_dim anywhere else is a block dimension, which NKI 0.2.0 removed
    if any(isinstance(s, _v1.par_dim) for s in shape[1:]):
        raise NKIError(_v2.REMOVED["par_dim"])
    if shape and isinstance(shape[0], _v1.par_dim):
        shape = (int(shape[0]),) + shape[1:]
    return shape


def _v2tile(t):
    """Marks a tensor NKI v2 allocated: its on-chip tiles have NkiTensor.reshape (_reshape.py), v1's do not."""
    t.v2 = True
    return t


def _buffer(buffer) -> str:
    if buffer is None:
        return sbuf
    if buffer not in (sbuf, psum, hbm, shared_hbm, private_hbm):
        raise NKIError(f"unknown buffer {buffer!r}: use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm")
    return buffer


def ndarray(shape, dtype, buffer=sbuf, name="", address=None) -> Tensor:
    """A tensor in SBUF, PSUM or HBM; address= (manual placement) is accepted and left to trainium-sim's allocator."""
    return _v2tile(_v1.ndarray(_shape(shape), _dtype(dtype), _buffer(buffer)))


def zeros(shape, dtype, buffer=sbuf, name="") -> Tensor:
    return _v2tile(_v1.zeros(_shape(shape), _dtype(dtype), _buffer(buffer)))


def ones(shape, dtype, buffer=sbuf, name="") -> Tensor:
    return _v2tile(_v1.ones(_shape(shape), _dtype(dtype), _buffer(buffer)))


def full(shape, fill_value, dtype, buffer=sbuf, name="") -> Tensor:
    return _v2tile(_v1.full(_shape(shape), fill_value, _dtype(dtype), _buffer(buffer)))


def zeros_like(x, dtype=None, buffer=None, name="") -> Tensor:
    return zeros(x.shape, dtype or x.dtype, buffer or (x.buffer if x.buffer != hbm else sbuf))


def empty_like(x, dtype=None, buffer=None, name="") -> Tensor:
    return ndarray(x.shape, dtype or x.dtype, buffer or (x.buffer if x.buffer != hbm else sbuf))


ds = _v1.ds


def affine_range(start, stop=None, step=1):
    """Iterations without loop-carried dependences; traced by unrolling (as every range here)."""
    return _v1.affine_range(*((start,) if stop is None else (start, stop, step)))


def sequential_range(start, stop=None, step=1):
    return _v1.sequential_range(*((start,) if stop is None else (start, stop, step)))


static_range = sequential_range
fori_loop, while_loop, dynamic_range = _loops.fori_loop, _loops.while_loop, _loops.dynamic_range
program_id, program_ndim = _v1.program_id, _v1.program_ndim


def num_programs(axes=0) -> int:
    """NKI 0.3.0: axes defaults to 0 (it was None)."""
    return _v1.num_programs(axes)


def device_print(print_prefix, tensor) -> None:
    """Printing device values is not possible in a trace; ignored."""


# -- convenience APIs (0.3.0): the v1 calls, mask refused -------------------------------------------------
def load(src, dtype=None) -> View:
    return _v1.load(src, dtype=dtype)


def store(dst, value) -> None:
    _v2.touched(value)
    _v1.store(dst, value)


def softmax(x, axis=-1, dtype=None):
    return _v1.softmax(x, axis, dtype=dtype)


def matmul(x, y, transpose_x=False):
    return _v1.matmul(x, y, transpose_x=transpose_x)


_PASS = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "abs", "square", "power", "equal", "not_equal",
         "less", "less_equal", "greater", "greater_equal", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
         "left_shift", "right_shift", "logical_and", "logical_or", "logical_xor", "logical_not", "exp", "log", "sqrt",
         "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_sigmoid", "gelu_apprx_tanh", "gelu_dx", "silu",
         "silu_dx", "softplus", "mish", "erf", "erf_dx", "reciprocal", "copy", "sin", "cos", "tan", "arctan", "ceil",
         "floor", "trunc", "negative", "sign", "fmod", "mod", "sum", "max", "min", "mean", "prod", "var", "all",
         "where", "expand_dims", "broadcast_to", "transpose", "load_transpose2d")


def _reading(fn, name: str):
    """A v1 call: mask= refused; PSUM operands it reads end their matmul accumulation groups (_v2.touched)."""
    def call(*args, **kwargs):
        if "mask" in kwargs:
            raise NKIError(_v2.MASK_REMOVED.format(what=f"nl.{name}"))
        _v2.touched(args, list(kwargs.values()))
        return fn(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call._nki_op = getattr(fn, "_nki_op", name)       # nl.add etc. also name ALU operations (op=nl.add)
    return call


for _name in _PASS:
    globals()[_name] = _reading(getattr(_v1, _name), _name)
for _name in ("load", "store", "softmax", "matmul"):
    globals()[_name] = _reading(globals()[_name], _name)
max_, min_ = globals()["max"], globals()["min"]

_NOT_SIMULATED = {"abs_max", "abs_min", "rms_norm", "dropout", "random_seed", "no_reorder", "gather_flattened",
                  "shared_constant", "shared_identity_matrix", "rand",
                  "gelu_apprx_sigmoid_dx", "average", "prelu", "bypass", "float8_e8m0fnu", "float8_e4m3fn_x4",
                  "float8_e5m2_x4", "float4_e2m1fn_x4", "int16", "uint16", "spmd_dim", "nc"}


def __getattr__(name: str):
    if name in _trn3.REFUSED_DTYPES:
        raise _trn3.refuse(_trn3.REFUSED_DTYPES[name], f"nl.{name}")
    if name in _v2.REMOVED:
        raise NKIError(_v2.REMOVED[name])
    if name in _NOT_SIMULATED:
        raise NKIError(f"nl.{name} is part of NKI v2 but trainium-sim does not simulate it")
    raise AttributeError(f"module 'nki.language' has no attribute {name!r}")
