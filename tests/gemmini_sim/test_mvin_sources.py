"""Where an mvin may read from.

The kernel process only records instructions; the replayer executes them on
its own copy of the inputs. An mvin address inside a problem array reads the
replayer's copy, NULL reads zeros, and any other address (the kernel's own
memory) is accepted only if an earlier mvout wrote those bytes (the replayer
keeps them) or if the bytes are the same in every input set (constant tables);
data the CPU computed from the inputs is rejected with "changes with the
input values". Bytes an mvout wrote come from the replayer's model byte by
byte, the others from the kernel's copy. Because the check compares input
sets, at least two are required, and the instructions themselves (addresses
included) must be the same in every set.
"""
from __future__ import annotations

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target

from .simkit import (CANCEL, NAIVE_BODY, assert_correct, assert_fails, c_table, cancel_kernel, cancel_prediction,
                     gemm, gemm_kernel, inputs, mismatch_summary, reference, sat8, stream_rule)

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

P = gemm(32, 32, 32)
ID = np.eye(16, dtype=np.int64)
CHANGES = "loads data from the kernel's own memory that changes with the input values"


# --------------------------------------------------------------------------- constant tables
def test_mvin_of_a_constant_table_is_accepted(run):
    # acc += A*ID + A*(-ID) per K block: the tables are really used ...
    assert_correct(run(cancel_kernel(ID, -ID, "1.0f"), P))
    # ... a wrong table is judged wrong, with the predicted values.
    r = run(cancel_kernel(ID, 0 * ID, "1.0f"), P)
    assert_fails(r, "wrong_result", mismatch_summary(cancel_prediction(P, ID), reference(P, 0, 0)))


RUNTIME_TABLE = """
  /* The CPU fills the tables at run time, the same way in every call: input-independent. */
  static int8_t T[DIM][DIM], U[DIM][DIM];
  memset(T, 0, sizeof T);
  memset(U, 0, sizeof U);
  for (int d = 0; d < DIM; d++) T[d][d] = 1, U[d][d] = -1;
"""


RUNTIME_CANCEL = gemm_kernel(RUNTIME_TABLE + CANCEL.replace("S1", "1.0f").replace("S2", "1.0f"))


def test_mvin_of_a_table_the_cpu_fills_the_same_way_every_time_is_accepted(run):
    assert_correct(run(RUNTIME_CANCEL, P))


def test_constant_tables_are_accepted_with_the_minimum_of_two_input_sets():
    # (one input set is refused: see test_target.test_input_sets_must_be_an_integer_of_at_least_two)
    two = get_target("gemmini-sim", input_sets=2)
    assert two.options.input_sets == 2
    assert_correct(two.evaluate(P, cancel_kernel(ID, -ID, "1.0f")))
    assert_correct(two.evaluate(P, RUNTIME_CANCEL))


# --------------------------------------------------------------------------- CPU-prepared data
CPU_PREPARED = [
    # id, prelude, body, the rejected instruction
    ("transposed_copy", "static int8_t At[K][I];", """
  for (int i = 0; i < I; i++) for (int k = 0; k < K; k++) At[k][i] = A[i][k];
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, true, false);
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
""", "instruction #5 "),
    ("halved_values", "static int8_t Bh[K][J], Bl[K][J];", """
  for (int k = 0; k < K; k++)
    for (int j = 0; j < J; j++) Bh[k][j] = (int8_t)(B[k][j] >> 1), Bl[k][j] = (int8_t)(B[k][j] & 1);
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 2.0f, DIM, 1);
  config_ld(J, 1.0f, DIM, 2);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&Bh[k][j], BANK_ROWS, DIM, DIM);
        mvin3(&Bl[k][j], 2 * BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        preload(2 * BANK_ROWS, ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
""", "instruction #7 "),
    ("d_operand_from_inputs", "static int8_t D[DIM][DIM];", """
  /* D = a copy of the first A tile, added and removed again */
  for (int r = 0; r < DIM; r++) for (int c = 0; c < DIM; c++) D[r][c] = A[r][c];
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(DIM, 1.0f, DIM, 2);
  mvin3(D, 3 * BANK_ROWS, DIM, DIM);
""" + NAIVE_BODY, "instruction #3 "),
    ("input_dependent_scalar_table", "static int8_t S[DIM][DIM];", """
  /* a single input-dependent byte is enough */
  S[0][0] = A[0][0];
""" + NAIVE_BODY.replace("  fence();\n", "  config_ld(DIM, 1.0f, DIM, 2);\n  mvin3(S, 3 * BANK_ROWS, DIM, DIM);\n  fence();\n"),
     "instruction #42 "),
]


@pytest.mark.parametrize("prelude,body,instr", [c[1:] for c in CPU_PREPARED], ids=[c[0] for c in CPU_PREPARED])
def test_mvin_of_cpu_computed_input_dependent_data_is_rejected(run, prelude, body, instr):
    r = run(gemm_kernel(body, prelude), P)
    assert_fails(r, "gemmini", instr + CHANGES, "the CPU may not prepare it")
    assert r.error.startswith(instr), r.error
    assert r.latency is None


# --------------------------------------------------------------------------- DRAM scratch buffers written by mvout
SCRATCH = """
  /* every result tile goes accumulator -> scratch buffer S (mvout) -> scratchpad (mvin) -> C (mvout) */
  static int8_t S[I][J];
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_ld(J, 1.0f, DIM, 2);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      STAGE
    }
  fence();
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      mvin3(&S[i][j], 2 * BANK_ROWS, DIM, DIM);
      mvout(&C[i][j], 2 * BANK_ROWS, DIM, DIM);
    }
  fence();
"""


def test_mvout_to_a_scratch_buffer_and_mvin_back_is_accepted_and_correct(run):
    r = run(gemm_kernel(SCRATCH.replace("STAGE", "mvout(&S[i][j], ACC_ADDR_BIT, DIM, DIM);")), P)
    assert_correct(r)
    assert r.feedback["instructions"]["mvout"] == 2 * 4


def test_mvin_reads_what_mvout_wrote_not_the_kernels_memory(run):
    # Without the first mvout, S is the kernel's own (zero, input-independent) memory: accepted, and
    # all zeros; the results the CPU might see in S do not exist.
    r = run(gemm_kernel(SCRATCH.replace("STAGE", "")), P)
    assert_fails(r, "wrong_result", mismatch_summary(np.zeros((32, 32), np.int8), reference(P, 0, 0)))


CARRY_OVER = """
  /* Every result tile gets the tile of S added as the D operand of its first compute, and is then
   * stored to S. S is never written by the CPU, so the kernel's copy holds zeros: right only if S
   * holds no mvout results when it is read. */
  static int8_t S[I][J];
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_ld(J, 1.0f, DIM, 2);
  config_st(J);
  for (int pass = 0; pass < PASSES; pass++) {
    for (int i = 0; i < I; i += DIM)
      for (int j = 0; j < J; j += DIM) {
        mvin3(&S[i][j], 3 * BANK_ROWS, DIM, DIM);
        for (int k = 0; k < K; k += DIM) {
          mvin(&A[i][k], 0, DIM, DIM);
          mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
          preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
          compute_preloaded(0, k ? GARBAGE_ADDR : 3 * BANK_ROWS, DIM, DIM, DIM, DIM);
        }
        mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
        mvout(&S[i][j], ACC_ADDR_BIT, DIM, DIM);
      }
    fence();   /* the next pass reads S */
  }
"""


def test_scratch_buffers_do_not_carry_over_between_input_sets(run):
    # Set 2 issues the same instructions as set 1; if the replayer kept set 1's mvout results, set 2's
    # first reads of S would add them.
    assert_correct(run(gemm_kernel(CARRY_OVER.replace("PASSES", "1")), P))
    # Within one call they are kept: a second pass adds the first pass's (saturated) results.
    r = run(gemm_kernel(CARRY_OVER.replace("PASSES", "2")), P)
    a, b = (x.astype(np.int64) for x in inputs(P, 0, 0))
    got = sat8(a @ b + sat8(a @ b))
    assert_fails(r, "wrong_result", "wrong result on input set 1 of 3", mismatch_summary(got, reference(P, 0, 0)))


def test_storing_scratch_results_only_in_the_first_call_is_rejected(run):
    # Relying on a previous call's mvout makes set 2 issue other instructions: the stream rule.
    body = SCRATCH.replace("STAGE", "if (first) mvout(&S[i][j], ACC_ADDR_BIT, DIM, DIM);")
    r = run(gemm_kernel("  static int calls; int first = calls++ == 0;\n" + body), P)
    assert_fails(r, "gemmini", stream_rule(2))


def test_mvin_of_a_partly_mvout_written_region_reads_the_results(run):
    # A 32-column mvin of a zero-padded scratch buffer whose left 16 columns an mvout wrote: the
    # results come from the mvout, the padding from the kernel's (constant) memory.
    body = """
  static int8_t S[DIM][2 * DIM];        /* right half: zero padding */
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_ld(2 * DIM, 1.0f, DIM, 2);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      config_st(2 * DIM);
      mvout(&S[0][0], ACC_ADDR_BIT, DIM, DIM);
      fence();
      mvin3(&S[0][0], 2 * BANK_ROWS, 2 * DIM, DIM);   /* two blocks: results, then padding */
      config_st(J);
      mvout(&C[i][j], 2 * BANK_ROWS, DIM, DIM);
      MVOUT_PADDING
    }
  fence();
"""
    assert_correct(run(gemm_kernel(body.replace("MVOUT_PADDING", "")), P))
    # The padding block really is the kernel's zeros: stored instead of the results it is all zeros.
    r = run(gemm_kernel(body.replace("MVOUT_PADDING", "mvout(&C[i][j], 2 * BANK_ROWS + DIM, DIM, DIM);")), P)
    assert_fails(r, "wrong_result", mismatch_summary(np.zeros((32, 32), np.int8), reference(P, 0, 0)))


def test_cpu_written_bytes_next_to_mvout_results_must_not_depend_on_the_inputs(run):
    # The same partly-written region, with the CPU copying input bytes into the padding columns: the
    # byte-by-byte merge still checks the kernel's part.
    body = """
  static int8_t S[DIM][2 * DIM];
  for (int r = 0; r < DIM; r++) for (int c = DIM; c < 2 * DIM; c++) S[r][c] = A[r][c - DIM];
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_ld(2 * DIM, 1.0f, DIM, 2);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      config_st(2 * DIM);
      mvout(&S[0][0], ACC_ADDR_BIT, DIM, DIM);
      fence();
      mvin3(&S[0][0], 2 * BANK_ROWS, 2 * DIM, DIM);
      config_st(J);
      mvout(&C[i][j], 2 * BANK_ROWS, DIM, DIM);
    }
  fence();
"""
    # 4 configs, then for the first tile 2 x (mvin, mvin2, preload, compute), config_st, mvout, fence: the
    # mvin3 is #16
    r = run(gemm_kernel(body), P)
    assert_fails(r, "gemmini", "instruction #16 " + CHANGES)


# --------------------------------------------------------------------------- data-dependent issuing
def test_constant_table_after_data_dependent_control_flow_is_rejected_by_the_stream_rule(run):
    # Data-dependent control flow that issues one extra instruction on the sparse set is rejected as
    # such (before, and instead of, any check of the constant table read after it).
    body = """
  int zeros = 0;
  for (int i = 0; i < I; i++) for (int k = 0; k < K; k++) zeros += A[i][k] == 0;
  if (zeros > I * K / 2) config_st(J);          /* one extra instruction on the sparse set */
""" + NAIVE_BODY.replace("  fence();\n", """
  config_ld(DIM, 1.0f, DIM, 2);
  mvin3(ID, 3 * BANK_ROWS, DIM, DIM);            /* a constant table, unused */
  fence();
""")
    r = run(gemm_kernel(body, c_table("ID", ID)), P)
    assert_fails(r, "gemmini", stream_rule(2))
    assert CHANGES not in r.error
    # The same kernel without the extra instruction is accepted: the table is constant.
    assert_correct(run(gemm_kernel(body.replace("if (zeros > I * K / 2) config_st(J);", "(void)zeros;"),
                                   c_table("ID", ID)), P))


def test_cpu_computed_result_is_rejected_with_the_minimum_of_two_input_sets():
    body = """
  static int8_t c[I][J];
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j++) {
      int acc = 0;
      for (int k = 0; k < K; k++) acc += A[i][k] * B[k][j];
      c[i][j] = acc > 127 ? 127 : acc < -128 ? -128 : acc;
    }
""" + NAIVE_BODY.replace("      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);",
                         "      config_ld(J, 1.0f, DIM, 2);\n      mvin3(&c[i][j], 64, DIM, DIM);\n"
                         "      mvout(&C[i][j], 64, DIM, DIM);")
    r = get_target("gemmini-sim", input_sets=2).evaluate(P, gemm_kernel(body))
    # 4 configs, then 2 x (mvin, mvin2, preload, compute), config_ld: the mvin3 is #14
    assert_fails(r, "gemmini", "instruction #14 " + CHANGES)


MALLOC_SCRATCH = SCRATCH.replace("  static int8_t S[I][J];", "  int8_t (*S)[J] = malloc(I * J);").replace(
    "STAGE", "mvout(&S[i][j], ACC_ADDR_BIT, DIM, DIM);")


def test_malloced_scratch_buffer_is_accepted(run):
    assert "malloc(I * J)" in MALLOC_SCRATCH
    assert_correct(run(gemm_kernel(MALLOC_SCRATCH + "  free(S);\n"), P))


def test_leaked_malloced_scratch_buffer_is_rejected_with_a_hint(run):
    # rules.md 11: memory the kernel allocates must be at the same address in every call. A buffer
    # malloc'ed and never freed moves between calls, and the message says so and how to fix it.
    r = run(gemm_kernel(MALLOC_SCRATCH), P)
    assert_fails(r, "gemmini", stream_rule(2), "outside the problem's arrays", "allocate it statically, or free it")


# --------------------------------------------------------------------------- loop FSMs
LOOP_ID = """
  static int8_t S[I][K];
  STAGE
  config_ld(K, 1.0f, DIM, 0);   /* the FSM loads A and B with load states 0 and 1, stores with config_st */
  config_ld(DIM, 1.0f, DIM, 1);
  config_st(K);
  for (int k = 0; k < K; k += DIM)
    gemmini_loop_ws(I / DIM, 1, 1, 0, 0, 0, &A[0][k], &TABLE[0][0], NULL, &S[0][k],
                    K, DIM, 0, K, false, false, false, false, false, NO_ACTIVATION, 0, 0, false);
  fence();   /* the schedule below reads what the loops stored */
""" + NAIVE_BODY.replace("mvin(&A[i][k], 0, DIM, DIM);", "mvin(&S[i][k], 0, DIM, DIM);")


def test_loop_ws_reads_a_constant_table_staged_through_mvout(run):
    # S = A x identity, block by block, with the identity as the FSM's B operand; then the naive schedule
    # reads A from S (mvout results): right only if the FSM loaded the identity. The table reaches the
    # FSM as mvout results: a CPU-issued mvin of the constant table, an mvout to a scratch buffer.
    stage = ("static int8_t IDS[DIM][DIM];\n  config_ld(DIM, 1.0f, DIM, 2);\n  config_st(DIM);\n"
             "  mvin3(ID, 4 * BANK_ROWS - DIM, DIM, DIM);\n  mvout(IDS, 4 * BANK_ROWS - DIM, DIM, DIM);\n  fence();")
    body = LOOP_ID.replace("STAGE", stage).replace("TABLE", "IDS")
    assert "mvin(&S[i][k]" in body
    r = run(gemm_kernel(body, c_table("ID", ID)), P)
    assert_correct(r)
    assert r.feedback["fsm_instructions"] > 0


def test_loop_ws_reading_a_constant_table_directly_is_refused_clearly(run):
    # rules.md 11: the loop FSMs read only problem arrays and mvout results (the FSM runs in the evaluator,
    # which never sees the kernel's memory); staging through mvout, as above, is the documented way.
    r = run(gemm_kernel(LOOP_ID.replace("STAGE", "").replace("TABLE", "ID"), c_table("ID", ID)), P)
    assert_fails(r, "gemmini", "(issued by gemmini_loop_ws)", "neither a problem array nor data written by an earlier mvout")
