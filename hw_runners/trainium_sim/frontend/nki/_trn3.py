"""The NeuronCore-v4 (trn3) features AWS documents, and what trainium-sim does with each: modelled, or refused
by name with the reason (on trn3), or refused as not available (on trn1 / trn2). One table, so that no feature
is approximated silently and the refusals and the README say the same.

Source for all of them: the Trainium3 Architecture Guide for NKI,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/about/trainium3_arch.html, and each API's page.
"""
from __future__ import annotations

from neuronxcc.nki._index import NKIError
from nki import _v2

ARCH = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/about/trainium3_arch.html"
API = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/"

# name -> (how a kernel uses it, status, why / how); status: "modelled", "refused", "timing not modelled"
FEATURES = {
    "fast exponential": (
        "nisa.exponential", "refused",
        "NeuronCore-v4's Vector-engine exponential (exp(src - max_value) with a running sum in the Vector engine's "
        "reduction registers, about 4x the Scalar engine's exp throughput) has no cost figure published per "
        f"element and its reduction registers are not modelled; use nisa.activation(op=nl.exp) ({API}nki.isa."
        "exponential.html)"),
    "MX matmul": (
        "nisa.nc_matmul_mx", "refused",
        "microscaling (MXFP8 / MXFP4) matmul takes packed x4 dtypes and per-block e8m0 scales, which trainium-sim's "
        f"replayer does not hold; use nisa.nc_matmul on bf16 / fp8 tiles ({API}nki.isa.nc_matmul_mx.html)"),
    "MX quantization": (
        "nisa.quantize_mx", "refused",
        "quantizing to MX formats produces packed x4 data and e8m0 scales, which trainium-sim's replayer does not "
        f"hold ({API}nki.isa.quantize_mx.html)"),
    "MX dtypes": (
        "nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4, nl.float8_e8m0fnu", "refused",
        "packed 4-element MX dtypes (for nisa.nc_matmul_mx) and their e8m0 scales are not held by trainium-sim's "
        f"replayer ({API.rsplit('/generated', 1)[0]}/nki.language.html)"),
    "BF16 PSUM accumulation": (
        "nisa.nc_matmul(dst=<bfloat16 PSUM tile>)", "modelled",
        "the Tensor engine accumulates in FP32 and writes BF16 to PSUM, accumulating near memory with round-to-"
        "nearest-even (each matmul's FP32 result added to the BF16 value and rounded); a BF16 PSUM tile takes half "
        "the PSUM bytes of an FP32 one. Stochastic rounding is not modelled (no NKI argument selects it here)"),
    "background transpose": (
        "automatic (nisa.nc_transpose on the Tensor engine)", "timing not modelled",
        "on NeuronCore-v4 a Tensor-engine transpose runs in the background of another matmul or transpose; "
        "trainium-sim still queues it on the Tensor engine in program order (as on NeuronCore-v3), so kernels are "
        "accepted and their transposes timed conservatively (no overlap credited)"),
}


def refuse(feature: str, what: str):
    """The NKIError for a kernel that uses a NeuronCore-v4 feature trainium-sim does not simulate."""
    platform = _v2.PLATFORM["name"]
    if platform != "trn3":
        return NKIError(f"{what} is a NeuronCore-v4 feature ({feature}): it is available on trn3 only, not "
                        f"{platform} ({ARCH})")
    return NKIError(f"{what} ({feature}, NeuronCore-v4) is part of NKI v2 but trainium-sim does not simulate it: "
                    f"{FEATURES[feature][2]}")


# the public names each refused feature is reached by
REFUSED_ISA = {"exponential": "fast exponential", "nc_matmul_mx": "MX matmul", "quantize_mx": "MX quantization"}
REFUSED_DTYPES = {n: "MX dtypes" for n in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4",
                                            "float8_e8m0fnu")}
