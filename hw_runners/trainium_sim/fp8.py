"""FP8 on the trusted side: the three NKI v2 fp8 dtypes held exactly (values rounded to each format's grid) and
the platform rules the replayer and cost model rely on.

Formats (the NKI dtype table, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.api.shared.html,
and the nki.language stubs of github.com/aws-neuron/aws-neuron-sdk nki/api/nki/language/__init__.py):
  float8_e4m3    (1S,4E,3M), Neuron's legacy e4m3: IEEE-style, exponent 1111 holds inf/NaN, so the largest finite
                 value is 1.875 * 2^7 = 240 (AWS's NxD quantization guide: 'the scale range ... -/+240 ... values
                 outside the range of -/+240 on Neuron devices result in NaNs'; it is ml_dtypes' float8_e4m3)
  float8_e4m3fn  (1S,4E,3M), OCP FP8: 'Extended range: no inf, NaN represented by 0bS111'1111'; largest 448
  float8_e5m2    (1S,5E,2M), IEEE-style: largest finite 1.75 * 2^15 = 57344, inf and NaN
Conversion from fp32 rounds to nearest, ties to even (the data-types guide, 'Rounding Modes': RNE by default on
trn1, 'the same ... rounding-mode behaviors' on trn2/trn3) and does not saturate: nki.isa.range_select says a
downcast of FP32_MIN to FP16/BF16/FP8 gives -INF. So an overflow is +-inf where the format has one and NaN in
float8_e4m3fn (which has no inf; the OCP standard's non-saturating conversion). Subnormals are kept (AWS
documents no flush). Values stay in float32 arrays: every fp8 value is exactly a float32.
"""
from __future__ import annotations

import numpy as np

# name: (mantissa bits, exponent bias, largest finite value, has inf)
FORMATS = {"float8_e4m3": (3, 7, 240.0, True), "float8_e4m3fn": (3, 7, 448.0, False),
           "float8_e5m2": (2, 15, 57344.0, True)}
DOUBLE_ROW = "double_row"


def _fail(message: str):
    """A StreamError (imported here: program.py imports ops.py, which imports this module)."""
    from autocomp_zmq.hw_runners.trainium_sim.program import StreamError
    raise StreamError(message)


def round_fp8(x, name: str) -> np.ndarray:
    """x (any float array) as float8 `name` holds it, returned as float32."""
    mant, bias, largest, has_inf = FORMATS[name]
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x)
    _, e = np.frexp(a)                                   # a = f * 2**e, f in [0.5, 1): floor(log2 a) = e - 1
    # the grid's spacing at a: 2**(exponent - mant), the exponent clamped to the smallest normal one (subnormals)
    step = np.maximum(e - 1, 1 - bias) - mant
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.ldexp(np.rint(np.ldexp(a, -step)), step)  # exact scaling by powers of two; rint: ties to even
    r = r.astype(np.float32)
    over = r > largest                                   # rounded past the largest finite value (inf included)
    if over.any():
        r[over] = np.inf if has_inf else np.nan
    nan = np.isnan(a)
    if nan.any():
        r[nan] = np.nan
    return np.copysign(r, x)


def check_platform(tensors, steps, p: dict, platform: str) -> None:
    """The fp8 rules that depend on the NeuronCore, checked on the decoded stream (whatever the front end said)."""
    if not p["float8_e4m3fn"]:
        for t in tensors:
            if t.dtype == "float8_e4m3fn" and t.buffer != "dead":
                at = f"kernel.py line {t.site}" if t.site else "an input or output"
                _fail(f"float8_e4m3fn (OCP FP8, {at}) is not supported on {platform}: "
                                  f"NeuronCore-v4 (trn3) and later only (compiler error NCC_EVRF051); use "
                                  f"float8_e4m3 or float8_e5m2")
    if platform != "trn3":
        # BF16 PSUM accumulation is a NeuronCore-v4 feature (frontend/nki/_trn3.py cites AWS's Trainium3 guide);
        # checked here too, so a stream the front end did not write meets it (a matmul that overwrites a bf16
        # PSUM tile, as NKI v1 kernels do, rounds its fp32 result once: no accumulation in bf16)
        for st in steps:
            if st.op == "matmul" and st.extra.get("acc") and st.writes[0].tensor.dtype != "float32":
                _fail(f"nisa.nc_matmul at kernel.py line {st.site} accumulates into a "
                      f"{st.writes[0].tensor.dtype} PSUM tile: on {platform} a matmul's PSUM result is float32 "
                      f"(BF16 PSUM accumulation is NeuronCore-v4, trn3, only)")
    if not p["matmul_double_row"]:
        for st in steps:
            if st.extra.get("perf") == DOUBLE_ROW:
                _fail(f"nisa.nc_matmul at kernel.py line {st.site}: perf_mode=double_row is not available "
                                  f"on {platform} (NeuronCore-v2 has no Tensor engine performance mode; "
                                  f"NeuronCore-v3/v4, trn2/trn3, have it)")


def matmul_dtypes(s: str, m: str, perf, what: str) -> None:
    """nisa.nc_matmul's data-type rules that involve fp8: 'float8_e4m3 (legacy) and float8_e4m3fn cannot be mixed
    in the same matmul'; 'if one of the input tiles is tfloat32/float32, the other tile must also be'; with
    double_row both are fp8."""
    pair = {s, m}
    if {"float8_e4m3", "float8_e4m3fn"} <= pair:
        _fail(f"{what}: float8_e4m3 (legacy) and float8_e4m3fn (OCP) cannot be mixed in one matmul")
    if pair & set(FORMATS) and "float32" in pair:
        _fail(f"{what}: a float32 operand needs a float32 partner (stationary {s}, moving {m})")
    if perf == DOUBLE_ROW and not pair <= set(FORMATS):
        _fail(f"{what}: perf_mode=double_row takes fp8 stationary and moving tiles (float8_e4m3, "
                          f"float8_e5m2, float8_e4m3fn), got {s} and {m}")
    if perf not in (None, "none", DOUBLE_ROW):
        _fail(f"{what}: unknown matmul performance mode {perf!r}")


def double_row_operands(s, m, what: str) -> tuple[int, int, int]:
    """(K, M, N) of a double_row matmul: stationary [K, 2, M] and moving [K, 2, N], the contraction of 2K split
    between the partitions and the first free axis, which must be 2 (Trainium2 architecture guide, 'Double FP8
    Matmul Performance'; nki.isa.nc_matmul 'Layout')."""
    if len(s.shape) != 3 or len(m.shape) != 3 or s.shape[1] != 2 or m.shape[1] != 2 or s.shape[0] != m.shape[0]:
        _fail(f"{what}: perf_mode=double_row takes stationary [K, 2, M] and moving [K, 2, N] tiles "
                          f"(the contraction split over K partitions and a first free axis of 2), got "
                          f"{s.shape} and {m.shape}")
    return s.shape[0], s.shape[2], m.shape[2]
