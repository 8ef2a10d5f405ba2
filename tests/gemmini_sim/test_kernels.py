"""The shipped GEMM kernels (naive, tuned, hwloop): correct on small custom
problems and on every GEMM of problems.toml, with the utilization ordering the
timing model is built to reproduce, and self-consistent metrics."""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.base import target_info
from autocomp_zmq.hw_runners.gemmini_sim.workloads import load_problems
from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig
from .simkit import assert_correct, conv, gemm, kernel

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

ROLES = ("naive", "tuned", "hwloop")


def check_metrics(r, p):
    cfg = TimingConfig()
    macs = p.dims["I"] * p.dims["J"] * p.dims["K"]
    assert r.utilization == pytest.approx(macs / (256 * r.latency))
    # No schedule beats the roofline: compute bound and compulsory traffic bound.
    assert r.latency >= macs / 256
    compulsory_read = p.dims["I"] * p.dims["K"] + p.dims["K"] * p.dims["J"]
    assert r.latency >= compulsory_read / cfg.dma_bytes_per_cycle
    assert 0 < r.roofline_fraction <= 1.0
    assert 0 < r.utilization <= 1.0
    assert r.bound in ("compute", "memory")
    fb = r.feedback
    assert fb["macs_issued"] >= macs
    assert fb["bytes_written"] >= p.dims["I"] * p.dims["J"]
    assert fb["bytes_read"] >= compulsory_read
    assert all(0 <= v <= 1.0 + 1e-9 for v in fb["busy"].values()), fb["busy"]
    assert f"Latency: {r.latency:,} cycles" in r.feedback_text


@pytest.mark.parametrize("dims", [(64, 64, 64), (128, 128, 128), (64, 128, 256), (128, 64, 192)],
                         ids=lambda d: "x".join(map(str, d)))
def test_small_gemms_all_kernels_correct_and_ordered(sim, dims):
    p = gemm(*dims)
    results = {role: sim.evaluate(p, kernel(role)) for role in ROLES}
    for role, r in results.items():
        assert_correct(r)
        check_metrics(r, p)
    u = {role: r.utilization for role, r in results.items()}
    assert u["naive"] < u["tuned"] < u["hwloop"], u
    assert results["naive"].latency > results["tuned"].latency > results["hwloop"].latency
    assert results["tuned"].feedback["cpu_issue_busy"] > 0.3   # CPU-issued: the CPU is busy issuing
    # Only the hwloop kernel hands work to the loop FSM.
    assert results["hwloop"].feedback["fsm_instructions"] > 0
    assert results["naive"].feedback["fsm_instructions"] == 0
    assert "issued by the hardware loop FSM" in results["hwloop"].feedback_text
    # The naive kernel moves each A and B tile once per use.
    ti, tj, tk = (d // 16 for d in dims)
    assert results["naive"].feedback["instructions"]["mvin"] == 2 * ti * tj * tk
    assert results["naive"].feedback["instructions"]["mvout"] == ti * tj


GEMMS = [p for p in load_problems("gemmini-sim", target_info("gemmini-sim").problems) if p.family == "gemm"]
BIG_MACS = 1 << 27  # above this only the (fast) hwloop kernel is run, to keep the suite quick


@pytest.mark.parametrize("problem", GEMMS, ids=[p.name for p in GEMMS])
def test_registry_gemms(sim, problem):
    """Every shipped GEMM: all three kernels correct and ordered (hwloop only for the largest)."""
    big = problem.dims["I"] * problem.dims["J"] * problem.dims["K"] > BIG_MACS
    roles = ("hwloop",) if big else ROLES
    results = {role: sim.evaluate(problem, problem.kernel_source(role)) for role in roles}
    for r in results.values():
        assert_correct(r)
        check_metrics(r, problem)
    if not big:
        u = [results[role].utilization for role in ROLES]
        assert u[0] < u[1] < u[2], u
    assert results["hwloop"].utilization > 0.95


def test_feedback_text_is_complete(sim):
    p = gemm(64, 64, 64)
    r = sim.evaluate(p, kernel("naive"))
    assert_correct(r)
    text = r.feedback_text
    for needle in ("Latency:", "Array utilization", "roofline", "Busy: load unit", "Data moved:",
                   "Scratchpad:", "Instructions:", "mvin", "preload"):
        assert needle in text, needle
    # In the execute queue every preload but the first overlaps the compute before it.
    assert r.feedback["instructions"]["preload"] == 64
    assert r.feedback["unfused_preloads"] == 1
    assert f"{r.feedback['unfused_preloads']:,} preloads of weights could not overlap the previous compute" in text
    assert r.to_dict()["latency"] == r.latency


def test_trace_file(sim, tmp_path):
    p = gemm(32, 32, 32)
    trace = tmp_path / "trace.txt"
    r = sim.evaluate(p, kernel("naive"), trace_path=trace)
    assert_correct(r)
    text = trace.read_text().splitlines()
    header = [line for line in text if line.startswith("#")]
    assert header[0].startswith("# gemmini-sim timing trace") and "sha256" in "\n".join(header)   # what and whence
    lines = [line for line in text if not line.startswith("#")]
    assert len(lines) == sum(r.feedback["instructions"].values())
    kinds = set()
    for line in lines:
        m = re.fullmatch(r"(\d+) (config|mvin|mvout|preload|compute) (cpu|fsm) (\d+) (\d+) (\d+)", line)
        assert m, line
        issue, start, end = (int(m.group(i)) for i in (4, 5, 6))
        assert issue <= start <= end <= r.latency
        kinds.add(m.group(2))
    assert kinds == {"config", "mvin", "mvout", "preload", "compute"}


def test_timing_parameters_change_cycles_not_results(sim):
    p = gemm(64, 64, 64)
    base = sim.evaluate(p, kernel("naive"))
    slow_cpu = get_target("gemmini-sim", timing={"cpu_issue_cycles": 40}).evaluate(p, kernel("naive"))
    slow_dma = get_target("gemmini-sim", timing={"dma_latency": 512}).evaluate(p, kernel("hwloop"))
    for r in (base, slow_cpu, slow_dma):
        assert_correct(r)
    assert slow_cpu.latency > base.latency
    assert slow_dma.latency > sim.evaluate(p, kernel("hwloop")).latency


CONVS = [p for p in load_problems("gemmini-sim", target_info("gemmini-sim").problems) if p.family == "conv3x3"]


@pytest.mark.parametrize("P,Cch", [(4, 16), (6, 32), (14, 32), (17, 16)])
def test_small_convs_all_kernels_correct_and_ordered(sim, P, Cch):
    p = conv(P, Cch)
    shipped = CONVS[0]
    results = {role: sim.evaluate(p, shipped.kernel_source(role)) for role in ROLES}
    for r in results.values():
        assert_correct(r)
        assert r.feedback["macs_issued"] >= 4 * P * P * Cch * 9 * Cch
        assert 0 < r.utilization <= 1 and 0 < r.roofline_fraction <= 1
    u = [results[role].utilization for role in ROLES]
    assert u[0] < u[1] < u[2], u


@pytest.mark.parametrize("problem", CONVS, ids=[p.name for p in CONVS])
def test_registry_convs(sim, problem):
    """Every shipped conv: hwloop correct; all three kernels on the smallest one."""
    roles = ROLES if problem.name == "conv3x3-14-128" else ("hwloop",)
    results = {role: sim.evaluate(problem, problem.kernel_source(role)) for role in roles}
    for r in results.values():
        assert_correct(r)
    if len(roles) == 3:
        u = [results[role].utilization for role in ROLES]
        assert u[0] < u[1] < u[2], u
    # out_dim 56/28/14 is not a multiple of 16: the last pixel strip of a row has fewer rows, which the
    # array processes in fewer cycles (at least 4), so the FSM stays near the roofline
    assert 0.85 < results["hwloop"].utilization <= 1.0
