"""The cuda target's verdict arithmetic: tolerances and NaN/Inf, run statistics, the clock check against reported
run times, and achieved rates against peaks."""
from __future__ import annotations

import numpy as np
import pytest

from autocomp_zmq.hw_runners.cuda.gpu import PEAKS
from autocomp_zmq.hw_runners.cuda.metrics import mismatch, performance, statistics, timing_doubt


def test_mismatch_names_the_worst_element_and_nan_inf():
    want = np.ones((4, 4), np.float32)
    assert mismatch("out", want + 1e-4, want, 1e-3, 1e-3) is None
    got = want.copy()
    got[2, 3] = 1.5
    assert "1 of 16 elements of out are outside the tolerance" in mismatch("out", got, want, 1e-3, 1e-3)
    assert "worst at [2, 3]: got 1.5" in mismatch("out", got, want, 1e-3, 1e-3)
    got[1, 1] = np.nan
    assert "NaN/Inf elements where the reference is finite (first at (1, 1))" in mismatch("out", got, want, 1, 1)
    assert "has shape [4]" in mismatch("out", want[0], want, 1, 1)


def test_statistics_are_in_microseconds():
    s = statistics([0.010, 0.011, 0.012, 0.013, 0.100])
    assert s["median_us"] == pytest.approx(12.0) and s["runs"] == 5 and s["min_us"] == pytest.approx(10.0)


def test_the_clock_check():
    times = [1.0] * 12                                  # ms
    ref = [2.0] * 12
    # the reference's loop took 0.2 s of which 24 ms were its runs: 176 ms around them
    assert timing_doubt(0.012 + 0.176, times, 0.2, ref, times[2:]) is None
    # reported 1 ms runs, but the judge's clock saw 2 s: the times are not the device's
    assert "the judge's clock saw 2.000 s" in timing_doubt(2.0, times, 0.2, ref, times[2:])
    # the reported median shaped below the typical run
    shaped = [0.5] * 6 + [1.8] * 4
    assert "bimodal" in timing_doubt(sum(shaped) / 1e3 + 0.176 + 0.002, [1.0, 1.0] + shaped, 0.2, ref, shaped)


def test_performance_against_h100_peaks():
    # a 4096^3 bf16 GEMM in 200 us: 687 TFLOP/s, 69% of 989.4
    flops, nbytes = 2 * 4096 ** 3, 3 * 4096 * 4096 * 2
    p = performance(200.0, flops, nbytes, "bfloat16", PEAKS["H100 SXM"])
    assert p["tflops"] == pytest.approx(687.2, rel=1e-3) and p["flops_fraction"] == pytest.approx(0.6946, rel=1e-3)
    assert p["bound"] == "compute" and 0 < p["roofline_fraction"] < 1
    fp32 = performance(200.0, flops, nbytes, "float32", PEAKS["H100 SXM"])
    assert fp32["peak_tflops"] == 67 and "tf32_fraction" in fp32
    assert "flops_fraction" not in performance(200.0, flops, nbytes, "float32", None)    # unknown GPU: rates only
