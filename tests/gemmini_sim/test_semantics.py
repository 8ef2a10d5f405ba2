"""What Gemmini's RTL does where a simpler model would guess: address bits and
row wrap-around, operands read from the accumulator, shrunk mvins, the mvout
scale unit, block mvouts, the output-stationary shift, C_stride. Things the
hardware does silently and a kernel probably did not mean come back as
warnings in the result, never as a changed computation."""
from __future__ import annotations

import numpy as np
import pytest

from .simkit import (NAIVE_BODY, assert_correct, assert_fails, gemm, gemm_kernel, inputs, mismatch_summary,
                     reference, sat8)

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]
P = gemm(32, 32, 32)


def warnings_of(r) -> str:
    return "\n".join(r.feedback.get("warnings", []))


# --------------------------------------------------------------------------- local addresses
def test_row_addresses_wrap_around_the_scratchpad(run):
    # A at rows 16376..16391 = 16376..16383 and 0..7 (14-bit row field): loads and computes agree
    body = NAIVE_BODY.replace("mvin(&A[i][k], 0,", "mvin(&A[i][k], 16376,").replace(
        "compute_preloaded(0,", "compute_preloaded(16376,")
    r = run(gemm_kernel(body), P)
    assert_correct(r)
    assert "rows 16376..16391 run past the end of the scratchpad and wrap around to row 0" in warnings_of(r)
    assert "Warning: mvin #" in r.feedback_text


def test_accumulator_rows_wrap_and_high_row_bits_are_ignored(run):
    # accumulator row 1024 + 5 is row 5 (10-bit row field): the same physical rows in mvout and preload
    body = NAIVE_BODY.replace("ACC_ADDR_BIT | (k ?", "ACC_ADDR_BIT | (1024 + 5) | (k ?").replace(
        "mvout(&C[i][j], ACC_ADDR_BIT,", "mvout(&C[i][j], ACC_ADDR_BIT | 5,")
    r = run(gemm_kernel(body), P)
    assert_correct(r)
    assert "address bits above the accumulator's 1024 rows are ignored" in warnings_of(r)


def test_accumulate_and_full_bits_are_ignored_on_scratchpad_addresses(run):
    body = NAIVE_BODY.replace("mvin(&A[i][k], 0,", "mvin(&A[i][k], ACCUMULATE_BIT | FULL_READ_BIT | 0,")
    r = run(gemm_kernel(body), P)
    assert_correct(r)
    assert "bits 30/29 have no effect on a scratchpad address" in warnings_of(r)


def test_mvout_from_garbage_address_writes_nothing(run):
    body = NAIVE_BODY.replace("mvout(&C[i][j], ACC_ADDR_BIT,", "mvout(&C[i][j], GARBAGE_ADDR,")
    r = run(gemm_kernel(body), P)
    assert_fails(r, "gemmini", "1024 of 1024 output bytes of input set 1 were never written by mvout")


# --------------------------------------------------------------------------- mvin into the accumulator
SHRUNK_A = """
  /* A goes into the accumulator as int8 data (shrunk load) and is read back as the A operand, through
   * config_ex's scale: acc -> round(x * S), saturated to int8 */
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, S, 1, 1, false, false, false);
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, true, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], ACC_ADDR_BIT | 512, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(ACC_ADDR_BIT | 512, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""


def test_shrunk_mvin_and_operands_read_from_the_accumulator(run):
    assert_correct(run(gemm_kernel(SHRUNK_A.replace("S, 1, 1", "ACC_SCALE_IDENTITY, 1, 1")), P))
    r = run(gemm_kernel(SHRUNK_A.replace("S, 1, 1", "0.5f, 1, 1")), P)
    a, b = (x.astype(np.int64) for x in inputs(P, 0, 0))
    half_a = np.rint(a * 0.5).astype(np.int64)   # round half to even, like Gemmini's scale unit
    assert_fails(r, "wrong_result", mismatch_summary(sat8(half_a @ b), reference(P, 0, 0)))


# --------------------------------------------------------------------------- mvout
def test_mvout_scale_rounds_half_to_even_then_saturates(run):
    r = run(gemm_kernel(NAIVE_BODY.replace("config_st(J);", "gemmini_extended_config_st(J, NO_ACTIVATION, 0.25f);")), P)
    a, b = (x.astype(np.int64) for x in inputs(P, 0, 0))
    got = sat8(np.rint((a @ b).astype(np.float32) * np.float32(0.25)))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(P, 0, 0)))


def test_block_mvout_reads_tiles_dim_rows_apart(run):
    # two output tiles in accumulator rows 0 and 16 leave with one 32-column mvout
    body = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM) {
    for (int j = 0; j < J; j += DIM)
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | j | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
    mvout(&C[i][0], ACC_ADDR_BIT, J, DIM);
  }
  fence();
"""
    r = run(gemm_kernel(body), P)
    assert_correct(r)
    assert r.feedback["instructions"]["mvout"] == 2


# --------------------------------------------------------------------------- the array
def test_output_stationary_results_are_shifted_with_rounding(run):
    body = """
  gemmini_config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 3);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], (k / DIM) * DIM, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS + (k / DIM) * DIM, DIM, DIM);
      }
      preload(GARBAGE_ADDR, 2 * BANK_ROWS, DIM, DIM, DIM, DIM);   /* the tile goes to the scratchpad */
      compute_preloaded(0, BANK_ROWS, DIM, DIM, DIM, DIM);
      for (int k = DIM; k < K; k += DIM) {
        preload(GARBAGE_ADDR, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        compute_accumulated((k / DIM) * DIM, BANK_ROWS + (k / DIM) * DIM, DIM, DIM, DIM, DIM);
      }
      fence();
      mvout(&C[i][j], 2 * BANK_ROWS, DIM, DIM);
    }
  fence();
"""
    r = run(gemm_kernel(body), P)
    a, b = (x.astype(np.int64) for x in inputs(P, 0, 0))
    acc = a @ b
    q, rem = acc >> 3, acc & 7   # x >> 3 rounded to nearest, ties to even
    got = sat8(q + ((rem > 4) | ((rem == 4) & (q & 1 == 1))))
    assert_fails(r, "wrong_result", mismatch_summary(got, reference(P, 0, 0)))


def test_c_stride_spreads_result_rows(run):
    # results written into the scratchpad every second row (C_stride 2), stored row by row
    body = """
  gemmini_extended3_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, ACC_SCALE_IDENTITY, 2, 1, false, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      mvin(&A[i][0], 0, DIM, DIM);
      mvin2(&B[0][j], BANK_ROWS, DIM, DIM);
      preload(BANK_ROWS, 2 * BANK_ROWS, DIM, DIM, DIM, DIM);
      compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      for (int r = 0; r < DIM; r++) mvout(&C[i + r][j], 2 * BANK_ROWS + 2 * r, DIM, 1);
    }
  fence();
"""
    assert_correct(run(gemm_kernel(body), gemm(32, 32, 16)))


def test_flush_is_an_instruction_that_only_costs_issue_time(run):
    base = run(gemm_kernel(NAIVE_BODY), P)
    flushed = run(gemm_kernel("  gemmini_flush(0);\n" + NAIVE_BODY), P)
    assert_correct(flushed)
    assert flushed.latency >= base.latency
