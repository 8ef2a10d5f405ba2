"""neuronxcc.nki as trainium-sim provides it: kernels written for the Neuron SDK import this unchanged.
@nki.jit (and baremetal/benchmark/simulate_kernel) only mark the kernel; the evaluator traces it."""
from __future__ import annotations

import functools
import itertools
import math


class _Kernel:
    def __init__(self, fn, **options) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.options = fn, options

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __getitem__(self, grid):
        """kernel[g0, g1, ...](args): an SPMD launch grid, traced as a trn1 NeuronCore runs it: every instance
        in turn (row-major), each seeing its own nl.program_id; nl.shared_hbm tensors are shared by all."""
        return _Launch(self, grid)


class _Launch:
    MAX_INSTANCES = 4096

    def __init__(self, kernel: _Kernel, grid) -> None:
        from neuronxcc.nki._index import NKIError, _int
        grid = tuple(_int(g) for g in (grid if isinstance(grid, tuple) else (grid,)))
        if not grid or any(g < 1 for g in grid):
            raise NKIError(f"an SPMD launch grid needs positive sizes, got {grid}")
        if math.prod(grid) > self.MAX_INSTANCES:
            raise NKIError(f"an SPMD launch grid of {math.prod(grid):,} instances; at most {self.MAX_INSTANCES:,}")
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args, **kwargs):
        from neuronxcc.nki._index import NKIError
        from neuronxcc.nki._trace import RECORDER
        if RECORDER.grid:
            raise NKIError("an SPMD launch inside another launch's kernel")
        RECORDER.grid, RECORDER.shared, first = self.grid, [], None
        try:
            for ids in itertools.product(*(range(g) for g in self.grid)):
                RECORDER.program, RECORDER.shared_next = ids, 0
                result = self.kernel.fn(*args, **kwargs)
                first = result if first is None else first
        finally:
            RECORDER.grid, RECORDER.program, RECORDER.shared = (), (), []
        return first


def _decorator(func=None, **options):
    if func is None:
        return lambda fn: _Kernel(fn, **options)
    return _Kernel(func, **options)


jit = baremetal = benchmark = simulate_kernel = profile = trace = _decorator

from neuronxcc.nki import isa, language, typing  # noqa: E402
from neuronxcc.nki.language import constants as _constants  # noqa: E402,F401  (loaded before the sandbox's filter)
from neuronxcc.nki.typing import tensor  # noqa: E402

__all__ = ["jit", "baremetal", "benchmark", "simulate_kernel", "profile", "isa", "language", "typing", "tensor"]
