"""Kernels written the way Gemmini users write them compile unchanged and are
bit-exact: Gemmini's software library (tiled_matmul_auto, tiled_matmul,
tiled_conv_auto) with its real signatures, a 23-argument gemmini_loop_ws
blocking with operand reuse, the extended configuration macros, performance
counters and gemmini_testutils.h."""
from __future__ import annotations

import re

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target

from .simkit import NAIVE_BODY, assert_correct, assert_fails, conv, gemm, gemm_kernel, mismatch_summary, reference

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

TILED_MATMUL_AUTO = """
  tiled_matmul_auto(I, J, K, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, K, J, J, J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, DATAFLOW);
"""


@pytest.fixture(params=[0, 1], ids=["cpu-issued-library", "library-on-loop-fsm"])
def library_run(request):
    """run() on the library as the paper measured it (CPU-issued, the default) and as mainline Gemmini's."""
    sim = get_target("gemmini-sim", timing={"library_hwloop": request.param})
    return lambda code, problem: (sim.evaluate(problem, code), request.param)


@pytest.mark.parametrize("dims", [(64, 64, 64), (40, 24, 56), (200, 72, 136), (32, 512, 16)],
                         ids=lambda d: "x".join(map(str, d)))
def test_tiled_matmul_auto(library_run, dims):
    # every dimension may end in a partial tile: the library pads, the CPU's blocks or the loop FSM mask
    p = gemm(*dims)
    r, hwloop = library_run(gemm_kernel(TILED_MATMUL_AUTO.replace("DATAFLOW", "WS")), p)
    assert_correct(r)
    assert (r.feedback["fsm_instructions"] > 0) == bool(hwloop)
    assert r.feedback["macs_issued"] >= dims[0] * dims[1] * dims[2]


@pytest.mark.parametrize("hwloop", [0, 1], ids=["cpu-issued-library", "library-on-loop-fsm"])
def test_tiled_matmul_full_c_then_int32_bias(hwloop):
    """K split in two library calls: the first writes int32 partial sums (full_C), the second adds them back
    as its bias D; both libraries must give the reference bit for bit (partial tiles in every dimension)."""
    body = """
  static int32_t T[I][J];
  tiled_matmul_auto(I, J, K / 2, (elem_t *)A, (elem_t *)B, NULL, (void *)T, K, J, J, J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, true, false, 0, WS);
  tiled_matmul_auto(I, J, K - K / 2, &A[0][K / 2], &B[K / 2][0], (void *)T, (elem_t *)C, K, J, J, J,
                    MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION,
                    ACC_SCALE_IDENTITY, 0, false, false, false, false, false, 0, WS);
"""
    sim = get_target("gemmini-sim", timing={"library_hwloop": hwloop})
    r = sim.evaluate(gemm(40, 24, 112), gemm_kernel(body))
    assert_correct(r)
    assert (r.feedback["fsm_instructions"] > 0) == bool(hwloop)


def test_tiled_matmul_auto_output_stationary(run):
    # OS runs on CPU-issued instructions (no loop FSM), with the same results
    r = run(gemm_kernel(TILED_MATMUL_AUTO.replace("DATAFLOW", "OS")), gemm(48, 32, 64))
    assert_correct(r)
    assert r.feedback["fsm_instructions"] == 0


def test_tiled_matmul_cpu_type_is_refused(run):
    r = run(gemm_kernel(TILED_MATMUL_AUTO.replace("DATAFLOW", "CPU")), gemm(32, 32, 32))
    assert_fails(r, "gemmini", "tiled_matmul with CPU computes on the CPU")


@pytest.mark.parametrize("tiles", [(1, 1, 1), (2, 3, 2), (4, 1, 3)])
def test_tiled_matmul_with_explicit_tiles(run, tiles):
    ti, tj, tk = tiles
    body = f"""
  tiled_matmul(I, J, K, (elem_t *)A, (elem_t *)B, NULL, (elem_t *)C, K, J, J, J, MVIN_SCALE_IDENTITY,
               MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, false,
               {ti}, {tj}, {tk}, false, false, false, false, 0, WS);
"""
    assert_correct(run(gemm_kernel(body), gemm(64, 48, 48)))


def test_tiled_matmul_auto_activation_and_scale(run):
    # act and scale go to config_st: the library's results are relu(round(0.5 * A*B)) saturated
    p = gemm(32, 32, 32)
    body = TILED_MATMUL_AUTO.replace("NO_ACTIVATION,\n                    ACC_SCALE_IDENTITY",
                                     "RELU,\n                    0.5f").replace("DATAFLOW", "WS")
    assert "RELU" in body and "0.5f" in body
    r = run(gemm_kernel(body), p)
    from .simkit import inputs
    a, b = (x.astype(np.int64) for x in inputs(p, 0, 0))
    got = np.clip(np.maximum(np.rint((a @ b) * 0.5), 0), -128, 127).astype(np.int8)
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


TILED_CONV_AUTO = """#include "include/gemmini.h"
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  tiled_conv_auto(4, P + 2, P + 2, C, K, P, P, 1, 1, 1, 0, 3, false, false, false, false, false,
                  &inp[0][0][0][0], &weights[0][0][0][0], &bias[0][0], &output[0][0][0][0], NO_ACTIVATION,
                  ACC_SCALE_IDENTITY, 0, 0, 0, WS);
}
"""


@pytest.mark.parametrize("P,Cch", [(14, 64), (10, 48), (7, 16)])
def test_tiled_conv_auto(library_run, P, Cch):
    r, hwloop = library_run(TILED_CONV_AUTO, conv(P, Cch))
    assert_correct(r)
    assert (r.feedback["fsm_instructions"] > 0) == bool(hwloop)
    assert r.feedback["macs_issued"] == 4 * P * P * Cch * 9 * Cch


def test_tiled_conv_with_padding(run):
    # padding 1 on the (P + 2) x (P + 2) input gives a (P + 2) x (P + 2) output whose interior P x P block
    # is the answer: the loop FSM turns the padding into zero mvins (DRAM address 0), and the kernel then
    # copies the interior through the scratchpad (after a fence: it reads what the FSM's mvouts wrote)
    code = """#include "include/gemmini.h"
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  static int8_t big[4][P + 2][P + 2][K];
  tiled_conv_auto(4, P + 2, P + 2, C, K, P + 2, P + 2, 1, 1, 1, 1, 3, false, false, false, false, false,
                  &inp[0][0][0][0], &weights[0][0][0][0], &bias[0][0], &big[0][0][0][0], NO_ACTIVATION,
                  ACC_SCALE_IDENTITY, 0, 0, 0, WS);
  gemmini_fence();
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended_config_st(K, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  for (int n = 0; n < 4; n++)
    for (int p = 0; p < P; p++)
      for (int q = 0; q < P; q++)
        for (int k = 0; k < K; k += DIM) {   /* copy the interior through the scratchpad */
          gemmini_extended_mvin(&big[n][p + 1][q + 1][k], 0, DIM, 1);
          gemmini_extended_mvout(&output[n][p][q][k], 0, DIM, 1);
        }
  gemmini_fence();
}
"""
    assert_correct(run(code, conv(6, 16)))


BLOCKED_LOOP_WS = """
  /* Gemmini-style blocking written by hand: 2x2-tile blocks, K in one call, A reused from the
   * scratchpad (NULL, a_spad_id) across the J blocks of a row of blocks. */
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended_config_st(J * sizeof(elem_t), NO_ACTIVATION, ACC_SCALE_IDENTITY);
  gemmini_extended3_config_ld(K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, 1);
  const size_t bI = 2, bJ = 2;
  for (size_t i = 0; i < I / DIM; i += bI)
    for (size_t j = 0; j < J / DIM; j += bJ)
      gemmini_loop_ws(bI, bJ, K / DIM, 0, 0, 0, j == 0 ? &A[i * DIM][0] : NULL, &B[0][j * DIM], NULL,
                      &C[i * DIM][j * DIM], K, J, 0, J, false, false, false, false, false, NO_ACTIVATION,
                      1, 2, false);
  gemmini_fence();
"""


def test_23_argument_loop_ws_blocking_with_reuse(run):
    # a_spad_id 1 puts A in the low half and b_spad_id 2 B at the end of the high half for every call,
    # so the A block loaded by the first call of a row stays for the others (A == NULL: not reloaded)
    r = run(gemm_kernel(BLOCKED_LOOP_WS), gemm(64, 96, 48))
    assert_correct(r)
    # 6 calls; A: 2 row tiles x 1 mvin (3 K tiles fit one 4-block mvin), only when j == 0 (2 calls);
    # B: 3 K tiles x 1 mvin (2 J tiles) in every call
    assert r.feedback["instructions"]["mvin"] == 2 * 2 + 6 * 3


EXTENDED_MACROS = """
  gemmini_flush(0);
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, ACC_SCALE_IDENTITY, 1, 1, false, false, false);
  gemmini_extended5_config_ld(K * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, DIM, 1, 0);
  gemmini_extended4_config_ld(J * sizeof(elem_t), MVIN_SCALE_IDENTITY, false, DIM, 1);
  gemmini_extended2_config_st(J * sizeof(elem_t), NO_ACTIVATION, ACC_SCALE_IDENTITY, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  static row_align(1) elem_t zeros[DIM][DIM];
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += 4 * DIM) {
      for (int k = 0; k < K; k += DIM) {
        gemmini_mvin(&A[i][k], 0);
        gemmini_extended_mvin2(&B[k][j], DIM, 4 * DIM, DIM);   /* 4 blocks, block stride DIM */
        for (int t = 0; t < 4; t++) {
          uint32_t acc = (1u << 31) | (t * DIM) | (k ? (1u << 30) : 0);
          gemmini_extended_preload(DIM + t * DIM, acc, DIM, DIM, DIM, DIM);
          gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      }
      gemmini_extended_mvout(&C[i][j], 1u << 31, 4 * DIM, DIM);   /* 4 blocks: accumulator rows 0, 16, 32, 48 */
    }
  gemmini_fence();
"""


def test_extended_configuration_macros(run):
    assert_correct(run(gemm_kernel(EXTENDED_MACROS), gemm(32, 64, 48)))
    # gemmini_block_mvin(dram, spad, len) is the 16-row, len-block mvin of load state 0
    body = EXTENDED_MACROS.replace("gemmini_mvin(&A[i][k], 0);", "gemmini_block_mvin(&A[i][k], 0, 1);")
    assert_correct(run(gemm_kernel(body), gemm(32, 64, 48)))


COUNTERS = """
  counter_reset();
  counter_configure(0, LOAD_ACTIVE_CYCLE);
  counter_configure(1, RDMA_BYTES_REC);
  counter_configure(2, EXE_ACTIVE_CYCLE);
  counter_configure(3, DMA_TLB_MISS_CYCLE);   /* not modelled: counts 0 */
  uint64_t start = read_cycles();
""" + NAIVE_BODY + """
  uint64_t end = read_cycles();
  printf("cycles %llu load %u bytes %u exe %u tlb %u\\n", (unsigned long long)(end - start), counter_read(0),
         counter_read(1), counter_read(2), counter_read(3));
"""


def test_performance_counters_and_read_cycles(run):
    p = gemm(32, 32, 32)
    r = run(gemm_kernel(COUNTERS, '#include "include/gemmini_testutils.h"\n'), p)
    assert_correct(r)
    lines = [line for line in r.stdout.splitlines() if line.startswith("cycles")]
    assert len(lines) == 3 and len(set(lines)) == 1, r.stdout   # every public input set sees the same counts
    cycles, load, nbytes, exe, tlb = (int(v) for v in re.findall(r"\d+", lines[0]))
    assert nbytes == r.feedback["bytes_read"] == 2 * 8 * 256      # 8 tiles of A and 8 of B, 256 bytes each
    assert 0 < load <= cycles and 0 < exe <= cycles and tlb == 0
    assert exe >= 8 * 16                                          # 8 computes of 16 rows at least
    assert cycles <= r.latency                                     # read before the final bookkeeping
