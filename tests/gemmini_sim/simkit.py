"""Helpers shared by the gemmini-sim tests: small custom problems, kernel
templates and numpy predictions of what a (deliberately wrong) kernel produces.

Custom problems are built directly from autocomp_zmq.hw_runners.base.Problem and the family
classes of hw_runners.gemmini_sim.workloads, so single intrinsics can be tested
on 16..64-sized GEMMs that evaluate in a fraction of a second.

Test kernels never prepare tensor data with CPU loops over the inputs (the
evaluator rejects an mvin of such data): operands come from the problem's
arrays, NULL (zeros), constant tables (c_table), or DRAM scratch buffers
filled by mvout. They also issue the same instructions, DRAM addresses and
loop arguments for every input set (the evaluator rejects anything else), so
a kernel that is wrong on only some input sets is wrong through the data
(DOUBLED_BODY), not through data-dependent control flow.
"""
from __future__ import annotations

import numpy as np

from autocomp_zmq.hw_runners.base import EvalResult, Problem, target_info
from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES, INPUT_SETS

PROBLEM_DIR = target_info("gemmini-sim").problems

TARGET = "gemmini-sim"
GEMM_KERNELS = {role: PROBLEM_DIR / f"gemm_{role}.c" for role in ("naive", "baseline", "tuned", "hwloop")}


def gemm(I: int, J: int, K: int) -> Problem:  # noqa: E741 - the problem's own dimension names
    dims = {"I": I, "J": J, "K": K}
    return Problem(name=FAMILIES["gemm"].name(dims), target=TARGET, family="gemm", dims=dims,
                   description="test problem", kernels=dict(GEMM_KERNELS))


def conv(P: int, C: int) -> Problem:
    dims = {"P": P, "C": C}
    return Problem(name=FAMILIES["conv3x3"].name(dims), target=TARGET, family="conv3x3", dims=dims,
                   description="test problem", kernels={})


def kernel(role: str) -> str:
    return GEMM_KERNELS[role].read_text()


def gemm_kernel(body: str, prelude: str = "") -> str:
    """A complete GEMM kernel: `prelude` at file scope, `body` inside solution()."""
    return ('#include "include/gemmini.h"\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n'
            f"{prelude}\n"
            "void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J]) {\n"
            f"{body}\n"
            "}\n")


# The naive schedule as a reusable body (one 16x16 output tile at a time).
NAIVE_BODY = """
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""


def naive_with(before: str = "", after: str = "", prelude: str = "") -> str:
    """The naive GEMM with extra code before and/or after its schedule."""
    return gemm_kernel(before + NAIVE_BODY + after, prelude)


def inputs(problem: Problem, seed: int = 0, set_index: int = 0) -> list[np.ndarray]:
    fam = FAMILIES[problem.family]
    return fam.make_inputs(problem.dims, seed, INPUT_SETS[set_index % len(INPUT_SETS)])


def reference(problem: Problem, seed: int = 0, set_index: int = 0) -> np.ndarray:
    fam = FAMILIES[problem.family]
    return fam.reference(problem.dims, inputs(problem, seed, set_index))


def sat8(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -128, 127).astype(np.int8)


# A copy-paste bug: every K block is multiplied twice, so the accumulator holds 2*A*B and mvout
# saturates that. Outputs that are 0 or saturate anyway (|A*B| >= 128) still come out right: which
# input set is the first to fail depends only on the data, while the instructions the kernel issues
# are the same for every set (the evaluator rejects data-dependent issuing outright).
DOUBLED_BODY = NAIVE_BODY.replace(
    "        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);\n",
    "        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);\n"
    "        preload(BANK_ROWS, ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM, DIM, DIM);   /* again */\n"
    "        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);\n")
assert DOUBLED_BODY.count("compute_preloaded") == 2


def doubled_prediction(problem: Problem, seed: int, set_index: int) -> np.ndarray:
    a, b = (x.astype(np.int64) for x in inputs(problem, seed, set_index))
    return sat8(2 * (a @ b))


def first_wrong_set(problem: Problem, seed: int, sets: int = 3) -> int | None:
    """Index of the first input set on which DOUBLED_BODY is wrong (None: right on all)."""
    for s in range(sets):
        if not np.array_equal(doubled_prediction(problem, seed, s), reference(problem, seed, s)):
            return s
    return None


def seed_where_doubled_fails_first_on(problem: Problem, set_index: int, sets: int = 3) -> int:
    """The smallest seed for which DOUBLED_BODY is right on the sets before set_index and wrong on it."""
    for seed in range(1000):
        if first_wrong_set(problem, seed, sets) == set_index:
            return seed
    raise AssertionError(f"no seed < 1000 makes the doubled kernel fail first on input set {set_index + 1}")


def stream_rule(set_number: int) -> str:
    """The stable part of the evaluator's message for a kernel whose instructions depend on the input
    values (the message goes on to say what differed and where)."""
    return f"for input set {set_number} than for input set 1"


def mismatch_summary(got: np.ndarray, want: np.ndarray, name: str = "C") -> str:
    """The part of the evaluator's wrong-result message that depends on the data."""
    bad = np.argwhere(got != want)
    assert len(bad), "prediction equals the reference; the test kernel would not be wrong"
    first = tuple(int(i) for i in bad[0])
    where = name + "".join(f"[{i}]" for i in first)
    return (f"{len(bad):,} of {got.size:,} output elements differ; first at {where}: "
            f"got {int(got[first])}, expected {int(want[first])}")


def describe(r: EvalResult) -> str:
    """Everything useful for an assertion message."""
    return (f"correct={r.correct} kind={r.error_kind} error={r.error!r} latency={r.latency} "
            f"stdout={r.stdout[-500:]!r} sandbox={r.sandbox}")


def assert_correct(r: EvalResult) -> None:
    assert r.correct, describe(r)
    assert r.error is None and r.error_kind is None, describe(r)
    assert r.latency and r.latency > 0, describe(r)


def assert_fails(r: EvalResult, kind: str | tuple[str, ...], *substrings: str) -> None:
    kinds = (kind,) if isinstance(kind, str) else kind
    assert not r.correct, describe(r)
    assert r.error_kind in kinds, describe(r)
    for s in substrings:
        assert s in (r.error or ""), f"{s!r} not in error: " + describe(r)


# --------------------------------------------------------------------------- constant tables
def c_table(name: str, m: np.ndarray) -> str:
    """A DIM x DIM int8 constant table: input-independent data a kernel may mvin."""
    assert m.shape == (16, 16) and m.min() >= -128 and m.max() <= 127
    rows = ", ".join("{" + ", ".join(str(int(v)) for v in row) + "}" for row in m)
    return f"static const int8_t {name}[DIM][DIM] = {{{rows}}};\n"


CANCEL = """
  /* acc = A*B + A*W + A*U for every K block, where W is the constant table T
   * loaded by mvin2 with config_ld id 1's scale S1, and U a constant table
   * loaded unscaled by mvin. Right only if the scaled T is exactly -U. */
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(DIM, 1.0f, DIM, 0);
  mvin(U, 3 * BANK_ROWS, DIM, DIM);
  config_ld(DIM, S1, DIM, 1);
  config_ld(DIM, S2, DIM, 2);             /* configured last; id 2 is not used by mvin2 */
  mvin2(T, 2 * BANK_ROWS, DIM, DIM);
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      for (int k = 0; k < K; k += DIM) {
        mvin(&A[i][k], 0, DIM, DIM);
        mvin2(&B[k][j], BANK_ROWS, DIM, DIM);
        preload(BANK_ROWS, ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0), DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        preload(2 * BANK_ROWS, ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
        preload(3 * BANK_ROWS, ACC_ADDR_BIT | ACCUMULATE_BIT, DIM, DIM, DIM, DIM);
        compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
      }
      mvout(&C[i][j], ACC_ADDR_BIT, DIM, DIM);
    }
  fence();
"""


def cancel_kernel(t: np.ndarray, u: np.ndarray, s1: str, s2: str = "1.0f") -> str:
    return gemm_kernel(CANCEL.replace("S1", s1).replace("S2", s2), c_table("T", t) + c_table("U", u))


def cancel_prediction(p: Problem, residue: np.ndarray) -> np.ndarray:
    """What CANCEL computes when the scaled T is -U + residue: every K block adds A_k * residue."""
    a, b = (x.astype(np.int64) for x in inputs(p, 0, 0))
    K, J = p.dims["K"], p.dims["J"]
    extra = sum(a[:, k:k + 16] @ residue.astype(np.int64) for k in range(0, K, 16))
    return sat8(a @ b + np.tile(extra, (1, J // 16)))


# --------------------------------------------------------------------------- forged trace records
# The kernel-side library's record layout (csrc/sim.h rec_t) and its emitter, which a kernel can declare
# and call directly: a forged record is exactly what a hostile kernel can send the replayer.
REC_DECLS = """
typedef struct __attribute__((packed)) {
  uint8_t op, fsm, flags, id; uint32_t d[4]; uint32_t x0, x1, x2; float scale; uint64_t dram, stride;
} rec_t;
void rec_emit(const rec_t *r);
enum { R_CONFIG = 1, R_MVIN, R_MVOUT, R_PRELOAD, R_COMPUTE, R_FENCE };
"""


def forged(op: str, **fields) -> str:
    """A C statement emitting one record: forged("R_MVIN", fsm=1, d="{16, 16}", x0=0, dram="(uintptr_t)&A[0][0]")."""
    init = ", ".join(f".{k} = {v}" for k, v in fields.items())
    return f"rec_emit(&(rec_t){{.op = {op}{', ' + init if init else ''}}});"


# --------------------------------------------------------------------------- hardware loops
# gemmini_loop_ws loads A, B and D with config_ld states 0, 1 and 2 (their row strides and scales) and
# stores with config_st's stride and activation; its own strides only locate the tiles.
LOOP_CONFIG = """
  gemmini_extended3_config_ld(K, MVIN_SCALE_IDENTITY, false, 0);
  gemmini_extended3_config_ld(J, MVIN_SCALE_IDENTITY, false, 1);
  gemmini_extended3_config_ld(J * sizeof(acc_t), MVIN_SCALE_IDENTITY, false, 2);
  gemmini_extended_config_st(J, NO_ACTIVATION, ACC_SCALE_IDENTITY);
"""


def loop_ws(ti: str, tj: str, tk: str, a: str, b: str, d: str, c: str, pads: str = "0, 0, 0",
            strides: str = "K, J, J, J", a_t: str = "false", b_t: str = "false", full_c: str = "false",
            low_d: str = "false", ex_acc: str = "false", act: str = "NO_ACTIVATION", ids: str = "0, 0",
            resadd: str = "false") -> str:
    """A gemmini_loop_ws call with its 23 arguments, named."""
    return (f"gemmini_loop_ws({ti}, {tj}, {tk}, {pads}, {a}, {b}, {d}, {c}, {strides}, {a_t}, {b_t}, {full_c}, "
            f"{low_d}, {ex_acc}, {act}, {ids}, {resadd});")
