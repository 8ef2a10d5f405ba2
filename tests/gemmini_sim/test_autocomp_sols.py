"""Autocomp's Gemmini kernels run unchanged on gemmini-sim.

Autocomp (github.com/ucb-bar/autocomp) keeps its int8 Gemmini kernels in sols/{exo,exo-conv,gemm}/solN_*.c.
They are written against two things besides gemmini.h: the macros its harness harnesses/<type>/testN.c defines
around the kernel (MAT_DIM_I, A_MATRIX_NAME, ..., and for convs N, R, S, Q, STRIDE, INP_ROWS, ...), which every
problem's compiled environment now defines (workloads.py: harness_macros), and short forms of config_ld and
config_st that its prompts and kernels call with 3 or 4, 1 or 2 arguments (include/gemmini.h picks the form by
argument count).

Nothing of Autocomp's is copied here. The kernels below are this project's own, written to exercise each short
form and each harness macro, so CI covers the behaviour; when an Autocomp checkout is present (AUTOCOMP_SRC, else
/tmp/ac) its own kernels are also evaluated, each on the built-in problem of the shape its harness defines."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners.problemfile import read

from . import simkit
from .simkit import gemm

pytestmark = pytest.mark.system   # compiles and runs kernels

INCLUDE = Path(simkit.__file__).resolve().parents[2] / "hw_runners" / "gemmini_sim" / "csrc" / "include"


def assert_correct(r):
    assert r.correct, r.error[-3000:]


# ---- short forms -------------------------------------------------------------------------------------------

# Every product is accumulated twice and halved on the way out, so the result is right only if the two-argument
# config_st applies its second argument as the mvout scale; B is loaded in 64-column panels by mvin2, so it is
# right only if the three-argument config_ld configures the load state its last argument names (1) with 16-row
# block stride.
SHORT_FORMS = simkit.gemm_kernel("""
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, 0);            /* (dram_stride, scale, id): A, for mvin */
  config_ld(J, 1.0f, 1);            /* B, for mvin2 */
  config_st(J, 0.5f);               /* (dram_stride, scale) */
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += 4 * DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, 4 * DIM, DIM);      /* blocks at BANK_ROWS + 0, 16, 32, 48 */
        for (int t = 0; t < 4; t++)
          for (int twice = 0; twice < 2; twice++) {
            preload(BANK_ROWS + t * DIM, ACC_ADDR_BIT | (t * DIM) | (k || twice ? ACCUMULATE_BIT : 0),
                    DIM, DIM, DIM, DIM);
            compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
          }
      }
      mvout(&C[i][j], ACC_ADDR_BIT, 4 * DIM, DIM);
    }
  fence();
""")


def test_three_argument_config_ld_and_two_argument_config_st(run):
    assert_correct(run(SHORT_FORMS, gemm(32, 128, 48)))


def test_integer_dram_addresses_stay_warnings_as_on_gemminis_gcc(tmp_path):
    """Autocomp's kernels pass integers as DRAM pointers (mvout(uint64_t, ...)) and 2-D arrays as elem_t
    pointers: warnings on the gcc of Gemmini's toolchain and this host's, errors by default from gcc 14 on,
    which the flags below stand in for."""
    (tmp_path / "k.c").write_text(
        "void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {\n"
        "  uint64_t c = (uint64_t)&C[0][0];\n"
        "  mvout(c, ACC_ADDR_BIT, DIM, DIM);\n"
        "  tiled_matmul_auto(I, J, K, A, B, NULL, C, K, J, J, J, 1, 1, 1, NO_ACTIVATION, 1, 0, false,\n"
        "                    false, false, false, false, 0, WS);\n"
        "}\n")
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc on this host")
    out = subprocess.run([gcc, "-std=gnu11", "-fsyntax-only", "-Werror=int-conversion",
                          "-Werror=incompatible-pointer-types", f"-I{INCLUDE}", "-include", "gemmini.h",
                          "-DAUTOCOMP_GEMM", "-DI=16", "-DJ=16", "-DK=16", "k.c"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


# ---- harness macros ----------------------------------------------------------------------------------------

# The library call written with nothing but the harness's names; with a macro missing, undefined or wrong, it
# does not compile, trips a static assertion or leaves C unwritten.
HARNESS_GEMM = """
void solution(int8_t ARG_A[I][K], int8_t ARG_B[K][J], int8_t ARG_C[I][J]) {
  _Static_assert(MAT_DIM_I == I && MAT_DIM_J == J && MAT_DIM_K == K, "harness sizes");
  _Static_assert(A_ROWS == MAT_DIM_I && A_COLS == MAT_DIM_K && B_ROWS == MAT_DIM_K && B_COLS == MAT_DIM_J,
                 "operand shapes, untransposed");
  _Static_assert(!REPEATING_BIAS && !SUB_BIAS, "no bias tricks");
#if NO_BIAS && !A_TRANSPOSE && !B_TRANSPOSE
  tiled_matmul_auto(MAT_DIM_I, MAT_DIM_J, MAT_DIM_K, (elem_t *)A_MATRIX_NAME, (elem_t *)B_MATRIX_NAME, NULL,
                    (elem_t *)OUTPUT_MATRIX_NAME, A_COLS, B_COLS, MAT_DIM_J, MAT_DIM_J, MVIN_SCALE_IDENTITY,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, ACTIVATION, ACC_SCALE_IDENTITY, 0, false,
                    A_TRANSPOSE, B_TRANSPOSE, false, false, 0, WS);
#endif
  fence();
}
"""


def harness_gemm(a="A", b="B", c="C") -> str:
    return HARNESS_GEMM.replace("ARG_A", a).replace("ARG_B", b).replace("ARG_C", c)


def test_gemm_problems_define_the_harness_macros(run):
    assert_correct(run(harness_gemm(), gemm(48, 32, 80)))


def test_harness_matrix_names_follow_a_problem_files_own_argument_names(sim, tmp_path):
    """A problem file of the gemm family that calls its arrays X, W, Y: A_MATRIX_NAME is X, and so on."""
    (tmp_path / "my.toml").write_text(
        'name = "renamed-gemm"\ntarget = "gemmini-sim"\ndescription = "Y = X W"\nfamily = "gemm"\n'
        'signature = "void solution(int8_t X[I][K], int8_t W[K][J], int8_t Y[I][J])"\n'
        'dims = {I = 32, J = 48, K = 64}\nkernel = "k.c"\n'
        '[[inputs]]\nname = "X"\nshape = ["I", "K"]\ndtype = "int8"\n'
        '[[inputs]]\nname = "W"\nshape = ["K", "J"]\ndtype = "int8"\n'
        '[[outputs]]\nname = "Y"\nshape = ["I", "J"]\ndtype = "int8"\n')
    (tmp_path / "k.c").write_text(harness_gemm("X", "W", "Y"))
    problem = sim.problem_from_definition(read(tmp_path / "my.toml"))
    assert_correct(sim.evaluate(problem, harness_gemm("X", "W", "Y")))


HARNESS_CONV = """
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  _Static_assert(N == 4 && R == 3 && S == 3 && Q == P && STRIDE == 1, "harness sizes");
  _Static_assert(INP_ROWS == P + (R / 2) * 2 && INP_COLS == Q + (S / 2) * 2, "padded input");
  _Static_assert(!A_TRANSPOSE && !B_TRANSPOSE && !REPEATING_BIAS && !SUB_BIAS, "plain layouts");
  tiled_conv_auto(N, INP_ROWS, INP_COLS, C, K, P, Q, STRIDE, 1, 1, 0, R, false, false, false, false, false,
                  (elem_t *)INP_MATRIX_NAME, (elem_t *)WEIGHT_MATRIX_NAME,
                  NO_BIAS ? NULL : (acc_t *)BIAS_MATRIX_NAME, (elem_t *)OUTPUT_MATRIX_NAME,
                  ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, WS);
  fence();
}
"""


def test_conv_problems_define_the_harness_macros(run):
    # NO_BIAS is 0: these convolutions add the bias, so a kernel that honours the macro stays right
    assert_correct(run(HARNESS_CONV, simkit.conv(6, 32)))


# ---- Autocomp's own kernels, where a checkout is at hand -----------------------------------------------------

AUTOCOMP = Path(os.environ.get("AUTOCOMP_SRC", "/tmp/ac"))
KINDS = ("exo", "exo-conv", "gemm")
# Exo's raw output, kept by Autocomp beside the version it fixed (sol1_exo_opt.c): it indexes the 64-row B at row
# 16 * 256 (a flat offset used as a row index), reading 1 MiB past the array. It compiles and runs here, and fails
# the way that read deserves.
BROKEN = {"exo/sol1_exo_opt_unmodified.c"}


def _problem_name(kind: str, index: int) -> str:
    """The built-in problem of the shape Autocomp's harness testN.c defines."""
    text = (AUTOCOMP / "harnesses" / kind / f"test{index}.c").read_text()
    d = dict(re.findall(r"^\s*#define\s+(\w+)\s+(\d+)\s*$", text, re.M))
    if kind == "exo-conv":
        return f"conv3x3-{d['P']}-{d['C']}"
    return f"gemm-{d['MAT_DIM_I']}x{d['MAT_DIM_J']}x{d['MAT_DIM_K']}"


@pytest.mark.parametrize("kind", KINDS)
def test_autocomps_int8_kernels_run_unchanged(sim, kind):
    folder = AUTOCOMP / "sols" / kind
    if not folder.is_dir():
        pytest.skip(f"no Autocomp checkout at {AUTOCOMP} (set AUTOCOMP_SRC to one, e.g. a clone of "
                    "github.com/ucb-bar/autocomp, to evaluate its sols/{exo,exo-conv,gemm} kernels)")
    failed, ran = [], 0
    for path in sorted(folder.glob("sol*.c")):
        name = f"{kind}/{path.name}"
        problem = sim.problem(_problem_name(kind, int(re.match(r"sol(\d+)_", path.name).group(1))))
        r = sim.evaluate(problem, path.read_text())
        ran += 1
        if name in BROKEN:
            if r.correct or r.error_kind == "compile":
                failed.append(f"{name} on {problem.name}: expected to compile and fail, got "
                              f"{'correct' if r.correct else r.error[-800:]}")
        elif not r.correct:
            failed.append(f"{name} on {problem.name}: {r.error[-800:]}")
    assert ran, f"no sol*.c in {folder}"
    assert not failed, "\n\n".join(failed)
