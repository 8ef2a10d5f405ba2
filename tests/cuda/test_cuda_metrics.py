"""The cuda target's verdict arithmetic: run statistics, the clock checks of a candidate's timed runs against the
evaluator's windows and the reference's same runs, the floor the GPU's peaks set, and achieved rates against peaks."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.cuda import clock
from autocomp_zmq.hw_runners.cuda.gpu import PEAKS
from autocomp_zmq.hw_runners.cuda.metrics import performance, statistics, timed_as

SLACK = clock.Slack(rel=0.5, abs_ms=0.25, window_rel=1.0, window_abs_ms=2.0)


def run(window: float, gen: float = 1.0, bracket: float = 1.0, handover: float = 0.5, flush: float = 0.0):
    return clock.TimedRun(window, {"gen": gen, "flush": flush, "bracket": bracket, "handover": handover})


def test_statistics_are_in_microseconds():
    s = statistics([0.010, 0.011, 0.012, 0.013, 0.100])
    assert s["median_us"] == pytest.approx(12.0) and s["runs"] == 5 and s["min_us"] == pytest.approx(10.0)


def test_honest_runs_pass_and_say_what_each_check_measured():
    reference = [run(3.0, bracket=1.5) for _ in range(5)]
    candidate = [run(2.6, bracket=1.0) for _ in range(5)]
    why, table = clock.doubt(candidate, reference, SLACK)
    assert why is None
    assert table["gen"] == {"extra_ms": 0.0, "reference_ms": 1.0, "allowed_ms": 0.76}   # 0.5 x 1 + 0.25 + 1% of 1
    assert table["outside"]["extra_ms"] == pytest.approx(0.1)        # 2.6 - 1.0 against 3.0 - 1.5


def test_a_run_reporting_more_than_its_window_is_forged():
    why, _ = clock.doubt([run(3.0)] * 4 + [run(1.0)], [run(3.0)] * 5, SLACK)
    assert why.startswith("timed run 4 reports 2.500 ms of steps, but the judge's clock saw the whole run take 1.000 ms")


def test_work_moved_into_a_step_around_the_kernel_is_caught():
    reference = [run(3.0) for _ in range(5)]
    candidate = [run(4.9, gen=2.9, bracket=0.01) for _ in range(5)]
    why, _ = clock.doubt(candidate, reference, SLACK)
    assert why.startswith("making each run's inputs took 1.900 ms more than the reference's (the least over the runs "
                          "that make the latency: 2.900 ms")


def test_time_the_steps_do_not_account_for_is_caught():
    reference = [run(3.0) for _ in range(5)]
    candidate = [run(9.0, bracket=0.01) for _ in range(5)]
    why, _ = clock.doubt(candidate, reference, SLACK)
    assert why.startswith("each run's window outside the timed kernel took")


def test_runs_the_machine_disturbed_refuse_no_honest_kernel():
    # the machine slows down halfway: both children's runs take twice as long from then on, and bursts of other work
    # catch most of the candidate's runs
    reference = [run(3.0 * f, gen=1.0 * f) for f in (1, 1, 2, 2, 2, 2)]
    candidate = [run(3.0 * f, gen=1.0 * f) for f in (1, 1, 2, 2, 2, 2)]
    for k in (0, 2, 3, 5):
        candidate[k] = run(30.0, gen=20.0)
    assert clock.doubt(candidate, reference, SLACK)[0] is None


def test_work_split_between_steps_is_caught_in_the_window_outside_the_kernel():
    """Each of the fast runs hides 5 ms of work in a different step (or between them), so that no single step is
    always slow: the window outside the bracket still is."""
    reference = [run(3.0) for _ in range(6)]                       # 2 ms outside the bracket
    candidate = [run(8.01, gen=6.0, bracket=0.01), run(8.01, handover=5.5, bracket=0.01), run(8.01, bracket=0.01),
                 run(9.0, bracket=3.0), run(9.0, bracket=3.0), run(9.0, bracket=3.0)]
    why, table = clock.doubt(candidate, reference, SLACK)
    assert why.startswith("each run's window outside the timed kernel took"), why
    assert table["gen"]["extra_ms"] <= 0 and table["handover"]["extra_ms"] <= 0


def test_a_latency_below_what_the_gpus_peaks_allow_is_refused():
    h100 = PEAKS["H100 SXM"]
    io = {"inputs": 128 << 20, "weights": 0, "outputs": 128 << 20}      # a 4096 x 8192 fp32 softmax
    ideal, what = clock.ideal_us(167772160, io["inputs"], io["outputs"], h100)
    assert ideal == pytest.approx((128 << 20) * 2 / 3.35e12 * 1e6, rel=0.2) and "GB/s" in what
    assert clock.below_peaks(100.0, 167772160, io, h100) is None
    assert "below what the GPU's peaks allow" in clock.below_peaks(5.0, 167772160, io, h100)
    assert clock.below_peaks(5.0, 167772160, io, None) is None          # an unknown GPU: no floor
    # compute-bound: a 4096^3 GEMM's FLOPs at twice the FP16 rate (FP8) bound it from below
    gemm = {"inputs": 2 * 4096 * 4096 * 2, "weights": 0, "outputs": 4096 * 4096 * 2}
    assert "FLOPs" in clock.ideal_us(2 * 4096 ** 3, gemm["inputs"], gemm["outputs"], h100)[1]


def test_how_the_runs_were_timed_is_said():
    assert timed_as("cuda", "graph", None) == "CUDA-graph replays"
    eager = timed_as("cuda", "eager", "RuntimeError: operation not permitted when stream is capturing")
    assert "device-wide synchronize" in eager and "stream is capturing" in eager
    assert "not GPU times" in timed_as("cpu", "eager", None)


def test_performance_against_h100_peaks():
    # a 4096^3 bf16 GEMM in 200 us: 687 TFLOP/s, 69% of 989.4
    flops, nbytes = 2 * 4096 ** 3, 3 * 4096 * 4096 * 2
    p = performance(200.0, flops, nbytes, "bfloat16", PEAKS["H100 SXM"])
    assert p["tflops"] == pytest.approx(687.2, rel=1e-3) and p["flops_fraction"] == pytest.approx(0.6946, rel=1e-3)
    assert p["bound"] == "compute" and 0 < p["roofline_fraction"] < 1
    fp32 = performance(200.0, flops, nbytes, "float32", PEAKS["H100 SXM"])
    assert fp32["peak_tflops"] == 67 and "tf32_fraction" in fp32
    assert "flops_fraction" not in performance(200.0, flops, nbytes, "float32", None)    # unknown GPU: rates only
    assert performance(200.0, None, nbytes, "float32", PEAKS["H100 SXM"]) == {}         # unknown work: latency only
