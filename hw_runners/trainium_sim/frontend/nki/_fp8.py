"""nisa.nc_matmul's fp8 rules and its FP8 double performance mode (perf_mode=double_row), as the v2 front end
records them. Nothing here is trusted: the replayer re-checks the recorded matmul (fp8.py on the trusted side).

Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_matmul.html (the
stub of github.com/aws-neuron/aws-neuron-sdk nki/api/nki/isa/__init__.py: 'Performance mode', 'Data types',
'Layout') and the Trainium2 architecture guide's 'Double FP8 Matmul Performance'.
"""
from __future__ import annotations

from enum import Enum

from neuronxcc.nki import language as _nl1
from neuronxcc.nki._index import NKIError
from nki import _v2

FP8 = ("float8_e4m3", "float8_e4m3fn", "float8_e5m2")


class matmul_perf_mode(Enum):
    """nisa.matmul_perf_mode (the values of the nki stubs)."""
    none = "none"
    double_row = "double_row"


def _dtypes(s: str, m: str) -> None:
    """'float8_e4m3 (legacy) and float8_e4m3fn cannot be mixed in the same matmul'; 'if one of the input tiles is
    tfloat32/float32, the other tile must also be' (checked where an fp8 tile is involved)."""
    pair = {s, m}
    if {"float8_e4m3", "float8_e4m3fn"} <= pair:
        raise NKIError("nisa.nc_matmul: float8_e4m3 (legacy) and float8_e4m3fn (OCP) cannot be mixed in one matmul")
    if pair & set(FP8) and "float32" in pair:
        raise NKIError(f"nisa.nc_matmul: a float32 tile needs a float32 partner, got stationary {s} and moving {m}")


def perf_mode(mode, s, m, is_transpose, tile_size) -> bool:
    """Whether this nc_matmul runs in double_row mode, after checking what the mode requires."""
    _dtypes(s.dtype_name, m.dtype_name)
    if mode in (None, matmul_perf_mode.none, "none"):
        return False
    if mode not in (matmul_perf_mode.double_row, "double_row"):
        raise NKIError(f"nisa.nc_matmul: unknown perf_mode {mode!r}; use nisa.matmul_perf_mode.none or .double_row")
    platform = _v2.PLATFORM["name"]
    if platform == "trn1":
        raise NKIError("nisa.nc_matmul: perf_mode=double_row is not available on trn1: 'On NeuronCore-v2, "
                       "performance mode is not supported' (NeuronCore-v3/v4, trn2/trn3, have the FP8 double "
                       "performance mode)")
    if not {s.dtype_name, m.dtype_name} <= set(FP8):
        raise NKIError(f"nisa.nc_matmul: perf_mode=double_row takes fp8 stationary and moving tiles (nl.float8_e4m3, "
                       f"nl.float8_e5m2{', nl.float8_e4m3fn' if platform == 'trn3' else ''}), got "
                       f"{s.dtype_name} and {m.dtype_name}")
    if is_transpose:
        raise NKIError("nisa.nc_matmul: perf_mode=double_row cannot be combined with transpose mode")
    if tile_size and tuple(tile_size)[1:] not in ((), (128,)):
        raise NKIError("nisa.nc_matmul: perf_mode=double_row cannot be combined with column tiling mode")
    if len(s.shape) != 3 or len(m.shape) != 3 or s.shape[1] != 2 or m.shape[1] != 2:
        raise NKIError(f"nisa.nc_matmul: perf_mode=double_row takes a stationary [K, 2, M] and a moving [K, 2, N] "
                       f"tile: the contraction of 2K is split between the partitions and the first free dimension, "
                       f"which must be 2 (pad with zeros otherwise); got {s.shape} and {m.shape}")
    if s.shape[0] != m.shape[0] or s.shape[0] > 128 or s.shape[2] > 128 or m.shape[2] > 512:
        raise NKIError(f"nisa.nc_matmul: double_row tiles are at most stationary [128, 2, 128] and moving "
                       f"[128, 2, 512] with one partition size, got {s.shape} and {m.shape}")
    return True


def double_row_matmul(s, m):
    """Record the double_row matmul (fp32 [M, N] into a fresh PSUM tile; the caller redirects it into dst)."""
    return _nl1._compute("matmul", "pe", [s, m], {"acc": False, "perf": "double_row"}, "float32", _nl1.psum,
                         shape=(s.shape[2], m.shape[2]))
