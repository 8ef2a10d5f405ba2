"""Gemmini's software library priced as the Autocomp paper measured it (issue 40): CPU-issued blocks with the
library's scalar work, about 6x below the hardware loop on GEMMs, and the scalar-work record a kernel can only
use to slow itself down. The published numbers: hw_runners/gemmini_sim/published.toml."""
from __future__ import annotations

import tomllib

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig

from .simkit import PROBLEM_DIR, REC_DECLS, assert_correct, assert_fails, forged, gemm, naive_with

PUBLISHED = PROBLEM_DIR.parent / "published.toml"
R_CPU = 14   # csrc/sim.h


def published() -> dict:
    return tomllib.loads(PUBLISHED.read_text())


def test_published_numbers_name_built_in_problems_and_are_ordered():
    problems = tomllib.loads((PROBLEM_DIR / "problems.toml").read_text())
    names = {"gemm-" + "x".join(map(str, g["dims"])) for g in problems["gemm"]} | \
            {"conv3x3-" + "-".join(map(str, c["dims"])) for c in problems["conv3x3"]}
    pub = published()
    assert len(pub["gemm"]) == 6 and {"chart", "abstract", "kernels"} <= set(pub["sources"])
    for row in pub["gemm"]:
        assert row["problem"] in names
        assert 1 < row["exo_unopt"] < row["exo_opt"] <= row["autocomp"] < row["hwloop"], row
    assert set(pub["conv"]["problems"]) <= names and pub["conv"]["exo_opt"] < pub["conv"]["autocomp"]


def test_library_defaults_are_the_papers_library():
    cfg = TimingConfig()
    assert cfg.library_hwloop == 0 and cfg.library_block_cycles > 0 and cfg.library_conv_block_cycles > 0
    with pytest.raises(ValueError, match="library_hwloop must be 0 .* or 1"):
        TimingConfig.from_dict({"library_hwloop": 2})


@pytest.mark.system
def test_the_library_is_as_slow_against_the_hardware_loop_as_the_paper_measured(sim):
    """Before: the library ran every tile on the loop FSM, as fast as the hardware loop (ratio 1.0); the chart
    puts it 6.0x below on this GEMM."""
    row = next(r for r in published()["gemm"] if r["problem"] == "gemm-512x512x512")
    p = sim.problem(row["problem"])
    lib = sim.evaluate(p, (PROBLEM_DIR / "gemm_library.c").read_text())
    hw = sim.evaluate(p, p.kernel_source("hwloop"))
    assert_correct(lib)
    assert_correct(hw)
    assert lib.feedback["fsm_instructions"] == 0
    assert abs(lib.latency / hw.latency / row["hwloop"] - 1) <= 0.25
    # the feedback names the cost, so a model reading it knows where the time went
    scalar = lib.feedback["cpu_scalar_cycles"]
    assert scalar == TimingConfig().library_block_cycles * (512 // 16) ** 3 and hw.feedback["cpu_scalar_cycles"] == 0
    assert f"Scalar code on the CPU kept it busy {scalar:,} cycles" in lib.feedback_text
    # mainline Gemmini's library (every tile on LOOP_WS) is one timing parameter away, and as fast as the loop
    mainline = get_target("gemmini-sim", timing={"library_hwloop": 1})
    fsm_lib = mainline.evaluate(p, (PROBLEM_DIR / "gemm_library.c").read_text())
    assert_correct(fsm_lib)
    assert fsm_lib.latency <= 1.05 * mainline.evaluate(p, p.kernel_source("hwloop")).latency


@pytest.mark.system
def test_the_conv_library_is_slower_than_the_hardware_loop(sim):
    p = sim.problem("conv3x3-14-128")
    lib = sim.evaluate(p, (PROBLEM_DIR / "conv_library.c").read_text())
    hw = sim.evaluate(p, p.kernel_source("hwloop"))
    assert_correct(lib)
    assert lib.feedback["fsm_instructions"] == 0 and lib.latency > 2 * hw.latency


@pytest.mark.system
def test_scalar_work_a_kernel_declares_only_adds_its_cycles(sim):
    """The record the library uses to charge its scalar code is callable by any kernel: it can only make the
    kernel slower, by exactly what it declares, and an oversized one is refused as malformed."""
    p = gemm(32, 32, 32)
    plain = sim.evaluate(p, naive_with(prelude=REC_DECLS))
    busy = sim.evaluate(p, naive_with(before="  " + forged(R_CPU, d="{5000}") + "\n", prelude=REC_DECLS))
    assert_correct(plain)
    assert_correct(busy)
    assert busy.latency == plain.latency + 5000
    huge = sim.evaluate(p, naive_with(before="  " + forged(R_CPU, d="{1u << 21}") + "\n", prelude=REC_DECLS))
    assert_fails(huge, "gemmini", "malformed trace record (CPU work 2097152)")
