"""nki (NKI v2, Neuron SDK 2.27+) as trainium-sim provides it: kernels written for today's Neuron SDK import
this unchanged (`import nki`, `import nki.language as nl`, `import nki.isa as nisa`).

Like neuronxcc.nki (NKI v1) beside it, it only records: both dialects append to one instruction stream
(neuronxcc/nki/_trace.py), which the trusted side validates, replays and times. @nki.jit only marks the kernel;
`kernel[n](...)` launches n instances (the LNC / SPMD bracket of nki.jit's reference,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.jit.html).
"""
from __future__ import annotations

from neuronxcc.nki import _Kernel, _decorator


def jit(fn=None, **kwargs):
    """NKI 0.3.0 refuses platform_target= ('set NEURON_PLATFORM_TARGET_OVERRIDE instead'); mode= is ignored.
    trainium-sim's platform is the evaluator's `platform` option."""
    if "platform_target" in kwargs:
        from neuronxcc.nki._index import NKIError
        raise NKIError("nki.jit(platform_target=...) was removed in NKI 0.3.0; the platform is the target option "
                       "`platform` (trn1, trn2, trn3) in trainium-sim")
    return _decorator(fn, **kwargs)


def simulate(kernel):
    """nki.simulate(kernel): runs the kernel as it is (trainium-sim is the simulator)."""
    return kernel if isinstance(kernel, _Kernel) else _Kernel(kernel)


benchmark = baremetal = profile = jit

from nki import isa, language, typing  # noqa: E402
from nki.typing import tensor  # noqa: E402

__all__ = ["jit", "simulate", "benchmark", "baremetal", "profile", "isa", "language", "typing", "tensor"]
