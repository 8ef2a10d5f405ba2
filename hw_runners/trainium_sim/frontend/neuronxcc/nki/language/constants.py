"""neuronxcc.nki.language.constants as trainium-sim provides it: dtypes, buffers, tile sizes and the
numeric constants NKI kernels name (nl.fp32.min, sizeinbytes(nl.bfloat16), ...)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as _np

from neuronxcc.nki._index import NKIError
from neuronxcc.nki._trace import ITEMSIZE, bfloat16, dtype_name

float32, float16, int32, int8, uint8, uint32 = _np.float32, _np.float16, _np.int32, _np.int8, _np.uint8, _np.uint32
tfloat32 = _np.float32          # fp32 data the Tensor engine multiplies at reduced precision: stored as fp32
bool_ = _np.uint8               # NKI's booleans are bytes

# buffers: where a tensor lives
sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"

tile_size = SimpleNamespace(pmax=128, gemm_stationary_fmax=128, gemm_moving_fmax=512, psum_fmax=512,
                            psum_partition_bytes=16384, sbuf_partition_bytes=196608, total_available_sbuf_size=196608,
                            bn_stats_fmax=512)

# the most negative finite values (what kernels use for "minus infinity" in masks and running maxima)
fp32 = SimpleNamespace(min=float(_np.finfo(_np.float32).min))
bfp16 = SimpleNamespace(min=-3.3895313892515355e38)


class par_dim(int):
    """Marks the partition dimension of an on-chip tensor's shape, e.g. (2, nl.par_dim(128), 512)."""


def sizeinbytes(dtype) -> int:
    """Bytes per element of a dtype (nl.float32: 4, nl.bfloat16: 2, ...)."""
    return ITEMSIZE[dtype_name(dtype)]


def finfo(dtype):
    """numpy's finfo for the float dtypes NKI has (bfloat16 included)."""
    name = dtype_name(dtype)
    if name == "bfloat16":
        return SimpleNamespace(bits=16, min=bfp16.min, max=-bfp16.min, eps=2.0 ** -7, tiny=2.0 ** -126,
                               dtype="bfloat16")
    if name not in ("float32", "float16"):
        raise NKIError(f"finfo takes a float dtype, not {name}")
    return _np.finfo(name)


__all__ = ["float32", "float16", "int32", "int8", "uint8", "uint32", "tfloat32", "bool_", "bfloat16", "sbuf", "psum", "hbm",
           "shared_hbm", "private_hbm", "tile_size", "fp32", "bfp16", "par_dim", "sizeinbytes", "finfo"]
