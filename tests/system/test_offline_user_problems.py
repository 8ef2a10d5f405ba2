"""Offline runs of problems a new user writes (issue 42): a gemmini-sim GEMM whose sizes 16 does not divide, and
trainium-sim problem files of no family (a row softmax, a scale + bias + ReLU) that the heuristic recognises from
their references. Each used to end with "no offline moves"; each now speeds up."""
from __future__ import annotations

import re

import pytest

from tests.system.runkit import ROOT, finish, launch

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

EXAMPLES = ROOT / "problems" / "examples"


@pytest.mark.parametrize("file, at_least", [
    ("gemmini-sim-edge/edge_gemm.toml", 5.0),            # blocked, pipelined edge tiles or padded loop-FSM blocks
    ("trainium-sim-rowwise/my_softmax.toml", 1.2),      # DMA-bound: prefetching and fused statistics
    ("trainium-sim-rowwise/my_bias_relu.toml", 1.1),    # DMA-bound: prefetching, ReLU on the Scalar engine
])
def test_a_new_users_problem_speeds_up_offline(tmp_path, file, at_least):
    proc = launch("run", "--problem-file", str(EXAMPLES / file), "--out", str(tmp_path / "run"), "--evaluators", "2")
    out = finish(proc)
    assert proc.returncode == 0, out
    assert "no offline moves" not in out
    speedup = float(re.search(r"Speedup: ([0-9.]+)x", out).group(1))
    assert speedup >= at_least, out
