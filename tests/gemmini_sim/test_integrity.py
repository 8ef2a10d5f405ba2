"""Findings of the adversarial review of gemmini-sim, each reproduced as a test.

Every kernel here was accepted (or broke the evaluator) before the judge was
rebuilt; the tests state what must hold instead:
- answers computed on the CPU cannot be smuggled in, even when the kernel knows
  every public input set: the replayer re-runs the recorded program on hidden
  input sets the kernel process never receives;
- a lone carriage return ends a comment for the source policy exactly as for
  gcc, and the compiler cannot see host files at all;
- what a kernel writes (diagnostics, stdout) cannot blow up the result;
- forged trace records are rejected, never executed;
- the compiler's temporary files stay in the private work directory.
"""
from __future__ import annotations

import json
import os
import tracemalloc
import uuid
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.sandbox import Limits
from .simkit import (NAIVE_BODY, REC_DECLS, assert_correct, assert_fails, describe, forged, gemm, gemm_kernel, inputs,
                     naive_with, reference)

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

P = gemm(32, 32, 32)


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    return get_target("gemmini-sim", run_limits=Limits(wall_s=10, cpu_s=5, mem_bytes=512 << 20),
                      work_root=tmp_path_factory.mktemp("integrity-work"))


# --------------------------------------------------------------------------- smuggled answers
# The accelerator only *selects* one of three answer tables the CPU prepared: for each table s it
# turns one input element A[qi[s]][qk[s]] (positive only in input set s) into an indicator 0/1
# (x * 127, relu and int8 saturation on mvout, then mvin scaled by 1/127), spreads the indicator over
# the diagonal of a 16x16 weight tile, and accumulates table s times that diagonal. The instruction
# stream and every table it loads are the same for every input set, so the rules about data-dependent
# instructions and input-dependent constants cannot see it; only inputs the kernel never saw can.
SELECT = """
  if (!ready) { prepare(); ready = 1; }
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(DIM, 1.0f, DIM, 0);
  config_ld(0, 1.0f / 127, DIM, 1);
  config_ld(J, 1.0f, DIM, 2);
  gemmini_extended_config_st(DIM, RELU, 1.0f);
  mvin(W127, 0, DIM, DIM);
  for (int r = 0; r < DIM; r++) mvin(E[r], DIM * (1 + r), DIM, DIM);
  for (int s = 0; s < 3; s++) {
    mvin(&A[qi[s]][qk[s]], 300 + s, 1, 1);
    preload(0, ACC_ADDR_BIT | (s * DIM), DIM, 1, DIM, 1);
    compute_preloaded(300 + s, GARBAGE_ADDR, 1, 1, DIM, DIM);
    mvout(ind[s], ACC_ADDR_BIT | (s * DIM), DIM, 1);
  }
  fence();
  for (int s = 0; s < 3; s++) {
    mvin2(ind[s], 310 + s, 1, 1);
    for (int r = 0; r < DIM; r++) {
      preload(DIM * (1 + r), BANK_ROWS + s * DIM + r, DIM, 1, DIM, 1);
      compute_preloaded(310 + s, GARBAGE_ADDR, 1, 1, DIM, DIM);
    }
  }
  gemmini_extended_config_st(J, NO_ACTIVATION, 1.0f);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int s = 0; s < 3; s++) {
        mvin3(&tab[s][i][j], 2 * BANK_ROWS + s * DIM, DIM, DIM);
        preload(BANK_ROWS + s * DIM, ACC_ADDR_BIT | (s ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(2 * BANK_ROWS + s * DIM, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""
SELECT_TABLES = """
static const int8_t W127[DIM][DIM] = {{127}};
static int8_t E[DIM][DIM][DIM];
static int8_t ind[3][DIM];
static int ready;
"""

# Variant 1: the kernel reads every input set from the job descriptor at its first call and
# multiplies on the CPU.
READ_AHEAD = SELECT_TABLES + """
long pread(int, void *, unsigned long, long);
static int8_t tab[3][I][J];
static int qi[3], qk[3];
static void prepare(void) {
  static char job[1 << 16];
  for (int r = 0; r < DIM; r++) E[r][0][r] = 1;
  long n = pread(3, job, sizeof job, 0);
  char *p = n > 0 ? strstr(job, "\\nend\\n") : NULL;
  if (!p) return;
  const int8_t *set[3];
  for (int s = 0; s < 3; s++) {
    const int8_t *a = (const int8_t *)p + 5 + s * (I * K + K * J), *b = a + I * K;
    set[s] = a;
    for (int i = 0; i < I; i++)
      for (int j = 0; j < J; j++) {
        int acc = 0;
        for (int k = 0; k < K; k++) acc += a[i * K + k] * b[k * J + j];
        tab[s][i][j] = acc > 127 ? 127 : acc < -128 ? -128 : acc;
      }
  }
  for (int s = 0; s < 3; s++)
    for (int q = 0; q < I * K; q++)
      if (set[s][q] > 0 && set[(s + 1) % 3][q] <= 0 && set[(s + 2) % 3][q] <= 0) { qi[s] = q / K; qk[s] = q % K; break; }
}
"""


def memorized_kernel(problem, seed: int = 0) -> str:
    """Variant 2: the answers of the three public input sets are baked into the source (a model that
    memorized the evaluator's seeded inputs), with indicator positions chosen from them."""
    a = [inputs(problem, seed, s)[0] for s in range(3)]
    pos = []
    for s in range(3):
        hits = np.argwhere((a[s] > 0) & (a[(s + 1) % 3] <= 0) & (a[(s + 2) % 3] <= 0))
        assert len(hits), "no indicator position for this input set: change the seed"
        pos.append(tuple(int(v) for v in hits[0]))

    def table(m: np.ndarray) -> str:
        return "{" + ", ".join("{" + ", ".join(str(int(v)) for v in row) + "}" for row in m) + "}"
    tabs = ", ".join(table(reference(problem, seed, s)) for s in range(3))
    prelude = SELECT_TABLES + f"""
static const int8_t tab[3][I][J] = {{{tabs}}};
static const int qi[3] = {{{pos[0][0]}, {pos[1][0]}, {pos[2][0]}}}, qk[3] = {{{pos[0][1]}, {pos[1][1]}, {pos[2][1]}}};
static void prepare(void) {{ for (int r = 0; r < DIM; r++) E[r][0][r] = 1; }}
"""
    return gemm_kernel(SELECT, prelude)


def test_answers_read_ahead_from_the_job_are_not_accepted(judge):
    # The kernel process receives one input set at a time, and never the hidden ones: the tables it can
    # build in its first call hold nothing useful.
    r = judge.evaluate(P, gemm_kernel(SELECT, READ_AHEAD))
    assert_fails(r, "wrong_result")
    assert r.latency is not None   # a valid program, judged wrong on its results


def test_memorized_answers_fail_on_a_hidden_input_set(judge):
    r = judge.evaluate(P, memorized_kernel(P))
    assert_fails(r, "wrong_result", "hidden input set", "the kernel never saw")
    # the tables are right for every public set: only the hidden set caught it
    assert r.error.startswith("wrong result on hidden input set 1 of 1"), r.error


def test_hidden_input_sets_are_fresh_for_every_evaluation():
    # The hidden sets come from the operating system's randomness unless a seed is fixed for
    # reproducible tests; a fixed seed gives the same verdict twice.
    fixed = get_target("gemmini-sim", secret_seed=1234)
    first, second = (fixed.evaluate(P, memorized_kernel(P)) for _ in range(2))
    assert not first.correct and first.error == second.error


def test_honest_kernels_pass_the_hidden_sets(judge):
    for role in ("naive", "tuned", "hwloop"):
        assert_correct(judge.evaluate(gemm(64, 64, 64), gemm(64, 64, 64).kernel_source(role)))


# --------------------------------------------------------------------------- source and compiler
def host_secret(tmp_path: Path) -> tuple[Path, str]:
    """A host file every user can read, and its first line, which gcc would quote in an error."""
    path = Path("/etc/passwd")
    return path, path.read_text().splitlines()[0]


def test_lone_carriage_return_ends_a_comment_for_the_policy_too(judge, tmp_path):
    secret, token = host_secret(tmp_path)
    r = judge.evaluate(P, naive_with(prelude=f'// note\r#include "{secret}"\n'))
    assert_fails(r, "policy", "is not allowed")
    assert token not in json.dumps(r.to_dict())


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_kernels_with_other_line_endings_still_work(judge, newline):
    assert_correct(judge.evaluate(P, naive_with().replace("\n", newline)))


def test_compiler_cannot_read_host_files(judge, tmp_path, monkeypatch):
    # Defence in depth: with the source policy switched off, an #include of a host file finds nothing.
    import autocomp_zmq.hw_runners.gemmini_sim.target as target_module
    monkeypatch.setattr(target_module, "check_source", lambda code: None)
    secret, token = host_secret(tmp_path)
    r = judge.evaluate(P, naive_with(prelude=f'#include "{secret}"\n'))
    assert_fails(r, "compile", "No such file or directory")
    assert token not in json.dumps(r.to_dict())
    r = judge.evaluate(P, naive_with(prelude='#include "/proc/self/environ"\n'))
    assert_fails(r, "compile", "No such file or directory")
    assert "fs private" in r.sandbox or "fs landlock" in r.sandbox, describe(r)


def test_compiler_cannot_probe_host_paths(judge, tmp_path):
    # __has_include answers only for the toolchain and the work directory.
    secret, _ = host_secret(tmp_path)
    probe = f'#if __has_include("{secret}") || __has_include("/etc/passwd")\n#error HOST_PATH_VISIBLE\n#endif\n'
    r = judge.evaluate(P, naive_with(prelude=probe))
    assert_correct(r)


def test_compiler_temporary_files_die_with_the_work_directory(tmp_path):
    # gcc creates its temporary .s/.o files when it starts; a compile killed at the time limit used
    # to leave them in the system's temporary directory.
    t = get_target("gemmini-sim", compile_limits=Limits(wall_s=1.5, cpu_s=10, mem_bytes=2 << 30),
                   work_root=tmp_path)
    system_tmp = Path("/tmp")
    before = {p.name for p in system_tmp.glob("cc*")}
    bomb = "#define X0 1\n" + "".join(f"#define X{i} (X{i - 1}+X{i - 1})\n" for i in range(1, 40))
    r = t.evaluate(P, naive_with(prelude=bomb + "static int bomb = X34;\n"))
    assert_fails(r, "compile", "timed out")
    assert {p.name for p in system_tmp.glob("cc*")} - before == set()
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- bounded output
FLOOD = """
  static char junk[1 << 20];
  static int once;
  if (!once++) {
    for (int i = 0; i < (int)sizeof junk; i++) junk[i] = i % 100 == 99 ? '\\n' : 'x';
    for (int m = 0; m < 32; m++) { write(5, junk, sizeof junk); write(1, junk, sizeof junk); }
  }
"""


def test_a_flood_of_diagnostics_gives_a_small_result(judge):
    tracemalloc.start()
    try:
        r = judge.evaluate(P, naive_with(after=FLOOD, prelude="long write(int, const void *, unsigned long);\n"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(json.dumps(r.to_dict())) < 64 * 1024, describe(r)
    assert_fails(r, "crash", "output size limit exceeded (the kernel printed too much")
    assert peak < 16 << 20, f"the evaluator allocated {peak >> 20} MiB for one result"
    assert len(r.sandbox) <= 16 and all(len(n) <= 200 for n in r.sandbox)


# --------------------------------------------------------------------------- forged trace records
@pytest.mark.parametrize("statement,message", [
    # A_stride, C_stride and block strides are 16-bit fields on the hardware; 15 * 0x11111112 wrapped to 14
    # in 32 bits, and the old replayer read far outside the scratchpad
    (forged("R_CONFIG", id=1, d="{0, 1}", x0="0x11111112u", x1=1), "A_stride=286331154 is out of range (1..65535)"),
    ("gemmini_extended_config_ex(WEIGHT_STATIONARY, 0, 0, 0x11111112u, 0, 0);", "A_stride=286331154 is out of range"),
    (forged("R_CONFIG", id=0, d="{0, 1}", x2=16, scale='__builtin_nanf("")'), "scale is not a finite number"),
    ("config_ld(K, __builtin_inff(), DIM, 0);", "scale is not a finite number"),
    (forged("R_CONFIG", id=0, d="{0, 1}", x2="0xFFFFFFF0u", scale="1.0f"), "block stride 4294967280 is out of range"),
    (forged("R_CONFIG", id=2, d="{0, 9}", scale="1.0f"), "max-pooling on mvout"),
    (forged("R_MVIN", id=7, d="{16, 16}", dram="(uintptr_t)&A[0][0]"), "malformed trace record (mvin load state 7)"),
    (forged("R_MVIN", fsm=1, d="{16, 16}", dram="(uintptr_t)&A[0][0]"), "only the replayer's loop FSM issues"),
    (forged("99"), "malformed trace record (op 99)"),
    (forged("R_PRELOAD", flags=64, d="{16, 16, 16, 16}"), "malformed trace record (flags 0x40)"),
], ids=["a_stride_forged", "a_stride_api", "nan_scale", "inf_scale", "block_stride_wraps", "pooling", "load_state",
        "fsm_flag", "unknown_op", "bad_flags"])
def test_forged_trace_records_are_rejected(judge, statement, message):
    r = judge.evaluate(P, naive_with(before="  " + statement + "\n", prelude=REC_DECLS))
    assert_fails(r, "gemmini", message)
    assert "#1" in r.error, r.error   # named as the kernel's first instruction


# --------------------------------------------------------------------------- DRAM hazards
# The naive schedule, with every result tile stored to a scratch buffer S and brought back from it.
SCRATCH = "  static int8_t S[I][J];\n  config_ld(J, 1.0f, DIM, 2);\n" + NAIVE_BODY.replace(
    "      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);\n",
    "      mvout(&S[i][j], ACC_ADDR_BIT, DIM, DIM);\n      FENCE\n      mvin3(&S[i][j], 2 * BANK_ROWS, DIM, DIM);\n"
    "      mvout(&C[i][j], 2 * BANK_ROWS, DIM, DIM);\n")
assert "mvin3(&S[i][j]" in SCRATCH


def test_mvin_of_mvout_results_without_a_fence_is_an_error(judge):
    # 5 configs, 2 x (mvin, mvin2, preload, compute) = #6..#13 for K = 32: the first mvout is #14
    r = judge.evaluate(P, gemm_kernel(SCRATCH.replace("FENCE", "")))
    assert_fails(r, "gemmini", "mvin3 #15", "mvout #14", "fence")


def test_mvin_of_mvout_results_after_a_fence_is_fine(judge):
    assert_correct(judge.evaluate(P, gemm_kernel(SCRATCH.replace("FENCE", "fence();"))))
