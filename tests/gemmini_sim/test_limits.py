"""Every limit violation of the simulated Gemmini fails the kernel with
error_kind 'gemmini' and an error that names the instruction (with its index)
and what was wrong. Kernels start with four config instructions (#1..#4), so
the first instruction of each case body is #5."""
from __future__ import annotations

import pytest

from hw_runners import get_target
from .simkit import NAIVE_BODY, assert_correct, assert_fails, gemm, gemm_kernel

pytestmark = pytest.mark.timeout(60)

PREAMBLE = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
"""

PRE = "preload(GARBAGE_ADDR, ACC_ADDR_BIT, DIM, DIM, DIM, DIM);"
OS = "config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 1, false, false);"
LOOP = "gemmini_loop_ws({ti}, {tj}, {tk}, {pi}, {pj}, {pk}, {a}, &B[0][0], NULL, &C[0][0], K, J, 0, J, {at}, false, false, false, {exacc}, {act});"


def loop(ti=1, tj=1, tk=1, pi=0, pj=0, pk=0, a="&A[0][0]", at="false", exacc="false", act="NO_ACTIVATION"):
    return LOOP.format(ti=ti, tj=tj, tk=tk, pi=pi, pj=pj, pk=pk, a=a, at=at, exacc=exacc, act=act)


CASES = [
    # (id, body, expected start of the error, expected substring)
    ("mvin_rows_17", "mvin(&A[0][0], 0, DIM, 17);", "mvin #5: ", "rows=17 is out of range (must be 1..16)"),
    ("mvin_rows_0", "mvin(&A[0][0], 0, DIM, 0);", "mvin #5: ", "rows=0 is out of range (must be 1..16)"),
    ("mvin_spad_cols_65", "mvin(&A[0][0], 0, 65, DIM);", "mvin #5: ", "cols=65 is out of range (must be 1..64)"),
    ("mvin_acc_cols_17", "mvin(NULL, ACC_ADDR_BIT, 17, DIM);", "mvin #5: ", "cols=17 is out of range (must be 1..16)"),
    ("mvin2_acc_cols_32", "mvin2(NULL, ACC_ADDR_BIT, 32, DIM);", "mvin2 #5: ", "cols=32 is out of range (must be 1..16)"),
    ("mvin_spad_row_range", "mvin(&A[0][0], 16380, DIM, DIM);", "mvin #5: ",
     "destination rows 16380..16395 are outside the scratchpad (rows 0..16383)"),
    ("mvin_block_row_range", "mvin(&A[0][0], 16360, 64, DIM);", "mvin #5: ",
     "destination block rows 16376..16391 are outside the scratchpad (rows 0..16383)"),
    ("mvin_acc_row_range", "mvin(NULL, ACC_ADDR_BIT | 1020, DIM, DIM);", "mvin #5: ",
     "destination rows 1020..1035 are outside the accumulator (rows 0..1023)"),
    ("mvin_garbage", "mvin(&A[0][0], GARBAGE_ADDR, DIM, DIM);", "mvin #5: ",
     "local address is GARBAGE_ADDR; mvin needs a destination"),
    ("mvin_full_bit", "mvin(NULL, ACC_ADDR_BIT | FULL_READ_BIT, DIM, DIM);", "mvin #5: ",
     "bit 29 (read full int32) applies to mvout, not mvin"),
    ("mvin_spad_accumulate_bit", "mvin(&A[0][0], ACCUMULATE_BIT, DIM, DIM);", "mvin #5: ",
     "mvin destination: bits 30/29 are only meaningful on accumulator addresses"),
    ("mvout_cols_17", "mvout(&C[0][0], ACC_ADDR_BIT, 17, DIM);", "mvout #5: ", "cols=17 is out of range (must be 1..16)"),
    ("mvout_rows_17", "mvout(&C[0][0], ACC_ADDR_BIT, DIM, 17);", "mvout #5: ", "rows=17 is out of range (must be 1..16)"),
    ("mvout_acc_row_range", "mvout(&C[0][0], ACC_ADDR_BIT | 1016, DIM, DIM);", "mvout #5: ",
     "source rows 1016..1031 are outside the accumulator (rows 0..1023)"),
    ("mvout_spad_row_range", "mvout(&C[0][0], 16383, DIM, 2);", "mvout #5: ",
     "source rows 16383..16384 are outside the scratchpad (rows 0..16383)"),
    ("mvout_null_dram", "mvout(NULL, ACC_ADDR_BIT, DIM, DIM);", "mvout #5: ", "DRAM address is NULL"),
    ("mvout_garbage", "mvout(&C[0][0], GARBAGE_ADDR, DIM, DIM);", "mvout #5: ",
     "local address is GARBAGE_ADDR; mvout needs a source"),
    ("compute_without_preload", "compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);", "compute_preloaded #5: ",
     "no preload before this compute: every compute must follow a preload"),
    ("compute_accumulated_without_preload", "compute_accumulated(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_accumulated #5: ", "no preload before this compute"),
    ("second_compute_after_one_preload",
     PRE + "compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM); compute_accumulated(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_accumulated #7: ", "no preload before this compute"),
    ("preload_after_preload", PRE + PRE, "preload #6: ",
     "preload after a preload: every preload must be followed by one compute"),
    ("preload_b_cols_17", "preload(0, ACC_ADDR_BIT, 17, DIM, DIM, DIM);", "preload #5: ",
     "B_cols=17 is out of range (must be 1..16)"),
    ("preload_c_rows_0", "preload(0, ACC_ADDR_BIT, DIM, DIM, DIM, 0);", "preload #5: ",
     "C_rows=0 is out of range (must be 1..16)"),
    ("preload_c_row_range", "preload(GARBAGE_ADDR, ACC_ADDR_BIT | 1010, DIM, DIM, DIM, DIM);", "preload #5: ",
     "C rows 1010..1025 are outside the accumulator (rows 0..1023)"),
    ("preload_b_from_accumulator", "preload(ACC_ADDR_BIT, ACC_ADDR_BIT, DIM, DIM, DIM, DIM);", "preload #5: ",
     "B must be a scratchpad address (bit 31 clear)"),
    ("preload_spad_c_accumulate_bit", "preload(GARBAGE_ADDR, ACCUMULATE_BIT | 64, DIM, DIM, DIM, DIM);",
     "preload #5: ", "C: the accumulate bit needs an accumulator address"),
    ("compute_a_garbage", PRE + "compute_preloaded(GARBAGE_ADDR, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #6: ", "A is GARBAGE_ADDR; a compute needs an A operand"),
    ("compute_a_cols_17", PRE + "compute_preloaded(0, GARBAGE_ADDR, 17, DIM, DIM, DIM);",
     "compute_preloaded #6: ", "A_cols=17 is out of range (must be 1..16)"),
    ("compute_d_cols_17", PRE + "compute_preloaded(0, 0, DIM, DIM, 17, DIM);",
     "compute_preloaded #6: ", "D_cols=17 is out of range (must be 1..16)"),
    ("compute_a_row_range", PRE + "compute_preloaded(16380, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #6: ", "A rows 16380..16395 are outside the scratchpad (rows 0..16383)"),
    ("compute_a_from_accumulator", PRE + "compute_preloaded(ACC_ADDR_BIT, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #6: ", "A must be a scratchpad address (bit 31 clear)"),
    ("compute_a_stride_span",
     "config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 2000, false, false);" + PRE
     + "compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #7: ", "A rows 0..30000 are outside the scratchpad"),
    ("os_compute_without_b", OS + PRE + "compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #7: ", "output-stationary compute needs a B operand (second address)"),
    ("os_compute_without_output_tile",
     OS + "preload(GARBAGE_ADDR, GARBAGE_ADDR, DIM, DIM, DIM, DIM); compute_preloaded(0, 64, DIM, DIM, DIM, DIM);",
     "compute_preloaded #7: ", "output-stationary compute with no output tile: preload a C address first"),
    ("config_ex_bad_dataflow", "config_ex(2, NO_ACTIVATION, 1, false, false);", "config_ex #5: ",
     "dataflow=2 (use WEIGHT_STATIONARY or OUTPUT_STATIONARY)"),
    ("config_ex_bad_act", "config_ex(WEIGHT_STATIONARY, 7, 1, false, false);", "config_ex #5: ",
     "act=7 (use NO_ACTIVATION or RELU)"),
    ("config_ex_a_stride_0", "config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, false, false);", "config_ex #5: ",
     "A_stride=0 out of range"),
    ("config_ex_between_preload_and_compute", PRE + "config_ex(WEIGHT_STATIONARY, RELU, 1, false, false);",
     "config_ex #6: ", "config_ex between a preload and its compute"),
    ("config_ld_bad_id", "config_ld(K, 1.0f, DIM, 3);", "config_ld #5: ", "id=3 (0 for mvin, 1 for mvin2, 2 for mvin3)"),
    ("config_ld_nan_scale", "config_ld(K, __builtin_nanf(\"\"), DIM, 0);", "config_ld #5: ", "scale is not a finite number"),
    ("config_ld_inf_scale", "config_ld(K, __builtin_inff(), DIM, 1);", "config_ld #5: ", "scale is not a finite number"),
    # the end of the kernel is not an instruction: it reports the number of the last one
    ("dangling_preload_at_end", PRE + " return;", "end of kernel #5: ", "the kernel ended with a preload that no compute used"),
    # loop arguments are checked by the loop FSM in the replayer, which names the call
    ("loop_ws_zero_tiles", loop(ti=0), "gemmini_loop_ws #5: ", "tile counts I=0 J=1 K=1 must be 1..4096"),
    ("loop_ws_too_many_tiles", loop(tk=4097), "gemmini_loop_ws #5: ", "tile counts I=1 J=1 K=4097 must be 1..4096"),
    ("loop_ws_pad_16", loop(pj=16), "gemmini_loop_ws #5: ", "pad_I/pad_J/pad_K must be < 16"),
    ("loop_ws_transpose", loop(at="true"), "gemmini_loop_ws #5: ",
     "A_transpose, B_transpose and low_D are not supported by the simulated loop FSM"),
    ("loop_ws_null_a", loop(a="NULL"), "gemmini_loop_ws #5: ", "A and B must not be NULL"),
    ("loop_ws_bad_act", loop(act="5"), "gemmini_loop_ws #5: ", "act=5 (use NO_ACTIVATION or RELU)"),
    ("loop_ws_spad_overflow", loop(ti=32, tj=32, tk=16), "gemmini_loop_ws #5: ",
     "A (32x16 tiles) and B (16x32 tiles) need 16384 scratchpad rows; the loop may use half of the "
     "scratchpad (8192 rows)"),
    ("loop_ws_acc_overflow", loop(ti=8, tj=8, tk=1), "gemmini_loop_ws #5: ",
     "C (8x8 tiles) needs 1024 accumulator rows; the loop may use half of the accumulator (512 rows)"),
    ("loop_ws_ex_accumulate_first", loop(exacc="true"), "gemmini_loop_ws #5: ",
     "ex_accumulate needs the previous gemmini_loop_ws call to leave its result in the accumulator (C == NULL)"),
    ("loop_ws_ex_accumulate_after_stored",
     loop() + loop(exacc="true"), "gemmini_loop_ws #",
     "ex_accumulate needs the previous gemmini_loop_ws call"),
    ("loop_conv_bad_in_dim",
     "gemmini_loop_conv_ws(1, 10, 16, 16, 4, 3, &A[0][0], &B[0][0], NULL, &C[0][0], NO_ACTIVATION);",
     "gemmini_loop_conv_ws #5: ", "in_dim=10 must equal out_dim + kernel_dim - 1 = 6"),
    ("loop_conv_channels",
     "gemmini_loop_conv_ws(1, 6, 8, 16, 4, 3, &A[0][0], &B[0][0], NULL, &C[0][0], NO_ACTIVATION);",
     "gemmini_loop_conv_ws #5: ", "in_channels and out_channels must be multiples of 16"),
    ("loop_conv_null_output",
     "gemmini_loop_conv_ws(1, 6, 16, 16, 4, 3, &A[0][0], &B[0][0], NULL, NULL, NO_ACTIVATION);",
     "gemmini_loop_conv_ws #5: ", "input, weights and output must not be NULL"),
]


@pytest.mark.parametrize("body,prefix,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_limit_violation_names_instruction_and_problem(run, body, prefix, message):
    r = run(gemm_kernel(PREAMBLE + "  " + body + "\n" + NAIVE_BODY))
    assert_fails(r, "gemmini", message)
    assert r.error.startswith(prefix), r.error
    assert r.cycles is None and r.utilization is None


def test_ids_are_unique():
    assert len({c[0] for c in CASES}) == len(CASES) >= 40


def test_boundary_rows_are_accepted(run):
    # The last scratchpad and accumulator rows are usable: a full-range schedule
    # with A at the top of the scratchpad and C at the top of the accumulator.
    body = (NAIVE_BODY.replace("mvin(&A[i][k], 0,", "mvin(&A[i][k], 16368,")
            .replace("compute_preloaded(0,", "compute_preloaded(16368,")
            .replace("ACC_ADDR_BIT |", "ACC_ADDR_BIT | 1008 |")
            .replace("mvout(&C[i][j], ACC_ADDR_BIT,", "mvout(&C[i][j], ACC_ADDR_BIT | 1008,"))
    assert body.count("16368") == 2 and body.count("1008") == 2
    assert_correct(run(gemm_kernel(body)))


def test_instruction_budget(run):
    # The naive 32x32x32 schedule issues 41 instructions; #31 is the third mvout.
    t = get_target("gemmini-sim", timing={"max_instructions": 30})
    r = t.evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    assert_fails(r, "gemmini", "more than 30 Gemmini instructions issued; the kernel loops forever or is far too slow")
    assert r.error.startswith("mvout #31: "), r.error


def test_instruction_budget_allows_exactly_max_instructions():
    # The naive 32x32x32 schedule issues exactly 41 intrinsics (4 configs, 4 x 9, 1 fence); the end of
    # the kernel does not count.
    r = get_target("gemmini-sim", timing={"max_instructions": 41}).evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    assert_correct(r)
    assert sum(r.feedback["instructions"].values()) == 40   # + the fence, which has no queue of its own
    r = get_target("gemmini-sim", timing={"max_instructions": 40}).evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    assert_fails(r, "gemmini", "more than 40 Gemmini instructions issued")
    assert r.error.startswith("fence #41: "), r.error


def test_infinite_instruction_loop_is_stopped(run):
    t = get_target("gemmini-sim", timing={"max_instructions": 200_000})
    r = t.evaluate(gemm(32, 32, 32), gemm_kernel("  for (;;) config_st(J);"))
    assert_fails(r, "gemmini", "config_st #200001: more than 200000 Gemmini instructions issued")


def test_smaller_configured_scratchpad_is_enforced():
    # gemmini.h still says BANK_ROWS 4096; the simulated machine is what counts.
    t = get_target("gemmini-sim", timing={"spad_rows": 1024, "spad_banks": 4})
    r = t.evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    assert_fails(r, "gemmini", "mvin2 #6: destination rows 4096..4111 are outside the scratchpad (rows 0..1023)")


def test_crash_inside_an_intrinsic_names_the_instruction(run):
    r = run(gemm_kernel(PREAMBLE + "  mvin((const char *)A + (1L << 40), 0, DIM, DIM);\n"))
    assert_fails(r, "crash", "segmentation fault", "last Gemmini instruction: mvin #5")


def test_bad_loop_address_is_reported_by_the_replayer_naming_the_fsm_instruction(run):
    # The kernel only records the loop's arguments, so it cannot crash "inside" the FSM; the replayer's
    # FSM issues the mvin and finds that the address is neither a problem array nor mvout data.
    r = run(gemm_kernel(PREAMBLE + "  " + loop(a="(const elem_t *)(1L << 40)") + "\n"))
    assert_fails(r, "gemmini", "mvin #6 (issued by gemmini_loop_ws): reads DRAM at 0x10000000000 that is neither a "
                 "problem array nor data written by an earlier mvout")
    assert r.error.startswith("mvin #6 (issued by gemmini_loop_ws): "), r.error
    assert r.cycles is None


def test_fsm_instructions_are_numbered_by_the_replayer(run):
    # A 1x1x1 loop issues gemmini_loop_ws #5 and mvin, mvin, preload, compute, mvout #6..#10: the next
    # CPU instruction is #11.
    r = run(gemm_kernel(PREAMBLE + "  " + loop() + "\n  mvin(&A[0][0], 0, DIM, 17);\n"))
    assert_fails(r, "gemmini", "rows=17 is out of range (must be 1..16)")
    assert r.error.startswith("mvin #11: "), r.error


def test_crash_after_a_loop_names_the_same_instruction_number_as_the_replayer(run):
    r = run(gemm_kernel(PREAMBLE + "  " + loop() + "\n  mvin((const char *)A + (1L << 40), 0, DIM, DIM);\n"))
    assert_fails(r, "crash", "segmentation fault")
    assert "last Gemmini instruction: mvin #11" in r.error, r.error
