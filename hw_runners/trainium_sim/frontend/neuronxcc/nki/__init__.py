"""neuronxcc.nki as trainium-sim provides it: kernels written for the Neuron SDK import this unchanged.
@nki.jit (and baremetal/benchmark/simulate_kernel) only mark the kernel; the evaluator traces it."""
from __future__ import annotations

import functools


class _Kernel:
    def __init__(self, fn, **options) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.options = fn, options

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __getitem__(self, grid):
        # an SPMD launch grid: trainium-sim simulates one NeuronCore, program 0 of a one-program grid
        return self


def _decorator(func=None, **options):
    if func is None:
        return lambda fn: _Kernel(fn, **options)
    return _Kernel(func, **options)


jit = baremetal = benchmark = simulate_kernel = profile = trace = _decorator

from neuronxcc.nki import isa, language  # noqa: E402

__all__ = ["jit", "baremetal", "benchmark", "simulate_kernel", "profile", "isa", "language"]
