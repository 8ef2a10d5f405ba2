"""TimingConfig and the options of the gemmini-sim target."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES
from autocomp_zmq.hw_runners.gemmini_sim.target import CSRC, GemminiSim, Options
from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig
from autocomp_zmq.sandbox import Limits

from .simkit import (DOUBLED_BODY, NAIVE_BODY, assert_correct, assert_fails, gemm, gemm_kernel, sat8,
                     seed_where_doubled_fails_first_on)

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


# --------------------------------------------------------------------------- TimingConfig
def test_from_dict_defaults_and_overrides():
    assert TimingConfig.from_dict({}) == TimingConfig()
    cfg = TimingConfig.from_dict({"dma_latency": 128, "cpu_issue_cycles": 4})
    assert cfg.dma_latency == 128 and cfg.cpu_issue_cycles == 4 and cfg.spad_rows == 16384
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dma_latency = 1  # type: ignore[misc]


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(ValueError) as info:
        TimingConfig.from_dict({"dma_latency": 1, "warp_speed": 9, "flux": 1})
    msg = str(info.value)
    assert msg.startswith("unknown gemmini-sim timing parameters: flux, warp_speed; known: ")
    assert "dma_latency" in msg and "max_instructions" in msg


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(TimingConfig)])
@pytest.mark.parametrize("value", [0, -1])
def test_from_dict_rejects_non_positive_values(name, value):
    if (name in ("tile_latency", "mesh_output_delay") or name.startswith(("library_", "scalar_"))) and value == 0:
        # tile_latency 0: one register per PE hop; mesh_output_delay 0: FP32DefaultConfig's; library_hwloop 0:
        # the CPU-issued library; 0 scalar cycles
        assert getattr(TimingConfig.from_dict({name: 0}), name) == 0
        return
    with pytest.raises(ValueError, match=f"timing parameter {name} must be positive"):
        TimingConfig.from_dict({name: value})


def test_from_dict_rejects_uneven_banks_and_rows_that_cannot_wrap():
    with pytest.raises(ValueError, match="spad_rows and acc_rows must be multiples of their bank counts"):
        TimingConfig.from_dict({"spad_rows": 1024, "spad_banks": 3})
    with pytest.raises(ValueError, match=r"spad_rows must be a power of two \(row addresses wrap around\)"):
        TimingConfig.from_dict({"spad_rows": 1000, "spad_banks": 4})


@pytest.mark.parametrize("bad", [{"ex_rs": 0.5}, {"ld_rs": 2.5}, {"cpu_issue_cycles": "10"}, {"dma_latency": 64.0},
                                 {"st_rs": True}])
def test_from_dict_rejects_non_integer_values(bad):
    # 0.5 would pass 'must be positive' and reach the C model as int(0.5) = 0.
    (key, value), = bad.items()
    with pytest.raises(ValueError, match=f"timing parameter {key} must be an integer, not {re.escape(repr(value))}"):
        TimingConfig.from_dict(bad)


def test_derived_quantities():
    assert TimingConfig().dma_bytes_per_cycle == 12.8   # 16 requests of 64 bytes per 80-cycle round trip
    assert TimingConfig(dma_latency=64).dma_bytes_per_cycle == 16.0   # the bus's beat per cycle
    assert TimingConfig(dma_latency=128).dma_bytes_per_cycle == 8.0
    assert TimingConfig(dma_beat_bytes=8).dma_bytes_per_cycle == 8.0
    assert TimingConfig().macs_per_cycle == 256
    # scratchpad read 1 + 4, mesh input 1, skew 15, 16 PE hops, output delay 1, accumulator write 2
    assert TimingConfig().array_latency == 40


def test_every_timing_parameter_names_its_source():
    rows = TimingConfig.sources()
    assert [name for name, _, _ in rows] == [f.name for f in dataclasses.fields(TimingConfig)]
    for name, _, source in rows:
        assert len(source) > 30, name
        assert any(w in source for w in (".scala", "Estimate", "gemmini.h", "not hardware", "Calibrated", "Fitted")), name


def test_header_names_match_the_c_model():
    """Every parameter Python sends is one the harness knows, and vice versa."""
    cfg = TimingConfig()
    lines = cfg.header_lines()
    assert lines[0] == "cfg spad_rows 16384"
    sent = [line.split()[1] for line in lines]
    assert sent == [f.name for f in dataclasses.fields(TimingConfig)]
    job = (CSRC / "job.c").read_text()   # the job header is parsed by both processes
    known = [n for n in re.findall(r'FIELD\((\w+)\)', job) if n != "name"]
    assert known
    assert sorted(sent) == sorted(known)
    sim_h = (CSRC / "sim.h").read_text()
    for name in sent:
        assert re.search(rf"\b{name}\b", sim_h), name


def test_target_accepts_timing_dict_and_rejects_bad_one():
    t = get_target("gemmini-sim", timing={"dma_latency": 100})
    assert isinstance(t, GemminiSim) and t.options.timing.dma_latency == 100
    with pytest.raises(ValueError, match="unknown gemmini-sim timing parameters: bogus"):
        get_target("gemmini-sim", timing={"bogus": 1})
    with pytest.raises(TypeError):
        get_target("gemmini-sim", no_such_option=1)
    assert Options().run_limits.mem_bytes == 2 << 30 and Options().input_sets == 3


# --------------------------------------------------------------------------- options
def _hidden_set_is_right_for_doubled(p, secret: int) -> bool:
    a, b = (x.astype(np.int64) for x in FAMILIES["gemm"].make_inputs(p.dims, secret, "full-range"))
    return np.array_equal(sat8(2 * (a @ b)), sat8(a @ b))


def test_input_sets_option(sim):
    # The doubled kernel (same instructions for every set) with a seed where only set 3 shows its bug:
    # two public sets pass (and the hidden set decides), three catch it, four name "of 4" (set 4 is
    # full-range again).
    p = gemm(16, 16, 16)
    seed = seed_where_doubled_fails_first_on(p, 2)
    code = gemm_kernel(DOUBLED_BODY)
    lucky = next(s for s in range(1000) if _hidden_set_is_right_for_doubled(p, s))
    unlucky = next(s for s in range(1000) if not _hidden_set_is_right_for_doubled(p, s))
    two = get_target("gemmini-sim", input_sets=2, secret_seed=lucky)
    assert_correct(two.evaluate(p, gemm_kernel(NAIVE_BODY), seed=seed))
    assert_correct(two.evaluate(p, code, seed=seed))
    caught = get_target("gemmini-sim", input_sets=2, secret_seed=unlucky).evaluate(p, code, seed=seed)
    assert_fails(caught, "wrong_result", "wrong result on hidden input set 1 of 1 (full-range values")
    assert_fails(sim.evaluate(p, code, seed=seed), "wrong_result", "wrong result on input set 3 of 3 (small-values values)")
    four = get_target("gemmini-sim", input_sets=4).evaluate(p, code, seed=seed)
    assert_fails(four, "wrong_result", "wrong result on input set 3 of 4 (small-values values)")


@pytest.mark.parametrize("sets", [1, 0, -1, 2.5, "3", None])
def test_input_sets_must_be_an_integer_of_at_least_two(sets):
    # the checks that instructions and loaded constants do not depend on the data compare input sets
    with pytest.raises(ValueError, match="input_sets must be an integer >= 2"):
        Options(input_sets=sets)
    with pytest.raises(ValueError, match="input_sets must be an integer >= 2"):
        get_target("gemmini-sim", input_sets=sets)
    assert Options(input_sets=2).input_sets == 2


def test_work_directory_is_removed_or_kept(tmp_path):
    p = gemm(32, 32, 32)
    removed = tmp_path / "removed"
    removed.mkdir()
    assert_correct(get_target("gemmini-sim", work_root=removed).evaluate(p, gemm_kernel(NAIVE_BODY)))
    assert list(removed.iterdir()) == []
    kept = tmp_path / "kept"
    kept.mkdir()
    assert_correct(get_target("gemmini-sim", work_root=kept, keep_workdir=True).evaluate(p, gemm_kernel(NAIVE_BODY)))
    (work,) = kept.iterdir()
    assert work.name.startswith("gemmini-sim-")
    # what the compiler saw, what the kernel process saw, what only the replayer saw
    for name in ("build/kernel.c", "build/entry.c", "kernel/kernel", "kernel/diag.txt", "judge/job.bin",
                 "judge/out.bin", "judge/replay.txt"):
        assert (work / name).exists(), name
    assert (work / "build" / "kernel.c").read_text() == gemm_kernel(NAIVE_BODY)
    assert "void autocomp_entry(void **b) { solution(b[0], b[1], b[2]); }" in (work / "build" / "entry.c").read_text()
    stats = (work / "kernel" / "diag.txt").read_text()            # the kernel process's diagnostics
    assert "seccomp on" in stats and stats.rstrip().endswith("ok 1")
    assert sorted(p.name for p in (work / "kernel").iterdir() if not p.name.startswith(".")) == \
        ["diag.txt", "kernel", "stderr.txt", "stdout.txt"]
    replay = (work / "judge" / "replay.txt").read_text()   # the replayer's verdict and statistics
    assert replay.startswith("cycles ") and replay.rstrip().endswith("ok 1")
    assert (work / "judge" / "gemmini-replay").exists()
    assert (work / "judge" / "out.bin").stat().st_size == (3 + 1) * 32 * 32   # 3 public sets, 1 hidden


@pytest.mark.parametrize("name", ["work root", "work:root with spaces"])
def test_work_root_with_space(tmp_path, name):
    # launcher.c takes --fd N:r|w:PATH with anything after the second colon as the path
    root = tmp_path / name
    root.mkdir()
    r = get_target("gemmini-sim", work_root=root).evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    stray = tmp_path / "work"
    assert not stray.exists(), "the launcher wrote outside the work directory"
    assert_correct(r)


def test_compile_limits_apply(tmp_path):
    t = get_target("gemmini-sim", compile_limits=Limits(wall_s=0.05, cpu_s=1))
    r = t.evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    assert_fails(r, "compile", "compiler timed out after 0.05 s")


def test_timeouts_are_reported_with_the_configured_limit():
    t = get_target("gemmini-sim", run_limits=Limits(wall_s=1.5, cpu_s=30))
    r = t.evaluate(gemm(32, 32, 32), gemm_kernel("  unsigned sleep(unsigned); for (;;) sleep(1);\n" + NAIVE_BODY))
    assert_fails(r, "timeout", "kernel timed out after 1.5 s (wall-clock limit)")   # (it would sleep forever)
