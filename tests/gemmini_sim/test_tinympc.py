"""TinyMPC's ADMM workloads (Autocomp's admm-multifunction harnesses) as built-in fp32-4x4 problems: their
references, the harness's CPU helpers (executed and priced by the replayer, never by the kernel process),
running a kernel Autocomp's way (its body under the problem's signature) and, where an Autocomp checkout is at
hand (AUTOCOMP_SRC, else /tmp/ac), Autocomp's own sols/admm-multifunction kernels. The kernels written here are
this project's own."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.hw_runners.base import Problem, get_target
from autocomp_zmq.hw_runners.gemmini_sim.autocompbody import AutocompBodyError, solution_body, with_problem_signature
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.agent import GemminiHeuristic
from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES, INPUT_SETS

AUTOCOMP = Path(os.environ.get("AUTOCOMP_SRC", "/tmp/ac"))


def _dims(name):
    fam = next(f for f in FAMILIES.values() if f.dims_of(name) is not None)
    return fam, fam.dims_of(name)


# ---- references (fast) --------------------------------------------------------------------------------------

def test_the_forward_reference_is_the_harness_loop():
    """test1.c's gold: u[i] = -(Kinf x[i]) - d[i], x[i+1] = Adyn x[i] + Bdyn u[i], here on its 0/1 values."""
    fam, d = _dims("tinympc-forward-5")
    a, b, k, x, dd = fam.make_inputs(d, 3, "sparse")
    assert set(np.unique(a)) <= {0, 1} and x.shape == (6, 12, 1)
    xs, want = [x[0].astype(int)], []
    for i in range(5):
        u = [-sum(int(k[r][c]) * xs[-1][c][0] for c in range(12)) - int(dd[i][r][0]) for r in range(4)]
        want.append([[v] for v in u])
        xs.append([[sum(int(a[r][c]) * xs[-1][c][0] for c in range(12)) + sum(int(b[r][c]) * u[c] for c in range(4))]
                   for r in range(12)])
    assert np.array_equal(fam.reference(d, [a, b, k, x, dd]), np.array(want, dtype=np.float32))


def test_the_backward_reference_is_the_harness_loop():
    """test2.c's gold: for i = N-2..0: d[i] = Quu_inv^T (Bdyn^T p[i+1] + r[i]); p[i] = q[i] + AmBKt p[i+1] - Kinf^T r[i]."""
    fam, d = _dims("tinympc-backward-4")
    b, quu, k, ambkt, p, r, q = fam.make_inputs(d, 5, "small-values")
    assert fam.reference(d, [b, quu, k, ambkt, p, r, q]).shape == (3, 4, 1)
    pi, want = p[3].astype(np.int64), np.zeros((3, 4, 1), np.int64)
    for i in (2, 1, 0):
        want[i] = quu.astype(np.int64).T @ (b.astype(np.int64).T @ pi + r[i])
        pi = q[i] + ambkt.astype(np.int64) @ pi - k.astype(np.int64).T @ r[i]
    assert np.array_equal(fam.reference(d, [b, quu, k, ambkt, p, r, q]), want.astype(np.float32))


def test_the_u_reference_reads_kinf_transposed():
    fam, d = _dims("tinympc-u")
    kinf, x, dd = (np.arange(48, dtype=np.float32).reshape(12, 4), np.ones((12, 1), np.float32),
                   np.ones((4, 1), np.float32))
    assert np.array_equal(fam.reference(d, [kinf, x, dd])[:, 0], -kinf.sum(axis=0) - 1)


@pytest.mark.parametrize("name", ["tinympc-u", "tinympc-forward-5", "tinympc-backward-10"])
def test_inputs_stay_of_order_one(name):
    fam, d = _dims(name)
    for kind in INPUT_SETS:
        out = fam.reference(d, fam.make_inputs(d, 0, kind))
        assert out.dtype == np.float32 and np.isfinite(out).all()
        if kind == "full-range":
            assert np.abs(out).max() < 50   # the tolerance is absolute and relative at 1e-4


def test_horizons_have_limits():
    fam, d = _dims("tinympc-backward-1")
    assert "NHORIZON must be 2.." in fam.size_limit(d)


def test_the_heuristic_says_it_has_no_moves():
    p = Problem(name="tinympc-forward-5", target="gemmini-sim", family="tinympc_forward", dims={"NHORIZON": 5},
                description="", kernels={})
    assert "TinyMPC" in GemminiHeuristic.supports(p)


# ---- Autocomp's way of running a kernel (fast) ----------------------------------------------------------------

def test_the_body_goes_under_the_problems_signature():
    code = "c\nvoid solution(float a[4] float b[4]) {\n  /* } */ char s[] = \"{\"; x('}');\n  if (1) { y(); }\n}\n"
    assert solution_body(code) == "\n  /* } */ char s[] = \"{\"; x('}');\n  if (1) { y(); }\n"
    assert with_problem_signature(code, "void solution(float a[4], float b[4]);").startswith(
        "void solution(float a[4], float b[4]) {\n  /* } */")
    with pytest.raises(AutocompBodyError):
        solution_body("int main() { return 0; }")
    assert solution_body("static void my_solution(int) {}\nvoid solution(int x) { go(); }") == " go(); "


# ---- kernels that use the harness's CPU helpers (system) -------------------------------------------------------

SW_FORWARD = """
static float kx[4][1], nkx[4][1], nd[4][1], ax[12][1], bu[12][1];

static void block(const float *a, uint64_t stride, const float *v, uint32_t acc_row, bool accumulate) {
  config_ld(stride, 1.0f, DIM, 0);
  mvin(a, 0, DIM, DIM);
  mvin2(v, DIM, 1, DIM);
  preload(DIM, (1u << 31) | (accumulate ? 1u << 30 : 0) | acc_row, 1, DIM, 1, DIM);
  compute_preloaded(0, 0xffffffff, DIM, DIM, DIM, DIM);
}

void solution(float Adyn[12][12], float Bdyn[12][4], float Kinf[4][12], float x[NHORIZON + 1][12][1],
              float d[NHORIZON][4][1], float u[NHORIZON][4][1]) {
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(sizeof(float), 1.0f, DIM, 1);
  config_st(sizeof(float));
  for (int i = 0; i < NHORIZON; i++) {
    for (int k = 0; k < 12; k += DIM) block(&Kinf[0][k], 48, &x[i][k][0], 0, k > 0);
    mvout(kx, 1u << 31, 1, DIM);
    FENCE_1
    negate_matrix(kx, nkx, 4, 1);
    negate_matrix(d[i], nd, 4, 1);
    WRITE_U
    for (int r = 0; r < 12; r += DIM) {
      for (int k = 0; k < 12; k += DIM) block(&Adyn[r][k], 48, &x[i][k][0], 0, k > 0);
      mvout(&ax[r][0], 1u << 31, 1, DIM);
      block(&Bdyn[r][0], 16, &u[i][0][0], DIM, false);
      mvout(&bu[r][0], (1u << 31) | DIM, 1, DIM);
    }
    fence();
    add_matrix(ax, bu, x[i + 1], 12, 1);
  }
}
"""
GOOD = {"FENCE_1": "fence();", "WRITE_U": "add_matrix(nkx, nd, u[i], 4, 1);"}


def sw_forward(**changes) -> str:
    code = SW_FORWARD
    for k, v in {**GOOD, **changes}.items():
        code = code.replace(k, v)
    return code


@pytest.fixture(scope="module")
def forward3():
    return get_target("gemmini-sim").parametric("tinympc-forward-3")


@pytest.mark.system
@pytest.mark.parametrize("name", ["tinympc-u", "tinympc-forward-5", "tinympc-backward-10"])
def test_the_builtin_kernels_are_correct(sim, name):
    p = sim.parametric(name)
    assert sim.machine(p).name == "fp32-4x4"
    r = sim.evaluate(p, p.kernel_source("naive"))
    assert r.correct, r.error


@pytest.mark.system
def test_helpers_run_in_the_replayer_and_are_charged(sim, forward3):
    r = sim.evaluate(forward3, sw_forward())
    assert r.correct, r.error
    free = get_target("gemmini-sim", timing={"scalar_call_cycles": 0, "scalar_add_cycles": 0,
                                             "scalar_negate_cycles": 0}).evaluate(forward3, sw_forward())
    charged = 3 * (4 * 12 + 2 * 4 * 8 + 4 * 11 + 12 * 11)   # per step: 4 calls, 2 negates of 4, adds of 4 and 12
    assert free.correct and 0 < r.latency - free.latency <= charged


@pytest.mark.system
def test_a_helper_reading_an_unfenced_mvout_fails(sim, forward3):
    r = sim.evaluate(forward3, sw_forward(FENCE_1=""))
    assert not r.correct and "fence" in r.error and "negate_matrix" in r.error


@pytest.mark.system
def test_a_helper_reading_memory_nothing_wrote_fails(sim, forward3):
    r = sim.evaluate(forward3, sw_forward(FENCE_1="fence(); static float never[4][1]; negate_matrix(never, nkx, 4, 1);"))
    assert not r.correct and "neither a problem array nor data written by an mvout" in r.error


@pytest.mark.system
def test_the_kernels_own_cpu_loops_do_not_reach_the_output(sim, forward3):
    own = "for (int j = 0; j < 4; j++) u[i][j][0] = nkx[j][0] + nd[j][0];"
    r = sim.evaluate(forward3, sw_forward(WRITE_U=own))
    assert not r.correct and "never written" in r.error


@pytest.mark.system
def test_autocomp_body_takes_the_body_only(forward3):
    broken = sw_forward().replace("void solution(float Adyn[12][12], float Bdyn[12][4],",
                                  "c\nvoid solution(float Adyn[12][12], float Bdyn[12][4]")
    assert get_target("gemmini-sim").evaluate(forward3, broken).error_kind == "compile"
    # the helpers defined above solution() are dropped, as Autocomp drops them: inline the kernel's own
    inlined = broken.replace("block(", "gemmini_sim_block(")
    r = get_target("gemmini-sim", autocomp_body="1").evaluate(forward3, inlined)
    assert r.error_kind == "compile" and "gemmini_sim_block" in r.error


# ---- Autocomp's own kernels, where a checkout is at hand -------------------------------------------------------

WORKLOAD = {"0": "tinympc-u", "1": "tinympc-forward-5", "2": "tinympc-backward-10"}
# not runnable, and why: sol1_1.c has an empty body; sol0_unopt.c reads with mvin what an mvout just wrote,
# with no fence between (a DRAM race on Gemmini, whose queues are ordered only by local rows)
NOT_RUNNABLE = {"sol1_1.c": "fewer than the", "sol0_unopt.c": "with no fence() in between"}


@pytest.mark.system
def test_autocomps_admm_kernels(sim):
    folder = AUTOCOMP / "sols" / "admm-multifunction"
    if not folder.is_dir():
        pytest.skip(f"no Autocomp checkout at {AUTOCOMP} (set AUTOCOMP_SRC to a clone of github.com/ucb-bar/autocomp)")
    body = get_target("gemmini-sim", autocomp_body=True)
    unchanged, as_autocomp, failed = [], [], []
    for path in sorted(folder.glob("sol*.c")):
        p = sim.parametric(WORKLOAD[path.name[3]])
        if sim.evaluate(p, path.read_text()).correct:
            unchanged.append(path.name)
        r = body.evaluate(p, path.read_text())
        if r.correct:
            as_autocomp.append(path.name)
        elif NOT_RUNNABLE.get(path.name, "\0") not in (r.error or ""):
            failed.append(f"{path.name}: {r.error}")
    assert not failed, failed
    assert unchanged == ["sol2_opt_hw.c", "sol2_unopt_hw.c", "sol2_unopt_sw.c"]
    assert len(as_autocomp) == 8
