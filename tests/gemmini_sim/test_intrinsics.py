"""Semantics of single Gemmini intrinsics, tested through whole kernels.

The evaluator only compares the output array with numpy, so every kernel here
is built so that its result is right *only if* the intrinsic behaves as
documented in gemmini.h / functional.c (and most have a twin that relies on
the opposite behaviour and must be judged wrong). Local memories start with
noise, so reading rows that were never written cannot pass by accident.
Operands the CPU would have prepared from the inputs (transposed copies,
split or rounded values) are constant tables or made by the accelerator and
stored to DRAM scratch buffers by mvout, since the evaluator rejects mvins of
CPU-prepared data.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES

from .simkit import (DOUBLED_BODY, LOOP_CONFIG, NAIVE_BODY, assert_correct, assert_fails, c_table, cancel_kernel, cancel_prediction,
                     conv, doubled_prediction, gemm, gemm_kernel, inputs, mismatch_summary, reference, sat8,
                     loop_ws, seed_where_doubled_fails_first_on, stream_rule)

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


# --------------------------------------------------------------------------- baseline
def test_naive_template_is_correct(run):
    r = run(gemm_kernel(NAIVE_BODY))
    assert_correct(r)
    assert r.sandbox and "seccomp on" in r.sandbox
    assert r.feedback["macs_issued"] == 32 * 32 * 32
    assert r.feedback["instructions"]["compute"] == 2 * 2 * 2


# --------------------------------------------------------------------------- config_ld: block stride
BLOCK_STRIDE_KERNEL = """
  /* B panels of two tiles are loaded with one 32-column mvin; the second tile
   * lands BS rows after the first (spad_block_stride), not DIM rows after. */
  const uint32_t A_SP = 2 * BANK_ROWS, B_SP = 0, BS = K + DIM;
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, BS, 1);
  config_st(J);
  for (int jb = 0; jb < J; jb += 2 * DIM) {
    for (int k = 0; k < K; k += DIM) mvin2(&B[k][jb], B_SP + k, 2 * DIM, DIM);
    for (int i = 0; i < I; i += DIM)
      for (int t = 0; t < 2; t++) {
        for (int k = 0; k < K; k += DIM) {
          mvin(&A[i][k], A_SP, DIM, DIM);
          preload(B_SP + k + t * TILE_OFFSET, ACC_ADDR_BIT | (t * DIM) | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
          compute_preloaded(A_SP, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
        mvout(&C[i][jb + t * DIM], ACC_ADDR_BIT | (t * DIM), DIM, DIM);
      }
  }
  fence();
"""


def test_mvin_multi_block_lands_at_block_stride(run):
    r = run(gemm_kernel(BLOCK_STRIDE_KERNEL, "#define TILE_OFFSET BS"), gemm(32, 64, 32))
    assert_correct(r)


def test_mvin_multi_block_not_at_dim_when_block_stride_differs(run):
    # Same kernel assuming the blocks are DIM rows apart: must be wrong.
    r = run(gemm_kernel(BLOCK_STRIDE_KERNEL, "#define TILE_OFFSET DIM"), gemm(32, 64, 32))
    assert_fails(r, "wrong_result", "wrong result on input set 1 of 3", "first at C[")


def test_mvin_64_columns_default_block_stride(run):
    # 64-column mvins with the default block stride DIM: four consecutive tiles.
    body = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      mvin(&A[i][0], 0, 64, DIM);              /* A tiles k=0..3 at rows 0,16,32,48 */
      for (int k = 0; k < K; k += DIM) {
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(k, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""
    assert_correct(run(gemm_kernel(body), gemm(32, 32, 64)))


# --------------------------------------------------------------------------- config_ld: stride 0
def test_mvin_stride_zero_broadcasts_one_row(run):
    body = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(0, 1.0f, DIM, 0);           /* every row of the tile is the same DRAM row */
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      /* all 16 accumulator rows hold row i of C; take a different one each time */
      mvout(&C[i][j], ACC_ADDR_BIT | (i % DIM), DIM, 1);
    }
  fence();
"""
    assert_correct(run(gemm_kernel(body)))


# --------------------------------------------------------------------------- mvin from NULL
def test_mvin_null_zeroes_accumulator_rows(run):
    body = NAIVE_BODY.replace(
        "for (int k = 0; k < K; k += DIM) {",
        "mvin(NULL, ACC_ADDR_BIT, DIM, DIM);  /* zero the accumulator tile */\n"
        "      for (int k = 0; k < K; k += DIM) {").replace(
        "ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0)", "ACC_ADDR_BIT | ACCUMULATE_BIT")
    assert "mvin(NULL" in body and "(k ? ACCUMULATE_BIT : 0)" not in body
    assert_correct(run(gemm_kernel(body)))


def test_accumulating_onto_uninitialized_accumulator_is_wrong(run):
    # Without the NULL mvin the accumulator starts with noise (sim_reset fills it).
    body = NAIVE_BODY.replace("ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0)", "ACC_ADDR_BIT | ACCUMULATE_BIT")
    assert_fails(run(gemm_kernel(body)), "wrong_result", "first at C[0][0]")


def test_mvin_null_zeroes_scratchpad_rows_used_as_bias(run):
    body = NAIVE_BODY.replace(
        "compute_preloaded(0, GARBAGE_ADDR,", "compute_preloaded(0, 3 * BANK_ROWS,").replace(
        "config_st(J);", "config_st(J);\n  mvin(NULL, 3 * BANK_ROWS, DIM, DIM);  /* zero D tile */")
    assert "3 * BANK_ROWS," in body
    assert_correct(run(gemm_kernel(body)))


def test_uninitialized_scratchpad_bias_is_wrong(run):
    body = NAIVE_BODY.replace("compute_preloaded(0, GARBAGE_ADDR,", "compute_preloaded(0, 3 * BANK_ROWS,")
    assert_fails(run(gemm_kernel(body)), "wrong_result")


# --------------------------------------------------------------------------- accumulate bit
def test_missing_accumulate_bit_overwrites_and_is_reported_exactly(run):
    p = gemm(32, 32, 48)
    body = NAIVE_BODY.replace("ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0)", "ACC_ADDR_BIT")
    r = run(gemm_kernel(body), p)
    # Each tile keeps only the last K-block: predict the kernel's output and the message.
    a, b = inputs(p, 0, 0)
    got = sat8(a[:, 32:].astype(np.int64) @ b[32:, :].astype(np.int64))
    assert_fails(r, "wrong_result", "wrong result on input set 1 of 3 (full-range values): ",
                 mismatch_summary(got, reference(p, 0, 0)))


def test_off_by_one_tile_is_reported_exactly(run):
    p = gemm(32, 48, 32)
    body = NAIVE_BODY.replace("mvout(&C[i][j],", "mvout(&C[i][(j + DIM) % J],")
    r = run(gemm_kernel(body), p)
    want = reference(p, 0, 0)
    got = np.roll(want, 16, axis=1)  # tile column j ends up at j+1 (mod J/16)
    assert_fails(r, "wrong_result", mismatch_summary(got, want))


@pytest.mark.parametrize("set_index,label", [(0, "input set 1 of 3 (full-range values)"),
                                             (1, "input set 2 of 3 (sparse values)"),
                                             (2, "input set 3 of 3 (small-values values)")])
def test_wrong_result_names_the_failing_input_set(run, set_index, label):
    # The doubled kernel issues the same instructions for every set; it is wrong wherever 0 < |A*B| < 128.
    # Full-range sums nearly always saturate and sparse ones are mostly 0, so the seed decides which set
    # shows the bug first (numpy picks a seed for each case and predicts the exact message).
    p = gemm(16, 16, 16)
    seed = seed_where_doubled_fails_first_on(p, set_index)
    for earlier in range(set_index):
        assert np.array_equal(doubled_prediction(p, seed, earlier), reference(p, seed, earlier))
    r = run(gemm_kernel(DOUBLED_BODY), p, seed=seed)
    want = reference(p, seed, set_index)
    assert_fails(r, "wrong_result", f"wrong result on {label}: ",
                 mismatch_summary(doubled_prediction(p, seed, set_index), want))
    assert r.error.startswith(f"wrong result on {label}: "), r.error


SABOTAGE = """
  /* Inspect A on the CPU and drop the accumulate bit when it looks like one
   * particular input set: the instructions now depend on the input values. */
  int zeros = 0, maxabs = 0;
  for (int i = 0; i < I; i++)
    for (int k = 0; k < K; k++) {
      zeros += A[i][k] == 0;
      maxabs = abs(A[i][k]) > maxabs ? abs(A[i][k]) : maxabs;
    }
  const int sabotage = CONDITION;
""" + NAIVE_BODY.replace("ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0)", "ACC_ADDR_BIT | (k && !sabotage ? ACCUMULATE_BIT : 0)")


@pytest.mark.parametrize("condition,set_number", [("zeros > I * K / 2", 2), ("maxabs <= 10", 3)])
def test_data_dependent_instructions_are_rejected_naming_the_input_set(run, condition, set_number):
    # Only the sabotaged set issues different preload addresses: the evaluation fails with the stream
    # rule, naming that set, instead of reporting a wrong result (no output of any set is compared).
    r = run(gemm_kernel(SABOTAGE.replace("CONDITION", condition)), gemm(32, 32, 32))
    assert_fails(r, "gemmini", stream_rule(set_number))
    assert stream_rule(set_number) in r.error
    assert r.latency is None


# --------------------------------------------------------------------------- bit 29: full int32 mvout
FULL_SPLIT_K = """
  static int32_t T[I][J];
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K / 2; k += DIM) {                 /* first half of K -> acc row 0 */
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      config_st(J * sizeof(int32_t));
      mvout(&T[i][j], ACC_ADDR_BIT | FULL_READ_BIT, DIM, DIM); fence();   /* exact int32 partial */
      for (int k = K / 2; k < K; k += DIM) {                 /* second half -> acc row 16 */
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | DIM | (k > K / 2 ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      ADD_PARTIAL
      config_st(J);
      mvout(&C[i][j], ACC_ADDR_BIT | DIM, DIM, DIM);
    }
  fence();
"""


def test_full_int32_mvout_and_accumulating_mvin(run):
    add = ("config_ld(J * sizeof(int32_t), 1.0f, DIM, 2);\n"
           "      mvin3(&T[i][j], ACC_ADDR_BIT | ACCUMULATE_BIT | DIM, DIM, DIM);")
    assert_correct(run(gemm_kernel(FULL_SPLIT_K.replace("ADD_PARTIAL", add)), gemm(32, 32, 64)))


def test_mvout_without_full_bit_saturates_to_int8(run):
    # The same split through an int8 buffer: the partial sums are saturated by the mvout, loaded back
    # into the scratchpad (an mvin of what an mvout wrote is allowed) and added as the D operand of a
    # compute with zero weights (preload of GARBAGE_ADDR).
    p = gemm(32, 32, 64)
    add = ("config_ld(J, 1.0f, DIM, 2);\n"
           "      mvin3(&T8[i][j], 3 * BANK_ROWS, DIM, DIM);\n"
           "      preload(GARBAGE_ADDR, ACC_ADDR_BIT | ACCUMULATE_BIT | DIM, DIM, DIM, DIM, DIM);\n"
           "      compute_preloaded(0, 3 * BANK_ROWS, DIM, DIM, DIM, DIM);")
    body = FULL_SPLIT_K.replace("ADD_PARTIAL", add).replace(
        "mvout(&T[i][j], ACC_ADDR_BIT | FULL_READ_BIT, DIM, DIM);",
        "config_st(J);\n      mvout(&T8[i][j], ACC_ADDR_BIT, DIM, DIM);")
    assert "mvout(&T8" in body and "mvin3(&T8" in body and "&T[" not in body
    r = run(gemm_kernel(body, "static int8_t T8[I][J];"), p)
    a, b = (x.astype(np.int64) for x in inputs(p, 0, 0))
    got = sat8(sat8(a[:, :32] @ b[:32, :]).astype(np.int64) + a[:, 32:] @ b[32:, :])
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


def test_overwriting_mvin_into_accumulator_discards_previous_rows(run):
    # Without bit 30 the mvin replaces the second half's sums: result = first half only.
    p = gemm(32, 32, 64)
    add = ("config_ld(J * sizeof(int32_t), 1.0f, DIM, 2);\n"
           "      mvin3(&T[i][j], ACC_ADDR_BIT | DIM, DIM, DIM);")
    r = run(gemm_kernel(FULL_SPLIT_K.replace("ADD_PARTIAL", add)), p)
    a, b = inputs(p, 0, 0)
    got = sat8(a[:, :32].astype(np.int64) @ b[:32, :].astype(np.int64))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


def test_accumulator_mvin_scale_does_not_apply_to_int32_data(run):
    # Gemmini's default configuration has no scale unit for int32 data moved into the accumulator
    # (MVIN_SCALE_ACC is the identity): acc += 2*T then acc += -1*T adds T twice, and the result says why.
    add = ("config_ld(J * sizeof(int32_t), 2.0f, DIM, 2);\n"
           "      mvin3(&T[i][j], ACC_ADDR_BIT | ACCUMULATE_BIT | DIM, DIM, DIM);\n"
           "      config_ld(J * sizeof(int32_t), -1.0f, DIM, 2);\n"
           "      mvin3(&T[i][j], ACC_ADDR_BIT | ACCUMULATE_BIT | DIM, DIM, DIM);")
    p = gemm(32, 32, 64)
    r = run(gemm_kernel(FULL_SPLIT_K.replace("ADD_PARTIAL", add)), p)
    a, b = (x.astype(np.int64) for x in inputs(p, 0, 0))
    got = sat8(2 * (a[:, :32] @ b[:32, :]) + a[:, 32:] @ b[32:, :])
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


def test_accumulator_mvin_scale_not_ignored(run):
    # Two scale-1 mvins add the partial twice: wrong.
    add = ("config_ld(J * sizeof(int32_t), 1.0f, DIM, 2);\n"
           "      mvin3(&T[i][j], ACC_ADDR_BIT | ACCUMULATE_BIT | DIM, DIM, DIM);\n"
           "      mvin3(&T[i][j], ACC_ADDR_BIT | ACCUMULATE_BIT | DIM, DIM, DIM);")
    assert_fails(run(gemm_kernel(FULL_SPLIT_K.replace("ADD_PARTIAL", add)), gemm(32, 32, 64)), "wrong_result")


# --------------------------------------------------------------------------- scale on int8 mvin
# T in [-63, 100]: doubled it covers [-126, 200], so scale 2 must also saturate to 127.
SCALE_T = (np.arange(256).reshape(16, 16) * 37) % 164 - 63
SCALE_W = np.clip(2 * SCALE_T, -128, 127)


def test_mvin_scale_multiplies_int8_data(run):
    assert (2 * SCALE_T > 127).any() and (SCALE_T < 0).any()
    assert_correct(run(cancel_kernel(SCALE_T, -SCALE_W, "2.0f")))


def test_mvin_scale_is_per_config_ld_id(run):
    # Scale 2 configured (last) for id 2, scale 1 for id 1: mvin2 loads T itself.
    p = gemm(32, 32, 32)
    r = run(cancel_kernel(SCALE_T, -SCALE_W, "1.0f", "2.0f"), p)
    got = cancel_prediction(p, SCALE_T - SCALE_W)
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


# Every odd value -127..127 (twice): scale 0.5 makes each a tie.
ODD = 2 * (np.arange(256).reshape(16, 16) % 128) - 127
HALF_EVEN = np.rint(ODD * 0.5).astype(np.int64)                              # numpy rounds ties to even
HALF_AWAY = (np.sign(ODD) * np.floor(np.abs(ODD) * 0.5 + 0.5)).astype(np.int64)


def test_mvin_scale_rounds_half_to_even(run):
    assert (HALF_EVEN != HALF_AWAY).sum() == 128
    assert_correct(run(cancel_kernel(ODD, -HALF_EVEN, "0.5f")))


def test_mvin_scale_does_not_round_half_away_from_zero(run):
    p = gemm(32, 32, 32)
    r = run(cancel_kernel(ODD, -HALF_AWAY, "0.5f"), p)
    got = cancel_prediction(p, HALF_EVEN - HALF_AWAY)
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


# --------------------------------------------------------------------------- preload GARBAGE: weight reuse
WEIGHT_REUSE = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int j = 0; j < J; j += DIM) {
    for (int k = 0; k < K; k += DIM) {
      mvin2(&B[k][j], BANK_ROWS, DIM, DIM);          /* weights loaded once per (k, j) */
      for (int i = 0; i < I; i += DIM) {
        mvin(&A[i][k], i, DIM, DIM);
        uint32_t c = ACC_ADDR_BIT | i | (k ? ACCUMULATE_BIT : 0);
        if (i == 0) {
          preload(BANK_ROWS, c, DIM, DIM, DIM, DIM);
          compute_preloaded(i, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        } else {
          preload(GARBAGE_ADDR, c, DIM, DIM, DIM, DIM);   /* keep the weights in the array */
          SECOND_COMPUTE(i, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        }
      }
    }
    for (int i = 0; i < I; i += DIM) mvout(&C[i][j], ACC_ADDR_BIT | i, DIM, DIM);
  }
  fence();
"""


def test_garbage_preload_and_compute_accumulated_reuse_weights(run):
    r = run(gemm_kernel(WEIGHT_REUSE.replace("SECOND_COMPUTE", "compute_accumulated")), gemm(48, 32, 32))
    assert_correct(r)
    assert r.feedback["instructions"]["preload"] == 3 * 2 * 2


def test_garbage_preload_with_compute_preloaded_uses_zero_weights(run):
    p = gemm(48, 32, 32)
    r = run(gemm_kernel(WEIGHT_REUSE.replace("SECOND_COMPUTE", "compute_preloaded")), p)
    want = reference(p, 0, 0)
    got = want.copy()
    got[16:, :] = 0  # rows of tiles i > 0 were multiplied by zero weights
    assert_fails(r, "wrong_result", mismatch_summary(got, want))


# --------------------------------------------------------------------------- transposes
IDENTITY = c_table("ID", np.eye(16, dtype=np.int64))
# The transposed copies are made by the accelerator (the CPU may not prepare tensor data): each tile
# goes through the array with the *other* transpose flag and the identity, and is stored to a DRAM
# scratch buffer by mvout; mvin of what an mvout wrote is allowed. If either flag were ignored, the
# FLAG=true kernel or its FLAG=false twin would come out right where it must not.
TRANSPOSE_A = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, true);   /* B_transpose builds At */
  config_ld(K, 1.0f, DIM, 0);
  config_ld(DIM, 1.0f, DIM, 2);
  config_st(I);                           /* rows of At are I bytes apart */
  mvin3(ID, 3 * BANK_ROWS, DIM, DIM);
  for (int i = 0; i < I; i += DIM)
    for (int k = 0; k < K; k += DIM) {
      mvin(&A[i][k], 0, DIM, DIM);
      preload(0, ACC_ADDR_BIT, DIM, DIM, DIM, DIM);                 /* weights = A tile^T */
      compute_preloaded(3 * BANK_ROWS, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      mvout(&At[k][i], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, FLAG, false);
  config_ld(I, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&At[k][i], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""
TRANSPOSE_B = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, true, false);   /* A_transpose builds Bt */
  config_ld(J, 1.0f, DIM, 1);
  config_ld(DIM, 1.0f, DIM, 2);
  config_st(K);                           /* rows of Bt are K bytes apart */
  mvin3(ID, 3 * BANK_ROWS, DIM, DIM);
  for (int k = 0; k < K; k += DIM)
    for (int j = 0; j < J; j += DIM) {
      mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
      preload(3 * BANK_ROWS, ACC_ADDR_BIT, DIM, DIM, DIM, DIM);
      compute_preloaded(BANK_ROWS, GARBAGE_ADDR, DIM, DIM, DIM, DIM);   /* B tile^T x identity */
      mvout(&Bt[j][k], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, FLAG);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(K, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&Bt[j][k], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""


def tiles_transposed(x: np.ndarray) -> np.ndarray:
    """x with every 16x16 tile transposed in place."""
    r, c = x.shape
    return x.reshape(r // 16, 16, c // 16, 16).transpose(0, 3, 2, 1).reshape(r, c)


@pytest.mark.parametrize("body,prelude", [(TRANSPOSE_A, "static int8_t At[K][I];"),
                                          (TRANSPOSE_B, "static int8_t Bt[J][K];")], ids=["A_T", "B_T"])
def test_transposed_operands(run, body, prelude):
    p = gemm(32, 48, 64)
    assert_correct(run(gemm_kernel(body.replace("FLAG", "true"), IDENTITY + prelude), p))
    # The same transposed data without the flag is multiplied the wrong way round, tile by tile.
    r = run(gemm_kernel(body.replace("FLAG", "false"), IDENTITY + prelude), p)
    a, b = (x.astype(np.int64) for x in inputs(p, 0, 0))
    got = sat8(tiles_transposed(a) @ b if body is TRANSPOSE_A else a @ tiles_transposed(b))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


# --------------------------------------------------------------------------- D operand (bias) of compute
D_BIAS = """
  /* acc = A*B + D with D = the A tile, then acc += A * (-I) removes it again.
   * -I is filled by the CPU, but it is the same in every input set: allowed. */
  for (int d = 0; d < DIM; d++) negI[d][d] = -1;
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_ld(DIM, 1.0f, DIM, 2);
  config_st(J);
  mvin3(negI, 3 * BANK_ROWS, DIM, DIM);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, D_ADDR, DIM, DIM, DIM, DIM);
        preload(3 * BANK_ROWS, ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""


def test_compute_adds_d_operand(run):
    assert_correct(run(gemm_kernel(D_BIAS.replace("D_ADDR", "0"), "static int8_t negI[DIM][DIM];")))


def test_compute_without_d_operand_differs(run):
    p = gemm(32, 32, 32)
    r = run(gemm_kernel(D_BIAS.replace("D_ADDR", "GARBAGE_ADDR"), "static int8_t negI[DIM][DIM];"), p)
    a, b = (x.astype(np.int64) for x in inputs(p, 0, 0))
    # every K-block subtracted its own A tile from each output tile of the row
    got = sat8(a @ b - np.tile(a[:, :16] + a[:, 16:32], (1, 2)))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


# --------------------------------------------------------------------------- results written to the scratchpad
SPAD_RESULT = """
  config_ex(WEIGHT_STATIONARY, ACT, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      mvin(&A[i][0], 0, DIM, DIM);
      mvin2(&B[0][j], BANK_ROWS, DIM, DIM);
      preload(BANK_ROWS, 2 * BANK_ROWS, DIM, DIM, DIM, DIM);   /* C is a scratchpad address */
      compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      mvout(&C[i][j], 2 * BANK_ROWS, DIM, DIM);
    }
  fence();
"""


def test_compute_into_scratchpad_saturates_to_int8(run):
    assert_correct(run(gemm_kernel(SPAD_RESULT.replace("ACT", "NO_ACTIVATION")), gemm(32, 32, 16)))


def relu_prediction(p):
    want = reference(p, 0, 0)
    return np.maximum(want, 0).astype(np.int8), want


@pytest.mark.parametrize("variant", ["mvout_from_accumulator", "scratchpad_writeback", "loop_ws"])
def test_relu_zeroes_exactly_the_negative_results(run, variant):
    p = gemm(32, 32, 16)
    if variant == "mvout_from_accumulator":   # the mvout activation is config_st's
        code = gemm_kernel(NAIVE_BODY.replace("config_st(J);", "config_st_act(J, RELU);"))
    elif variant == "scratchpad_writeback":   # results the array writes into the scratchpad: config_ex's
        code = gemm_kernel(SPAD_RESULT.replace("ACT", "RELU"))
    else:                                     # the loop FSM stores with config_st too
        code = gemm_kernel(LOOP_CONFIG.replace("NO_ACTIVATION", "RELU") + "  " +
                           loop_ws("I / DIM", "J / DIM", "K / DIM", "&A[0][0]", "&B[0][0]", "NULL", "&C[0][0]") +
                           "\n  fence();")
    got, want = relu_prediction(p)
    r = run(code, p)
    assert_fails(r, "wrong_result", mismatch_summary(got, want), "expected -")
    assert ": got 0, expected -" in r.error


# --------------------------------------------------------------------------- output-stationary dataflow
OS_KERNEL = """
  config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  int t = 0;
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM, t++) {
      uint32_t c = ACC_ADDR_BIT | (t * DIM);
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        if (k == 0) {
          preload(BIAS, c, DIM, DIM, DIM, DIM);                       /* new output tile */
          compute_preloaded(0, BANK_ROWS, DIM, DIM, DIM, DIM);        /* second address is B */
        } else {
          preload(GARBAGE_ADDR, GARBAGE_ADDR, DIM, DIM, DIM, DIM);    /* keep accumulating in the PEs */
          compute_accumulated(0, BANK_ROWS, DIM, DIM, DIM, DIM);
        }
      }
    }
  fence();                                                              /* flushes the last tile */
  t = 0;
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM, t++) mvout(&C[i][j], ACC_ADDR_BIT | (t * DIM), DIM, DIM);
  fence();
"""


def test_output_stationary_dataflow(run):
    assert_correct(run(gemm_kernel(OS_KERNEL.replace("BIAS", "GARBAGE_ADDR")), gemm(32, 48, 48)))


def test_output_stationary_preload_of_d_initializes_the_tile(run):
    # D = a zero tile (mvin from NULL) is fine; D = an uninitialized (noise) tile is not.
    body = OS_KERNEL.replace("BIAS", "3 * BANK_ROWS")
    zeroed = body.replace("config_st(J);", "config_st(J);\n  mvin(NULL, 3 * BANK_ROWS, DIM, DIM);", 1)
    assert_correct(run(gemm_kernel(zeroed)))
    assert_fails(run(gemm_kernel(body)), "wrong_result")


# --------------------------------------------------------------------------- gemmini_loop_ws
def test_loop_ws_with_padding(run):
    # 40x24x20: every dimension ends in a partial tile.
    body = LOOP_CONFIG + "  " + loop_ws("(I + DIM - 1) / DIM", "(J + DIM - 1) / DIM", "(K + DIM - 1) / DIM",
                                        "&A[0][0]", "&B[0][0]", "NULL", "&C[0][0]",
                                        pads="(DIM - I % DIM) % DIM, (DIM - J % DIM) % DIM, (DIM - K % DIM) % DIM") + \
        "\n  fence();\n"
    r = run(gemm_kernel(body), gemm(40, 24, 20))
    assert_correct(r)
    assert r.feedback["macs_issued"] == 40 * 24 * 20
    assert r.feedback["fsm_instructions"] > 0


# A C == NULL loop leaves its sums in the accumulator half it used (the half only switches after a loop
# that stores), and the next loop adds onto them with ex_accumulate.
LOOP_SPLIT_K = LOOP_CONFIG + "  " + loop_ws("I / DIM", "J / DIM", "K / 2 / DIM", "&A[0][0]", "&B[0][0]", "NULL", "NULL") + \
    "\n  " + loop_ws("I / DIM", "J / DIM", "K / 2 / DIM", "&A[0][K / 2]", "&B[K / 2][0]", "NULL", "&C[0][0]",
                     ex_acc="EX_ACC") + "\n  fence();\n"


def test_loop_ws_ex_accumulate_continues_partial_sums(run):
    assert_correct(run(gemm_kernel(LOOP_SPLIT_K.replace("EX_ACC", "true")), gemm(32, 32, 64)))


def test_loop_ws_without_ex_accumulate_drops_partial_sums(run):
    p = gemm(32, 32, 64)
    r = run(gemm_kernel(LOOP_SPLIT_K.replace("EX_ACC", "false")), p)
    a, b = inputs(p, 0, 0)
    got = sat8(a[:, 32:].astype(np.int64) @ b[32:, :].astype(np.int64))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


LOOP_CHAIN = LOOP_CONFIG.replace("J, NO_ACTIVATION", "J, CHAIN_ACT") + """
  /* one call per K tile; every call but the last leaves its sums in the accumulator, every call but
   * the first continues them (ex_accumulate) */
  for (int rep = 0; rep < REPS; rep++)
    for (int k = 0; k < K; k += DIM) {
      int last = k + DIM >= K;
      """ + loop_ws("(I + DIM - 1) / DIM", "(J + DIM - 1) / DIM", "1", "&A[0][k]", "&B[k][0]", "NULL",
                    "last ? (void *)&C[0][0] : NULL", ex_acc="k > 0",
                    pads="(DIM - I % DIM) % DIM, (DIM - J % DIM) % DIM, last ? (DIM - K % DIM) % DIM : 0") + """
    }
  fence();
"""


@pytest.mark.parametrize("reps", [1, 2])
def test_loop_ws_ex_accumulate_chain_over_padded_k_tiles(run, reps):
    # 40x24x56: four chained calls, the last with a partial K tile, partial I and J tiles in each; a second
    # chain after a stored one starts afresh.
    p = gemm(40, 24, 56)
    r = run(gemm_kernel(LOOP_CHAIN.replace("REPS", str(reps)).replace("CHAIN_ACT", "NO_ACTIVATION")), p)
    assert_correct(r)
    assert r.feedback["macs_issued"] >= reps * 40 * 24 * 56
    assert r.feedback["fsm_instructions"] > 0


def test_loop_ws_ex_accumulate_chain_applies_act_when_it_stores(run):
    p = gemm(32, 32, 48)
    r = run(gemm_kernel(LOOP_CHAIN.replace("REPS", "1").replace("CHAIN_ACT", "RELU")), p)
    got, want = relu_prediction(p)
    assert_fails(r, "wrong_result", mismatch_summary(got, want), ": got 0, expected -")


def test_loop_ws_full_c_and_bias_d(run):
    # First half of K into an int32 buffer (full_C), second half adds it back as D.
    # (full_C: the FSM stores int32 through config_st's stride, set to J int32 first; D is loaded with
    # config_ld state 2's stride; ex_accumulate adds the second half onto the loaded D)
    body = ("  static int32_t T[I][J];\n" + LOOP_CONFIG +
            "  gemmini_extended_config_st(J * sizeof(int32_t), NO_ACTIVATION, ACC_SCALE_IDENTITY);\n  " +
            loop_ws("I / DIM", "J / DIM", "K / 2 / DIM", "&A[0][0]", "&B[0][0]", "NULL", "&T[0][0]", full_c="true") +
            "\n  fence();   /* the second loop reads what the first one's mvouts wrote */\n" +
            "  gemmini_extended_config_st(J, NO_ACTIVATION, ACC_SCALE_IDENTITY);\n  " +
            loop_ws("I / DIM", "J / DIM", "K / 2 / DIM", "&A[0][K / 2]", "&B[K / 2][0]", "&T[0][0]", "&C[0][0]",
                    ex_acc="true") + "\n  fence();\n")
    assert_correct(run(gemm_kernel(body), gemm(32, 48, 64)))


def test_loop_ws_many_blocks_double_buffered(run):
    # One tile per call, K split in three: exercises the alternating halves.
    body = LOOP_CONFIG + """
  for (int i = 0; i < I / DIM; i++)
    for (int j = 0; j < J / DIM; j++)
      for (int k = 0; k < K / DIM; k++)
        """ + loop_ws("1", "1", "1", "&A[i * DIM][k * DIM]", "&B[k * DIM][j * DIM]", "NULL",
                      "k == K / DIM - 1 ? &C[i * DIM][j * DIM] : NULL", ex_acc="k > 0") + """
  fence();
"""
    assert_correct(run(gemm_kernel(body), gemm(32, 32, 48)))


# --------------------------------------------------------------------------- gemmini_loop_conv_ws
# One LoopConv call per image: all P x P outputs, all channels, the whole 3x3 kernel (the input is already
# padded, so the convolution has padding 0 and in_dim = P + 2).
CONV_KERNEL = """#include "include/gemmini.h"
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  gemmini_extended_config_st(K, NO_ACTIVATION, ACC_SCALE_IDENTITY);
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, ACC_SCALE_IDENTITY, 1, 1, false, false, false);
  for (int n = 0; n < 4; n++)
    gemmini_loop_conv_ws(4, P + 2, P + 2, C, K, P, P, P, P, 1, 0, 3, 1, 1, 1, 0, 1, P, P, K, 3, 3, C,
                         0, 0, 0, 0, 0, 0, 0, 0, P, P, &weights[0][0][0][0], &output[n][0][0][0], BIAS,
                         &inp[n][0][0][0], NO_BIAS, true, false, false, false, NO_ACTIVATION, false, false, false,
                         false, 1, C, K, K, false, 0, 0);
  gemmini_fence();
}
"""
TILED_CONV_KERNEL = """#include "include/gemmini.h"
void solution(int8_t inp[4][P + 2][P + 2][C], int8_t weights[3][3][C][K], int32_t bias[1][K],
              int8_t output[4][P][P][K]) {
  tiled_conv_auto(4, P + 2, P + 2, C, K, P, P, 1, 1, 1, 0, 3, false, false, false, false, false,
                  &inp[0][0][0][0], &weights[0][0][0][0], &bias[0][0], &output[0][0][0][0], NO_ACTIVATION,
                  ACC_SCALE_IDENTITY, 0, 0, 0, WS);
}
"""


@pytest.mark.parametrize("P,Cch", [(4, 16), (6, 32)])
def test_loop_conv_ws_matches_reference(run, P, Cch):
    r = run(CONV_KERNEL.replace("NO_BIAS", "false").replace("BIAS", "&bias[0][0]"), conv(P, Cch))
    assert_correct(r)
    assert r.feedback["macs_issued"] == 4 * P * P * Cch * 9 * Cch


@pytest.mark.parametrize("P,Cch", [(4, 16), (17, 16), (9, 48)])
def test_tiled_conv_auto_matches_reference(run, P, Cch):
    r = run(TILED_CONV_KERNEL, conv(P, Cch))
    assert_correct(r)
    assert r.feedback["macs_issued"] == 4 * P * P * Cch * 9 * Cch
    assert r.feedback["fsm_instructions"] == 0   # the library as the paper measured it: issued by the CPU


def test_loop_conv_ws_without_bias_misses_the_bias(run):
    p = conv(4, 16)
    r = run(CONV_KERNEL.replace("NO_BIAS", "true").replace("BIAS", "&bias[0][0]"), p)   # no_bias: zeros
    inp, w, bias = inputs(p, 0, 0)
    got = FAMILIES["conv3x3"].reference(p.dims, [inp, w, np.zeros_like(bias)])
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0), name="output"))


# --------------------------------------------------------------------------- instruction counts and seeds
def test_results_are_deterministic_and_data_independent(run):
    code = gemm_kernel(NAIVE_BODY)
    r0, r0b, r1 = run(code, seed=0), run(code, seed=0), run(code, seed=1)
    for r in (r0, r0b, r1):
        assert_correct(r)
    assert r0.latency == r0b.latency == r1.latency
    assert r0.feedback == r0b.feedback
    assert not np.array_equal(inputs(gemm(32, 32, 32), 0)[0], inputs(gemm(32, 32, 32), 1)[0])


# --------------------------------------------------------------------------- partial tiles and A_stride
def test_partial_tiles_on_every_dimension(run):
    # 24x20x40: rows, columns and reduction length all end in partial tiles;
    # the unwritten columns of partially loaded rows hold noise and must be ignored.
    body = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      uint32_t rows = I - i < DIM ? I - i : DIM, cols = J - j < DIM ? J - j : DIM;
      for (int k = 0; k < K; k += DIM) {
        uint32_t kl = K - k < DIM ? K - k : DIM;
        mvin(&A[i][k], 0, kl, rows);
        mvin2(&B[k][j], BANK_ROWS, cols, kl);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), cols, kl, cols, rows);
        compute_preloaded(0, GARBAGE_ADDR, kl, rows, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, cols, rows);
    }
  fence();
"""
    r = run(gemm_kernel(body), gemm(24, 20, 40))
    assert_correct(r)
    assert r.feedback["macs_issued"] == 24 * 20 * 40


def test_compute_a_stride_skips_scratchpad_rows(run):
    # With DRAM stride K/2, even scratchpad rows hold the rows of A; A_stride 2 reads only those.
    body = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 2, false, false);
  config_ld(K / 2, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, 15);          /* rows 0,2,..,14 = A[i..i+7] */
        mvin(&A[i + 8][k], DIM, DIM, 15);    /* rows 16,..,30 = A[i+8..i+15] */
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""
    assert_correct(run(gemm_kernel(body)))
    assert_fails(run(gemm_kernel(body.replace("NO_ACTIVATION, 2,", "NO_ACTIVATION, 1,"))), "wrong_result")


def test_mvout_ignores_accumulate_bit(run):
    body = NAIVE_BODY.replace("mvout(&C[i][j], ACC_ADDR_BIT,", "mvout(&C[i][j], ACC_ADDR_BIT | ACCUMULATE_BIT,")
    assert "ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM);" in body
    assert_correct(run(gemm_kernel(body)))


def test_mvout_of_scratchpad_rows(run):
    # Results written to the scratchpad (int8) are copied out unchanged.
    assert_correct(run(gemm_kernel(SPAD_RESULT.replace("ACT", "NO_ACTIVATION")), gemm(48, 16, 16)))


def test_loop_ws_result_left_in_accumulator_at_documented_rows(run):
    # C == NULL leaves tile (i, j) at accumulator rows (i*tJ + j)*16 of half 0; the
    # CPU stores it with its own config_st, which the FSM must not have changed.
    body = LOOP_CONFIG + "  " + loop_ws("I / DIM", "J / DIM", "K / DIM", "&A[0][0]", "&B[0][0]", "NULL", "NULL") + """
  for (int i = 0; i < I / DIM; i++)
    for (int j = 0; j < J / DIM; j++)
      mvout(&C[i * DIM][j * DIM], ACC_ADDR_BIT | ((i * (J / DIM) + j) * DIM), DIM, DIM);
  fence();
"""
    assert_correct(run(gemm_kernel(body), gemm(32, 48, 32)))


COMPAT_BODY = """
  gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
  gemmini_extended4_config_ld(K, 1.0f, false, DIM, 0);
  gemmini_extended3_config_ld(J, 1.0f, false, 1);
  gemmini_extended_config_st(J, ST_ACT, ACC_SCALE_IDENTITY);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        gemmini_mvin(&A[i][k], 0);
        gemmini_extended_mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        if (k == 0) gemmini_preload(BANK_ROWS, ACC_ADDR_BIT);
        else gemmini_extended_preload(BANK_ROWS, ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM, DIM, DIM);
        gemmini_compute_preloaded(0, GARBAGE_ADDR);
      }
      gemmini_mvout(&C[i][j], ACC_ADDR_BIT);
    }
  gemmini_flush(0);
  gemmini_fence();
"""


def test_gemmini_compatibility_macros(run):
    assert_correct(run(gemm_kernel(COMPAT_BODY.replace("ST_ACT", "NO_ACTIVATION"))))


def test_extended_config_st_activation_applies_at_mvout(run):
    # gemmini_extended_config_st(stride, act, scale): as on Gemmini (StoreController), the activation and
    # scale apply when results leave the accumulator by mvout.
    p = gemm(32, 32, 32)
    r = run(gemm_kernel(COMPAT_BODY.replace("ST_ACT", "RELU")), p)
    got, want = relu_prediction(p)
    assert_fails(r, "wrong_result", mismatch_summary(got, want), ": got 0, expected -")


def test_config_st_activation_does_not_touch_scratchpad_results(run):
    # config_st_act sets only the mvout activation; results the array writes into the scratchpad keep
    # config_ex's NO_ACTIVATION, and an mvout of scratchpad rows applies no activation.
    body = SPAD_RESULT.replace("ACT", "NO_ACTIVATION").replace("config_st(J);", "config_st_act(J, RELU);")
    assert "config_st_act(J, RELU);" in body
    assert_correct(run(gemm_kernel(body), gemm(32, 32, 16)))


@pytest.mark.parametrize("configs,relu", [
    # config_ex's activation applies only to results the array writes into the scratchpad ...
    ("config_ex(WEIGHT_STATIONARY, RELU, 1, false, false); config_st(J);", False),
    # ... the mvout activation is config_st's (StoreController.scala), set by every config_st
    ("config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false); config_st_act(J, RELU);", True),
    ("config_st_act(J, RELU); config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);", True),
    ("gemmini_extended_config_st(J, RELU, ACC_SCALE_IDENTITY); gemmini_config_st(J);", False),
], ids=["config_ex_relu", "config_st_act", "config_ex_after_config_st_act", "config_st_resets_act"])
def test_mvout_activation_comes_from_config_st(run, configs, relu):
    p = gemm(32, 32, 16)
    body = NAIVE_BODY.replace("  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);\n", "").replace(
        "  config_st(J);\n", "  " + configs + "\n")
    assert body.count("config_st") == configs.count("config_st")
    r = run(gemm_kernel(body), p)
    if relu:
        got, want = relu_prediction(p)
        assert_fails(r, "wrong_result", mismatch_summary(got, want), ": got 0, expected -")
    else:
        assert_correct(r)


def test_loop_ws_accumulator_half_flips_after_a_stored_call(run):
    # Call 1 stores C (half 0, then g flips); call 2 leaves its result at rows 512 + (i*tJ + j)*16.
    body = LOOP_CONFIG + "  " + loop_ws("I / DIM", "J / DIM", "K / DIM", "&A[0][0]", "&B[0][0]", "NULL", "&C[0][0]") + \
        "\n  " + loop_ws("I / DIM", "J / DIM", "K / DIM", "&A[0][0]", "&B[0][0]", "NULL", "NULL") + """
  for (int i = 0; i < I / DIM; i++)
    for (int j = 0; j < J / DIM; j++)
      mvout(&C[i * DIM][j * DIM], ACC_ADDR_BIT | (HALF + (i * (J / DIM) + j) * DIM), DIM, DIM);
  fence();
"""
    assert_correct(run(gemm_kernel(body.replace("HALF", "512")), gemm(32, 32, 32)))
    # rows that no call wrote hold noise
    assert_fails(run(gemm_kernel(body.replace("HALF", "256")), gemm(32, 32, 32)), "wrong_result")


# Leaves every configuration in a state that breaks the naive schedule, which configures only the
# load and store strides and relies on the documented execute and activation defaults.
SPOILED_CONFIG = """
  config_ex(WEIGHT_STATIONARY, RELU, 3, true, true);
  config_ld(0, 0.5f, 64, 2);
  config_st_act(0, RELU);
"""
NAIVE_ON_DEFAULTS = NAIVE_BODY.replace("  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);\n", "")


def test_default_config_is_restored_for_every_input_set(run):
    # Spoiling the configuration after the schedule changes nothing: every solution() call starts from
    # the defaults, so every input set issues the same instructions and all are right ...
    assert "config_ex" not in NAIVE_ON_DEFAULTS
    assert_correct(run(gemm_kernel(NAIVE_ON_DEFAULTS + SPOILED_CONFIG)))
    # ... while within one call the spoiled state does apply (the second schedule is wrong).
    assert_fails(run(gemm_kernel(NAIVE_ON_DEFAULTS + SPOILED_CONFIG + NAIVE_ON_DEFAULTS)), "wrong_result",
                 "input set 1 of 3")


def test_configuring_only_in_the_first_call_is_rejected(run):
    # Configuring the strides only in the first solution() call makes set 2 issue other instructions
    # (no config_ld, stride-0 mvins): the stream rule rejects it, naming set 2.
    body = NAIVE_BODY.replace("""  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);""", """  static int configured;
  if (!configured++) { config_ld(K, 1.0f, DIM, 0); config_ld(J, 1.0f, DIM, 1); }
  config_st(J);""")
    assert "static int configured" in body
    assert_fails(run(gemm_kernel(body)), "gemmini", stream_rule(2))


def test_load_stride_defaults_to_zero(run):
    p = gemm(32, 32, 32)
    body = NAIVE_BODY.replace("  config_ld(J, 1.0f, DIM, 1);\n", "")
    r = run(gemm_kernel(body), p)
    a, b = inputs(p, 0, 0)
    # every B tile is the broadcast of its first row
    b_broadcast = np.repeat(b[::16, :], 16, axis=0)
    got = sat8(a.astype(np.int64) @ b_broadcast.astype(np.int64))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(p, 0, 0)))


def test_final_fence_is_free_but_fences_in_loops_cost_time(run):
    base = run(gemm_kernel(NAIVE_BODY))
    no_fence = run(gemm_kernel(NAIVE_BODY.replace("  fence();\n", "")))
    inner = run(gemm_kernel(NAIVE_BODY.replace("mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);",
                                               "mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);\n      fence();")))
    for r in (base, no_fence, inner):
        assert_correct(r)
    assert base.latency == no_fence.latency
    assert inner.latency > base.latency
    assert inner.feedback["stalls"] and "fence_wait" in dict(inner.feedback["stalls"])
