"""Whose trn1 DMA measurements the cost model follows (platforms.DMA_FIGURES, target option dma_figures): AWS's
DMA guide and tutorials by default, or the figures Autocomp's published gemm chain implies (fast tier)."""
from __future__ import annotations

import dataclasses

import pytest

from autocomp_zmq.hw_runners.trainium_sim import costmodel
from autocomp_zmq.hw_runners.trainium_sim.target import Options
from tests.trainium_sim.test_costmodel import Stream

AWS, AUTOCOMP = costmodel.params("trn1"), costmodel.params("trn1", "autocomp")


def load_ns(row_bytes: int, p: dict) -> float:
    """The DMA engines' time for one load of 128 partition rows of row_bytes contiguous bf16 bytes each."""
    s = Stream()
    x = s.tensor("hbm", (4096, 8192), "bfloat16")
    t = s.tensor("sbuf", (128, row_bytes // 2), "bfloat16")
    s.emit("dma", "dma", [s.at(t)], [s.at(x, (0, 128), (0, row_bytes // 2))])
    steps, _, _ = s.timed()
    assert steps[0].run_bytes == row_bytes
    occupancy, _ = costmodel.dma_ns(steps[0], p)
    return occupancy


def test_the_figures_differ_only_in_dma_entries_and_default_to_aws():
    assert costmodel.params() == AWS
    changed = {k for k in AWS if AWS[k] != AUTOCOMP[k]}
    assert changed and all(k.startswith("dma_") for k in changed)
    assert {f.name: f.default for f in dataclasses.fields(Options)}["dma_figures"] == "aws"


def test_autocomp_gemm_step_3_loads_fit_its_measured_time_only_with_its_own_figures():
    # Autocomp's gemm step 3 (examples/trn-tutorial/2_gemm_trace.py): 16,384 lhsT loads of 128 x 256 B rows and
    # 8,704 rhs loads of 128 x 1 KiB rows, measured at 8.07 ms in all (each load is spread over the 16 engines)
    def engines_ms(p: dict) -> float:
        return (16_384 * load_ns(256, p) + 8_704 * load_ns(1024, p)) / 1e6
    assert engines_ms(AUTOCOMP) < 8.07 < engines_ms(AWS)


def test_unknown_figures_and_figures_of_another_platform_are_refused():
    with pytest.raises(ValueError, match="unknown dma_figures"):
        costmodel.params("trn1", "mine")
    with pytest.raises(ValueError, match="trn1 measurements"):
        costmodel.params("trn2", "autocomp")
    with pytest.raises(ValueError, match="dma_figures must be one of"):
        Options(dma_figures="fast")
