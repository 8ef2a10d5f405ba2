"""Every limit violation of the simulated Gemmini fails the kernel with
error_kind 'gemmini' and an error that names the instruction (with its index)
and what was wrong. Kernels start with four config instructions (#1..#4), so
the first instruction of each case body is #5. (What Gemmini itself does
silently, such as row addresses wrapping around or ignored address bits, is
not an error: see test_semantics.py.)"""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners import get_target
from .simkit import NAIVE_BODY, assert_correct, assert_fails, gemm, gemm_kernel

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

PREAMBLE = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
"""

PRE = "preload(GARBAGE_ADDR, ACC_ADDR_BIT, DIM, DIM, DIM, DIM);"
OS = "config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 1, false, false);"
LOOP = ("gemmini_loop_ws({ti}, {tj}, {tk}, {pi}, {pj}, {pk}, {a}, &B[0][0], NULL, &C[0][0], K, J, 0, J, {at}, {bt}, "
        "false, false, {exacc}, {act}, {aid}, 0, false);")


def loop(ti=1, tj=1, tk=1, pi=0, pj=0, pk=0, a="&A[0][0]", at="false", bt="false", exacc="false",
         act="NO_ACTIVATION", aid=0):
    return LOOP.format(ti=ti, tj=tj, tk=tk, pi=pi, pj=pj, pk=pk, a=a, at=at, bt=bt, exacc=exacc, act=act, aid=aid)


# gemmini_loop_conv_ws with its 54 arguments: a 1-image, 4x4-output, 16-channel, 3x3, stride-1 tile of
# the GEMM's arrays (the contents do not matter for these errors)
CONV_ARGS = dict(batch=1, in_dim=6, ich=16, och=16, out_dim=4, stride=1, pad=0, kdim=3, kdil=1, pool_size=1,
                 pool_stride=1, batches=1, porows=4, pocols=4, pochs=16, krows=3, kcols=3, kchs=16, lpad=0, rpad=0,
                 upad=0, dpad=0, orows=4, ocols=4, w="&B[0][0]", out="&C[0][0]", bias="NULL", inp="&A[0][0]",
                 no_bias="true", no_pool="true", downsample="false", act="NO_ACTIVATION", trans="false", maxpix=1)


def conv(**kw):
    a = {**CONV_ARGS, **kw}
    return ("gemmini_loop_conv_ws({batch}, {in_dim}, {in_dim}, {ich}, {och}, {out_dim}, {out_dim}, {out_dim}, "
            "{out_dim}, {stride}, {pad}, {kdim}, {kdil}, {pool_size}, {pool_stride}, 0, {batches}, {porows}, {pocols}, "
            "{pochs}, {krows}, {kcols}, {kchs}, {lpad}, {rpad}, {upad}, {dpad}, 0, 0, 0, 0, {orows}, {ocols}, {w}, {out}, "
            "{bias}, {inp}, {no_bias}, {no_pool}, {downsample}, false, false, {act}, {trans}, false, false, false, "
            "{maxpix}, {ich}, {och}, {och}, false, 0, 0);").format(**a)


CASES = [
    # (id, body, expected start of the error, expected substring)
    ("mvin_rows_17", "mvin(&A[0][0], 0, DIM, 17);", "mvin #5: ", "rows=17 is out of range (must be 1..16)"),
    ("mvin_rows_0", "mvin(&A[0][0], 0, DIM, 0);", "mvin #5: ", "rows=0 is out of range (must be 1..16)"),
    ("mvin_spad_cols_65", "mvin(&A[0][0], 0, 65, DIM);", "mvin #5: ", "cols=65 is out of range (must be 1..64)"),
    ("mvin_acc_cols_17", "mvin(NULL, ACC_ADDR_BIT, 17, DIM);", "mvin #5: ", "cols=17 is out of range (must be 1..16)"),
    ("mvin2_acc_cols_32", "mvin2(NULL, ACC_ADDR_BIT, 32, DIM);", "mvin2 #5: ", "cols=32 is out of range (must be 1..16)"),
    ("mvin_garbage", "mvin(&A[0][0], GARBAGE_ADDR, DIM, DIM);", "mvin #5: ",
     "local address is GARBAGE_ADDR; mvin needs a destination"),
    ("mvin_block_stride_below_rows", "config_ld(K, 1.0f, 8, 0); mvin(&A[0][0], 0, 32, DIM);", "mvin #6: ",
     "block stride 8 is smaller than rows=16: the 2 blocks of this mvin would overlap"),
    ("mvout_cols_65", "mvout(&C[0][0], ACC_ADDR_BIT, 65, DIM);", "mvout #5: ", "cols=65 is out of range (must be 1..64)"),
    ("mvout_full_cols_17", "mvout(&C[0][0], ACC_ADDR_BIT | FULL_READ_BIT, 17, DIM);", "mvout #5: ",
     "cols=17 is out of range (must be 1..16)"),
    ("mvout_rows_17", "mvout(&C[0][0], ACC_ADDR_BIT, DIM, 17);", "mvout #5: ", "rows=17 is out of range (must be 1..16)"),
    ("mvout_null_dram", "mvout(NULL, ACC_ADDR_BIT, DIM, DIM);", "mvout #5: ", "DRAM address is NULL"),
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
    ("compute_a_garbage", PRE + "compute_preloaded(GARBAGE_ADDR, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #6: ", "A is GARBAGE_ADDR; a compute needs an A operand"),
    ("compute_a_cols_17", PRE + "compute_preloaded(0, GARBAGE_ADDR, 17, DIM, DIM, DIM);",
     "compute_preloaded #6: ", "A_cols=17 is out of range (must be 1..16)"),
    ("compute_d_cols_17", PRE + "compute_preloaded(0, 0, DIM, DIM, 17, DIM);",
     "compute_preloaded #6: ", "D_cols=17 is out of range (must be 1..16)"),
    ("os_compute_without_b", OS + PRE + "compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);",
     "compute_preloaded #7: ", "output-stationary compute needs a B operand (second address)"),
    ("os_compute_without_output_tile",
     OS + "preload(GARBAGE_ADDR, GARBAGE_ADDR, DIM, DIM, DIM, DIM); compute_preloaded(0, 64, DIM, DIM, DIM, DIM);",
     "compute_preloaded #7: ", "output-stationary compute with no output tile: preload a C address first"),
    ("config_ex_bad_dataflow", "config_ex(2, NO_ACTIVATION, 1, false, false);", "config_ex #5: ",
     "dataflow=2 (use WEIGHT_STATIONARY or OUTPUT_STATIONARY)"),
    ("config_ex_bad_act", "config_ex(WEIGHT_STATIONARY, 7, 1, false, false);", "config_ex #5: ",
     "act=7 (an unknown activation) is not modelled: gemmini-sim supports NO_ACTIVATION and RELU"),
    ("config_ex_layernorm", "gemmini_config_ex(WEIGHT_STATIONARY, LAYERNORM, 0);", "config_ex #5: ",
     "act=2 (LAYERNORM) is not modelled"),
    ("config_ex_a_stride_0", "config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, false, false);", "config_ex #5: ",
     "A_stride=0 is out of range (1..65535)"),
    ("config_ex_shift_32", "gemmini_config_ex(OUTPUT_STATIONARY, NO_ACTIVATION, 32);", "config_ex #5: ",
     "sys_shift=32 is out of range (0..31)"),
    ("config_st_pooling", "gemmini_extended2_config_st(J, NO_ACTIVATION, 1.0f, 2, 3, 4, 2, 2, 4, 4, 0, 0);",
     "config_st #5: ", "max-pooling on mvout (pool_stride/pool_size and the pooling dimensions) is not modelled"),
    ("config_st_softmax", "gemmini_extended_config_st(J, SOFTMAX, 1.0f);", "config_st #5: ",
     "act=4 (SOFTMAX) is not modelled"),
    ("config_norm", "gemmini_config_norm(0, 0, 0, 0, 0, 0, 0);", "config_norm #5: ",
     "gemmini_config_norm (LayerNorm, Softmax and I-GELU statistics) is not modelled"),
    ("config_ld_pixel_repeats", "gemmini_extended5_config_ld(K, 1.0f, false, DIM, 3, 0);", "config_ld #5: ",
     "pixel_repeats=3 is not modelled (only 1)"),
    ("config_ex_between_preload_and_compute", PRE + "config_ex(WEIGHT_STATIONARY, RELU, 1, false, false);",
     "config_ex #6: ", "config_ex between a preload and its compute"),
    ("config_ld_bad_id", "config_ld(K, 1.0f, DIM, 3);", "config_ld #5: ", "id=3 (0 for mvin, 1 for mvin2, 2 for mvin3)"),
    ("config_ld_nan_scale", "config_ld(K, __builtin_nanf(\"\"), DIM, 0);", "config_ld #5: ", "scale is not a finite number"),
    ("config_ld_inf_scale", "config_ld(K, __builtin_inff(), DIM, 1);", "config_ld #5: ", "scale is not a finite number"),
    # the end of the kernel is not an instruction: it reports the number of the last one
    ("dangling_preload_at_end", PRE + " return;", "end of kernel #5: ", "the kernel ended with a preload that no compute used"),
    # loop arguments are checked by the loop FSM in the replayer, which names the call
    ("loop_ws_zero_tiles", loop(ti=0), "gemmini_loop_ws #5: ", "tile counts I=0 J=1 K=1 must be 1..65535"),
    ("loop_ws_too_many_tiles", loop(tk=65536), "gemmini_loop_ws #5: ", "tile counts I=1 J=1 K=65536 must be 1..65535"),
    ("loop_ws_pad_16", loop(pj=16), "gemmini_loop_ws #5: ", "pad_I/pad_J/pad_K must be < 16"),
    ("loop_ws_both_transposed", loop(at="true", bt="true"), "gemmini_loop_ws #5: ",
     "A_transpose and B_transpose cannot both be set (Gemmini asserts it)"),
    ("loop_ws_bad_spad_id", loop(aid=3), "gemmini_loop_ws #5: ", "a_spad_id and b_spad_id must be 0, 1 or 2"),
    ("loop_ws_layernorm", loop(act="LAYERNORM"), "gemmini_loop_ws #5: ",
     "act=2 is not modelled (LAYERNORM/SOFTMAX mvouts); use NO_ACTIVATION or RELU"),
    ("loop_ws_spad_overflow", loop(ti=4, tj=4, tk=100), "gemmini_loop_ws #5: ",
     "A (6400 rows from row 0) and B (6400 rows from row 1792) overlap in the scratchpad: each loop may use half "
     "of it (8192 rows)"),
    ("loop_ws_acc_overflow", loop(ti=8, tj=8, tk=1), "gemmini_loop_ws #5: ",
     "C (8x8 tiles) needs 1024 accumulator rows; a loop may use half of the accumulator (512 rows)"),
    ("loop_conv_negative_pad", conv(lpad=-1), "gemmini_loop_conv_ws #5: ",
     "sizes, strides and tile counts must be positive and pads not negative"),
    ("loop_conv_pooling", conv(no_pool="false"), "gemmini_loop_conv_ws #5: ", "max-pooling is not modelled"),
    ("loop_conv_downsample", conv(downsample="true"), "gemmini_loop_conv_ws #5: ",
     "downsample, input dilation, wrot180, the transposed layouts and depthwise convolutions are not modelled"),
    ("loop_conv_pixel_repeats", conv(maxpix=2), "gemmini_loop_conv_ws #5: ",
     "max_pixels_per_row > 1 (pixel repeats) is not modelled"),
    ("loop_conv_acc_overflow", conv(pochs=128, porows=4, pocols=4, batches=8), "gemmini_loop_conv_ws #5: ",
     "the output tile needs 1024 accumulator rows; a loop may use half (512)"),
]


@pytest.mark.parametrize("body,prefix,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_limit_violation_names_instruction_and_problem(run, body, prefix, message):
    r = run(gemm_kernel(PREAMBLE + "  " + body + "\n" + NAIVE_BODY))
    assert_fails(r, "gemmini", message)
    assert r.error.startswith(prefix), r.error
    assert r.latency is None and r.utilization is None


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


def test_smaller_configured_scratchpad_is_what_counts():
    # gemmini.h still says BANK_ROWS 4096; the simulated machine is what counts: row 4096 of a 1024-row
    # scratchpad is row 0 (row addresses have log2(rows) bits), where the A tile already is.
    t = get_target("gemmini-sim", timing={"spad_rows": 1024, "spad_banks": 4})
    r = t.evaluate(gemm(32, 32, 32), gemm_kernel(NAIVE_BODY))
    assert_fails(r, "wrong_result")
    assert any("address bits above the scratchpad's 1024 rows are ignored" in w for w in r.feedback["warnings"]), r.feedback


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
    assert r.latency is None


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
