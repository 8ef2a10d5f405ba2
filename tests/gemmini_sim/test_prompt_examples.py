"""The prompt pack's examples are what models copy: each one is a correct kernel
on gemmini-sim, and the technique it shows pays off."""
from __future__ import annotations

from pathlib import Path

import pytest

from .simkit import assert_correct, conv, gemm

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

EXAMPLES = Path(__file__).resolve().parents[2] / "prompts" / "gemmini-sim" / "examples"
CASES = {"gemm_pipelined.c": gemm(128, 256, 128), "gemm_loop_ws.c": gemm(256, 128, 256),
         "conv3x3_bias_taps.c": conv(14, 64)}


def test_every_example_is_covered():
    assert sorted(p.name for p in EXAMPLES.glob("*.c")) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_is_correct_and_fast(run, name):
    p = CASES[name]
    r = run((EXAMPLES / name).read_text(), p)
    assert_correct(r)
    naive = run(p.kernel_source("naive"), p) if p.family == "gemm" else None
    if naive is not None:
        assert r.latency < naive.latency / 3, (r.latency, naive.latency)
    assert r.utilization > 0.5
