"""Parametric trainium-sim problems (gemm-MxNxK, rmsnorm-MxN, layernorm-MxN, transpose-D0xBxN): the problem's own kernels
are correct at the sizes its name gives."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners import get_target

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]


@pytest.mark.parametrize("name", ["gemm-256x1024x384", "rmsnorm-384x1000", "rmsnorm-128x7168", "layernorm-256x1536",
                                  "layernorm-128x100", "transpose-3x384x640"])
def test_the_problem_kernels_are_correct_at_other_sizes(name):
    sim = get_target("trainium-sim")
    problem = sim.problem(name)
    assert "naive" in problem.kernels
    for role in problem.kernels:
        result = sim.evaluate(problem, problem.kernel_source(role))
        assert result.correct, (role, result.error)
