"""Numerics of the trusted replayer: dtype rounding and the engines' ALU and activation functions.

Values live in float32 arrays (int32 tensors in int32); engines compute in fp32 as NeuronCore-v2's
Vector and Scalar engines do, and every write rounds to the destination's dtype: bf16 by
round-to-nearest-even of the upper 16 bits of the fp32 pattern, fp8 to its format's grid (fp8.py).
"""
from __future__ import annotations

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.fp8 import FORMATS as FP8, round_fp8

ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "int8": 1, "uint8": 1, "uint32": 4,
            "float8_e4m3": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}   # bytes per element
FLOATS = ("float32", "bfloat16", "float16", *FP8)     # held in float32 arrays


def to_bf16(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    r = bits >> np.uint32(16)           # in place from here on: one temporary instead of six (2x faster)
    r &= np.uint32(1)
    r += np.uint32(0x7FFF)
    r += bits
    r &= np.uint32(0xFFFF0000)
    out = r.view(np.float32)
    nan = np.isnan(x)                   # rounding a NaN's pattern can carry into infinity: NaN stays NaN
    if nan.any():
        np.copyto(out, x, where=nan)
    return out


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """Values as a tensor of `dtype` holds them (returned as the storage array type)."""
    if dtype == "float32":
        return np.asarray(x, dtype=np.float32)
    if dtype == "bfloat16":
        return to_bf16(x)
    if dtype == "float16":
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)
    if dtype in FP8:
        return round_fp8(x, dtype)
    info = np.iinfo(dtype)
    x = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0)
    return np.clip(np.trunc(x), info.min, info.max).astype(storage(dtype))


def storage(dtype: str) -> type:
    """The array type a dtype's values are held in: uint32's range needs 64-bit integers."""
    return np.float32 if dtype in FLOATS else np.int64 if dtype == "uint32" else np.int32


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def _erf(x):
    # Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7), numpy has no erf
    s = np.sign(x)
    a = np.abs(x)
    t = 1 / (1 + 0.3275911 * a)
    y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-a * a)
    return s * y


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / np.sqrt(2.0)))


UNARY = {
    "copy": lambda x: x, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "gelu": _gelu, "gelu_apprx_tanh": _gelu_tanh, "silu": lambda x: x / (1 + np.exp(-x)),
    "softplus": lambda x: np.logaddexp(0, x), "mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
    "sin": np.sin, "cos": np.cos, "arctan": np.arctan, "erf": _erf, "square": np.square, "sign": np.sign,
    "abs": np.abs, "negative": np.negative, "reciprocal": lambda x: 1 / x, "ceil": np.ceil, "floor": np.floor,
    "trunc": np.trunc, "logical_not": lambda x: (x == 0).astype(np.float32),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / np.sqrt(2.0))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
    "silu_dx": lambda x: (1 / (1 + np.exp(-x))) * (1 + x * (1 - 1 / (1 + np.exp(-x)))),
    "tan": np.tan, "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
    "gelu_apprx_sigmoid": lambda x: x / (1 + np.exp(-1.702 * x)),
}


def _int_op(f):
    # integers stay integers: a float32 result would round values past 2**24 (uint32 and int32 bit patterns)
    return lambda a, b: f(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "equal": lambda a, b: (a == b).astype(np.float32), "not_equal": lambda a, b: (a != b).astype(np.float32),
    "greater": lambda a, b: (a > b).astype(np.float32), "greater_equal": lambda a, b: (a >= b).astype(np.float32),
    "less": lambda a, b: (a < b).astype(np.float32), "less_equal": lambda a, b: (a <= b).astype(np.float32),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32),
    "bitwise_and": _int_op(np.bitwise_and), "bitwise_or": _int_op(np.bitwise_or),
    "bitwise_xor": _int_op(np.bitwise_xor),
    "mod": np.mod, "fmod": np.fmod,
    "left_shift": _int_op(lambda a, b: np.left_shift(a, np.clip(b, 0, 63))),
    "right_shift": _int_op(lambda a, b: np.right_shift(a, np.clip(b, 0, 63))),
}

REDUCE = {"add": np.sum, "maximum": np.max, "minimum": np.min, "multiply": np.prod, "mean": np.mean}
REDUCE_INITIAL = {"maximum": -np.inf, "minimum": np.inf}    # what a masked max/min starts from


def per_partition(v: np.ndarray, ndim: int) -> np.ndarray:
    """A (sets, P, 1) per-partition operand shaped to broadcast over every free axis of a tile."""
    return v.reshape(v.shape[:2] + (1,) * (ndim - 2)) if v.ndim > 1 else v


def core_shape(shape: tuple) -> tuple:
    """A shape without its trailing size-1 axes."""
    shape = tuple(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def free_aligned(vals: list) -> list:
    """Tile operands padded with size-1 free axes to a common rank: NKI broadcasts tiles partition-first
    ((P,) acts as (P, 1)), numpy from the right. Numbers pass through."""
    rank = max((np.ndim(v) for v in vals if isinstance(v, np.ndarray)), default=0)
    return [np.reshape(v, np.shape(v) + (1,) * (rank - np.ndim(v))) if isinstance(v, np.ndarray) else v
            for v in vals]


__all__ = ["BINARY", "FLOATS", "ITEMSIZE", "REDUCE", "REDUCE_INITIAL", "UNARY", "core_shape", "free_aligned", "per_partition",
           "round_to", "storage", "to_bf16"]
