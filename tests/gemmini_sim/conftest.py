from __future__ import annotations

import pytest
from . import simkit


@pytest.fixture
def run(sim):
    """run(code, problem=gemm-32x32x32, seed=0) -> EvalResult on the default target."""
    def _run(code: str, problem=None, seed: int = 0, **kw):
        return sim.evaluate(problem or simkit.gemm(32, 32, 32), code, seed=seed, **kw)
    return _run
