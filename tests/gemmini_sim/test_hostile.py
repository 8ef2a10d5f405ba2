"""Hostile kernels. Each must end with correct == False and a clear reason, and
the evaluator (one shared target object, as a search would use it) must keep
working afterwards. Kernels that escape the checks today are kept as strict
xfail tests naming the product bug.

The kernel process only records Gemmini instructions; a trusted replayer
executes them on its own copy of the inputs. So what a kernel writes into its
own memory or descriptors (C, fd 4/5, g_cfg) cannot change outputs, verdict or
cycles, and a launcher-level seccomp filter is in force before the kernel's
first instruction (constructors and a replaced prctl() included). What the
kernel issues must be the same for every input set (data-dependent
instructions or addresses are rejected), and only the replayer's loop FSMs
issue FSM instructions."""
from __future__ import annotations

import os
import platform
import struct
import uuid
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.gemmini_sim.policy import MAX_SOURCE_BYTES
from autocomp_zmq.sandbox import Limits
from .simkit import (NAIVE_BODY, REC_DECLS, assert_correct, assert_fails, describe, gemm, gemm_kernel, inputs,
                     forged, mismatch_summary, naive_with, reference, sat8, stream_rule)

pytestmark = [pytest.mark.system, pytest.mark.timeout(90)]

PROBLEM = gemm(32, 32, 32)

# Prototypes of libc functions whose headers the policy does not allow:
# declaring them by hand is legal C, so the sandbox must stop the calls.
DECLS = """
int fork(void); int vfork(void); long syscall(long, ...); unsigned sleep(unsigned);
int socket(int, int, int); int connect(int, const void *, unsigned);
int execl(const char *, const char *, ...); int kill(int, int); int getppid(void);
int close(int); int pthread_create(void *, const void *, void *(*)(void *), void *);
int chdir(const char *); int unlink(const char *); int setrlimit(int, const void *);
long write(int, const void *, unsigned long); long pread(int, void *, unsigned long, long);
static void *thread_main(void *arg) { return arg; }
static int deep(int n) { volatile char pad[512]; pad[0] = (char)n; return deep(n + 1) + pad[0]; }
"""


@pytest.fixture(scope="module")
def work_root(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile-work")


@pytest.fixture(scope="module")
def hostile(work_root):
    """One evaluator for all hostile kernels, with limits small enough to keep the suite fast."""
    return get_target("gemmini-sim",
                      run_limits=Limits(wall_s=4, cpu_s=2, mem_bytes=512 << 20, fsize_bytes=1 << 20),
                      compile_limits=Limits(wall_s=20, cpu_s=20, mem_bytes=300 << 20),
                      work_root=work_root)


def evil(before: str = "", after: str = "", prelude: str = "") -> str:
    return naive_with(before, after, DECLS + prelude)


def tcp_connect() -> str:
    return """
  int s = socket(2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
  unsigned char addr[16] = {2, 0, 0x1f, 0x90, 127, 0, 0, 1};   /* 127.0.0.1:8080 */
  connect(s, addr, sizeof addr);
"""


FORBIDDEN = "forbidden system call"
CASES = [
    # id, code, accepted error kinds, substrings of the error[, xfail mark]
    ("fork_bomb", evil("  for (;;) fork();\n"), "crash", [FORBIDDEN, "(clone)"]),
    ("vfork", evil("  if (vfork() == 0) for (;;);\n"), "crash", [FORBIDDEN]),
    # glibc blocks signals around clone() here, so the crash handler cannot name the call: the SIGSYS
    # death itself is reported as a forbidden system call
    ("pthread_create", evil("  char t[64]; pthread_create(t, NULL, thread_main, NULL);\n"), "crash",
     [FORBIDDEN]),
    ("system", evil('  system("echo pwned > /tmp/autocomp-system-pwned");\n'), "crash", [FORBIDDEN]),
    ("popen", evil('  FILE *p = popen("id", "r"); if (p) fgetc(p);\n'), "crash", [FORBIDDEN]),
    ("exec_shell", evil('  execl("/bin/sh", "sh", "-c", "echo pwned", (char *)0);\n'), "crash",
     [FORBIDDEN, "(execve)"]),
    ("tcp_socket", evil(tcp_connect()), "crash", [FORBIDDEN, "(socket)"]),
    ("open_proc_self_environ", evil('  FILE *f = fopen("/proc/self/environ", "r"); if (f) fgetc(f);\n'),
     "crash", [FORBIDDEN, "(openat)"]),
    ("open_proc_1_environ", evil('  FILE *f = fopen("/proc/1/environ", "r"); if (f) fgetc(f);\n'),
     "crash", [FORBIDDEN, "(openat)"]),
    ("read_etc_passwd", evil('  FILE *f = fopen("/etc/passwd", "r"); if (f) printf("%c", fgetc(f));\n'),
     "crash", [FORBIDDEN, "(openat)"]),
    ("kill_parent", evil("  kill(getppid(), 9);\n"), "crash", [FORBIDDEN]),
    ("kill_init", evil("  kill(1, 9);\n"), "crash", [FORBIDDEN, "(kill)"]),
    ("kill_everything", evil("  kill(-1, 9);\n"), "crash", [FORBIDDEN, "(kill)"]),
    ("close_stdout_fd", evil("  close(1);\n"), "crash", [FORBIDDEN, "(close)"]),
    ("fclose_stdout", evil("  fclose(stdout);\n"), "crash", [FORBIDDEN, "(close)"]),
    ("unlink_binary", evil('  unlink("kernel");\n'), "crash", [FORBIDDEN]),
    ("pipe2", evil("  int fds[2]; pipe2(fds, 0);\n", prelude="int pipe2(int *, int);\n"), "crash",
     [FORBIDDEN, "(pipe2)"]),
    ("chdir_root", evil('  chdir("/");\n'), "crash", [FORBIDDEN, "(chdir)"]),
    ("raise_rlimit", evil("  long lim[2] = {-1, -1}; setrlimit(9 /* RLIMIT_AS */, lim);\n"), "crash", [FORBIDDEN]),
    ("null_write", evil("  *(volatile int *)0 = 1;\n"), "crash",
     ["segmentation fault (invalid memory access or stack overflow)", "last Gemmini instruction: startup #0"]),
    ("write_rodata", evil('  char *s = (char *)"constant"; s[0] = 1; printf("%s", s);\n'), "crash",
     ["segmentation fault"]),
    ("stack_overflow", evil("  printf(\"%d\", deep(0));\n"), "crash", ["segmentation fault"]),
    ("memory_bomb", evil("  for (;;) { char *p = malloc(1 << 20); memset(p, 1, 1 << 20); }\n"), ("crash", "limit"), []),
    ("abort", evil("  abort();\n"), "crash", ["aborted (assert or abort())"]),
    ("divide_by_zero", evil("  volatile int a = 7, z = 0; volatile int q = a / z; (void)q;\n"), "crash",
     ["arithmetic exception (e.g. integer division by zero)"]),
    ("trap_instruction", evil("  __builtin_trap();\n"), "crash", ["illegal instruction"]),
    ("exit_early", evil("  exit(0);\n"), "limit",
     ["exited with status 0 before the harness finished (the kernel must return from solution(), not exit)"]),
    ("exit_after_results", evil(after="  exit(0);\n"), "limit", ["exited with status 0 before the harness finished"]),
    ("huge_output", evil('  for (;;) printf("%s\\n", "flood flood flood flood flood flood flood flood");\n'),
     "crash", ["output size limit exceeded (the kernel printed too much)"]),
    ("infinite_loop", evil("  volatile unsigned long x = 0; for (;;) x++;\n"), ("crash", "timeout"), ["time"]),
    ("sleep_forever", evil("  for (;;) sleep(100);\n"), "timeout",
     ["timed out after 4 s (wall-clock limit); it may loop forever or sleep"]),
    # rejected before compiling
    ("include_etc_passwd", evil(prelude='#include "/etc/passwd"\n'), "policy", ["#include of '/etc/passwd' is not allowed"]),
    ("include_proc_environ", evil(prelude="#include </proc/self/environ>\n"), "policy",
     ["#include of '/proc/self/environ' is not allowed"]),
    ("include_parent_environ", evil(prelude='#include "../../../../proc/1/environ"\n'), "policy", ["is not allowed"]),
    ("include_unistd", evil(prelude="#include <unistd.h>\n"), "policy", ["#include of 'unistd.h' is not allowed"]),
    ("include_macro", evil(prelude='#define F "/etc/passwd"\n#include F\n'), "policy",
     ['only literal #include "file" or <file> is allowed']),
    ("include_next", evil(prelude="#include_next <stdio.h>\n"), "policy", ["#include_next is not allowed"]),
    ("inline_asm", evil('  __asm__ volatile("syscall");\n'), "policy", ["inline assembly is not allowed"]),
    ("incbin", evil(prelude='static const char blob[] = "x"; /* .incbin */\nvoid f(void) { asm(".incbin \\"/etc/passwd\\""); }\n'),
     "policy", ["inline assembly is not allowed"]),
    ("constructor", evil(prelude="__attribute__((constructor)) static void early(void) { fork(); }\n"), "policy",
     ["constructors/destructors (code that runs outside solution()) are not allowed"]),
    ("destructor", evil(prelude="__attribute__((destructor)) static void late(void) { fork(); }\n"), "policy",
     ["constructors/destructors"]),
    ("init_array", evil(prelude='static void f(void) {}\n__attribute__((section(".init_array"))) void (*p)(void) = f;\n'),
     "policy", ["placing code or data in ELF sections is not allowed"]),
    ("define_main", evil(prelude="int main(void) { return 0; }\n"), "policy",
     ["kernels may not define or call the harness's own functions"]),
    ("call_harness_fail", evil(after='  { void harness_fail(const char *); harness_fail("ok 1"); }\n'), "policy",
     ["kernels may not define or call the harness's own functions"]),
    ("oversized_source", evil(prelude="/*" + "x" * (MAX_SOURCE_BYTES + 10) + "*/\n"), "policy",
     ["kernel source is larger than 256 KiB"]),
    ("nul_byte", evil(prelude="/* \0 */\n"), "policy", ["NUL bytes"]),
    ("no_entry_point", "int x;\n", "policy", ["kernel defines no `void solution(...)` entry point"]),
    # rejected by the compiler
    ("macro_expansion_bomb",
     evil(prelude="#define X0 1\n" + "".join(f"#define X{i} (X{i - 1}+X{i - 1})\n" for i in range(1, 40))
          + "static int bomb = X34;\n"), "compile", []),
    ("wrong_signature", gemm_kernel("", "").replace("int8_t C[I][J]", "int32_t C[I][J]"), "compile",
     ["compile error", "conflicting types for 'solution'"]),
    ("syntax_error", evil("  this is not C;\n"), "compile", ["compile error", "kernel.c:"]),
]


def _case_params():
    # (id, code, kinds, substrings[, marks])
    for c in CASES:
        yield pytest.param(*c[1:4], id=c[0], marks=c[4:])


def _case_ids():
    return [c[0] for c in CASES]


@pytest.mark.parametrize("code,kinds,substrings", list(_case_params()))
def test_hostile_kernel_fails_cleanly(hostile, code, kinds, substrings):
    r = hostile.evaluate(PROBLEM, code)     # the sandbox's limits end a kernel that would hang (pytest-timeout backs them)
    assert_fails(r, kinds, *substrings)
    assert r.latency is None, describe(r)
    if r.error_kind not in ("policy", "compile"):
        assert "seccomp on" in r.sandbox and "net isolated" in r.sandbox, describe(r)
    if os.geteuid() == 0 and r.error_kind != "policy":
        assert "user nobody" in r.sandbox, describe(r)


def test_enough_hostile_cases():
    assert len(CASES) >= 15 and len(set(_case_ids())) == len(CASES)


def test_huge_output_is_truncated(hostile):
    r = hostile.evaluate(PROBLEM, evil('  for (;;) printf("%s\\n", "flood flood flood flood flood flood flood");\n'))
    assert_fails(r, "crash", "output size limit exceeded")
    assert len(r.stdout) < 5000 and "bytes omitted" in r.stdout and "flood" in r.stdout


def test_memory_bomb_is_bounded(hostile):
    r = hostile.evaluate(PROBLEM, evil("  for (;;) { char *p = malloc(1 << 20); if (!p) { puts(\"NULL\"); fflush(stdout); abort(); } memset(p, 1, 1 << 20); }\n"))
    # The 512 MiB address-space limit makes malloc fail; the kernel then aborts.
    assert_fails(r, "crash", "aborted")
    assert "NULL" in r.stdout


def test_file_outside_workdir_is_not_created(hostile):
    target = Path(f"/tmp/autocomp-pwned-{uuid.uuid4().hex}")
    try:
        r = hostile.evaluate(PROBLEM, evil(f'  FILE *f = fopen("{target}", "w"); if (f) {{ fputs("pwned", f); fclose(f); }}\n'))
        assert_fails(r, "crash", FORBIDDEN, "(openat)")
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_file_inside_workdir_is_not_created(tmp_path):
    t = get_target("gemmini-sim", run_limits=Limits(wall_s=10, cpu_s=5), work_root=tmp_path, keep_workdir=True)
    r = t.evaluate(PROBLEM, evil('  FILE *f = fopen("pwned.txt", "w"); if (f) { fputs("pwned", f); fclose(f); }\n'))
    assert_fails(r, "crash", FORBIDDEN, "(openat)")
    workdirs = list(tmp_path.iterdir())
    assert len(workdirs) == 1 and (workdirs[0] / "build" / "kernel.c").exists()
    assert not list(workdirs[0].rglob("pwned.txt"))


def test_parent_environment_does_not_leak(hostile, monkeypatch):
    secret = "s3cr3t-" + uuid.uuid4().hex
    monkeypatch.setenv("AUTOCOMP_TEST_SECRET", secret)
    code = evil("""
  extern char **environ;
  const char *s = getenv("AUTOCOMP_TEST_SECRET");
  int n = 0;
  for (char **e = environ; e && *e; e++, n++) printf("ENV %s\\n", *e);
  printf("SECRET=%s ENVCOUNT=%d\\n", s ? s : "NONE", n);
""")
    r = hostile.evaluate(PROBLEM, code)
    blob = r.stdout + r.stderr + (r.error or "") + r.feedback_text
    assert secret not in blob
    assert r.correct, describe(r)
    assert "SECRET=NONE ENVCOUNT=0" in r.stdout  # the kernel ran with an empty environment


def test_raw_clone_syscall_is_forbidden(hostile):
    if platform.machine() != "x86_64":
        pytest.skip("system call number is x86_64-specific")
    r = hostile.evaluate(PROBLEM, evil("  syscall(56 /* SYS_clone */, 17 /* SIGCHLD */, 0, 0, 0, 0);\n"))
    assert_fails(r, "crash", "forbidden system call 56 (clone)")


@pytest.mark.parametrize("call,name", [("syscall(435 /* SYS_clone3 */, 0, 0)", "435 (clone3)"),
                                       ('syscall(87 /* SYS_unlink */, "kernel")', "87 (unlink)"),
                                       ("syscall(293 /* SYS_pipe2 */, (int[2]){0}, 0)", "293 (pipe2)")],
                         ids=["clone3", "unlink", "pipe2"])
def test_forbidden_system_calls_are_named(hostile, call, name):
    if platform.machine() != "x86_64":
        pytest.skip("system call numbers are x86_64-specific")
    r = hostile.evaluate(PROBLEM, evil(f"  {call};\n"))
    assert_fails(r, "crash", f"forbidden system call {name}: kernels may only compute, allocate memory and print")


# --------------------------------------------------------------------------- the kernel's own process does not count
def test_cpu_stores_into_the_output_have_no_effect(hostile):
    # Only what mvout wrote in the replayer counts: corrupting C afterwards changes nothing ...
    honest = hostile.evaluate(PROBLEM, gemm_kernel(NAIVE_BODY))
    assert_correct(honest)
    r = hostile.evaluate(PROBLEM, evil(after="  for (int i = 0; i < I; i++) C[i][i] ^= 0x5a;\n"))
    assert_correct(r)
    assert r.latency == honest.latency
    # ... and "repairing" a wrong result on the CPU does not make it right.
    repair = """
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j++) {
      int acc = 0;
      for (int k = 0; k < K; k++) acc += A[i][k] * B[k][j];
      C[i][j] = acc > 127 ? 127 : acc < -128 ? -128 : acc;
    }
"""
    wrong = NAIVE_BODY.replace("ACC_ADDR_BIT | (k ? ACCUMULATE_BIT : 0)", "ACC_ADDR_BIT")  # keeps the last K block
    r = hostile.evaluate(PROBLEM, gemm_kernel(wrong + repair))
    a, b = (x.astype(np.int64) for x in inputs(PROBLEM, 0, 0))
    got = sat8(a[:, 16:] @ b[16:, :])
    assert_fails(r, "wrong_result", "wrong result on input set 1 of 3", mismatch_summary(got, reference(PROBLEM, 0, 0)))


def test_kernel_cannot_forge_cycles_through_stats_fd(hostile):
    honest = hostile.evaluate(PROBLEM, gemm_kernel(NAIVE_BODY))
    assert_correct(honest)
    r = hostile.evaluate(PROBLEM, evil(after='  static int calls; if (calls++ == 1) write(5, "cycles 7\\n", 9);\n'))
    assert_correct(r)
    assert r.latency == honest.latency, describe(r)


FORGED_VERDICT = """
  /* Never touches Gemmini: reads every input set from the job descriptor,
   * multiplies on the CPU, writes the outputs and a fake "ok" verdict. */
  static char job[1 << 20];
  static int8_t c[I][J];
  long n = pread(3, job, sizeof job, 0);
  char *p = n > 0 ? strstr(job, "\\nend\\n") : NULL;
  if (p) p += 5; else n = 0;
  long hdr = p ? p - job : 0, per = I * K + K * J;
  for (int s = 0; hdr + (s + 1) * per <= n; s++) {
    int8_t *a = (int8_t *)job + hdr + s * per, *b = a + I * K;
    for (int i = 0; i < I; i++)
      for (int j = 0; j < J; j++) {
        int acc = 0;
        for (int k = 0; k < K; k++) acc += a[i * K + k] * b[k * J + j];
        c[i][j] = acc > 127 ? 127 : acc < -128 ? -128 : acc;
      }
    write(4, c, sizeof c);
  }
  const char *st = "cycles 1\\ncpu_busy 0\\nfsm_instrs 0\\ninstrs 0\\nbytes_rd 0\\nbytes_wr 0\\nmacs 0\\n"
    "bank_conflicts 0\\nunfused_preloads 0\\nspad_rows_used 0\\nacc_rows_used 0\\nbusy_ld 0\\nbusy_ex 0\\n"
    "busy_st 0\\ncount_config 0\\ncount_mvin 0\\ncount_mvout 0\\ncount_preload 0\\ncount_compute 0\\nok 1\\n";
  write(5, st, strlen(st));
  exit(0);
"""


def test_kernel_cannot_forge_the_whole_verdict(hostile):
    # The fake "ok" on fd 5 is the kernel's own diagnostics; the verdict is the replayer's, which
    # never received a trace. (The job file is not even readable: fd 3 is a pipe that carries only
    # the current public input set.)
    r = hostile.evaluate(PROBLEM, gemm_kernel(FORGED_VERDICT, DECLS))
    assert_fails(r, "limit", "the trace ended early")
    assert r.latency is None


G_CFG = "{ extern long long g_cfg[]; %s }\n"   # simcfg_t: 17 int64 fields in timing.py order


def test_kernel_cannot_retune_the_timing_model(hostile):
    honest = hostile.evaluate(PROBLEM, gemm_kernel(NAIVE_BODY))
    assert_correct(honest)
    # cpu_issue_cycles (9), unfused_preload_cycles (11), dma_latency (4) of the kernel's own copy
    r = hostile.evaluate(PROBLEM, naive_with(G_CFG % "g_cfg[9] = 0; g_cfg[11] = 0; g_cfg[4] = 1;"))
    assert_correct(r)
    assert r.latency == honest.latency, describe(r)


def test_kernel_cannot_lift_the_instruction_budget():
    # max_instructions (16) of the kernel's own copy: the replayer still stops at the 31st instruction.
    t = get_target("gemmini-sim", timing={"max_instructions": 30})
    r = t.evaluate(PROBLEM, naive_with(G_CFG % "g_cfg[16] = 1LL << 40;"))
    assert_fails(r, "gemmini", "mvout #31: more than 30 Gemmini instructions issued")


CPU_ROUTED = """
  /* C is computed on the CPU, then routed DRAM -> scratchpad -> DRAM; the
   * required number of MACs is issued on noise, results discarded. */
  static int8_t c[I][J];
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j++) {
      int acc = 0;
      for (int k = 0; k < K; k++) acc += A[i][k] * B[k][j];
      c[i][j] = acc > 127 ? 127 : acc < -128 ? -128 : acc;
    }
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(J, 1.0f, DIM, 0);
  config_st(J);
  for (long m = 0; m < (long)I * J * K / (DIM * DIM * DIM); m++) {
    preload(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
    compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  }
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      mvin(&c[i][j], 64, DIM, DIM);
      mvout(&C[i][j], 64, DIM, DIM);
    }
  fence();
"""


def test_cpu_result_routed_through_scratchpad_is_rejected(hostile):
    # 3 configs + 8 preload/compute pairs: the first mvin of c is instruction #20
    r = hostile.evaluate(PROBLEM, gemm_kernel(CPU_ROUTED))
    assert_fails(r, "gemmini", "instruction #20 loads data from the kernel's own memory that changes with the input "
                 "values: tensor data must come from the problem's arrays (or from results an mvout wrote); the CPU "
                 "may not prepare it")
    assert r.error.startswith("instruction #20 "), r.error
    assert r.latency is None


LUT_ROUTED = """
  /* The CPU computes C; a constant table (row v holds the byte v) is loaded
   * into the scratchpad, and each result element is stored by an mvout from
   * the table row the CPU's result selects. No mvin carries input data. */
  config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 1, false, false);
  config_ld(DIM, 1.0f, DIM, 0);
  config_st(J);
  for (int r = 0; r < 256; r += DIM) mvin(&LUT[r][0], r, DIM, DIM);
  for (long m = 0; m < (long)I * J * K / (DIM * DIM * DIM); m++) {
    preload(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
    compute_preloaded(0, GARBAGE_ADDR, DIM, DIM, DIM, DIM);
  }
  for (int i = 0; i < I; i++)
    for (int j = 0; j < J; j++) {
      int acc = 0;
      for (int k = 0; k < K; k++) acc += A[i][k] * B[k][j];
      mvout(&C[i][j], (uint8_t)(acc > 127 ? 127 : acc < -128 ? -128 : acc), 1, 1);
    }
  fence();
"""
LUT = ("static const int8_t LUT[256][DIM] = {"
       + ", ".join("{%d}" % (v - 256 if v > 127 else v) for v in range(256)) + "};\n")


def test_cpu_result_selected_through_a_constant_table_is_rejected(hostile):
    # The table is constant (accepted), but the mvout source rows depend on the inputs: the stream rule.
    r = hostile.evaluate(PROBLEM, gemm_kernel(LUT_ROUTED, LUT))
    assert_fails(r, "gemmini", stream_rule(2))
    assert r.latency is None


def test_data_dependent_extra_instruction_is_rejected(hostile):
    # One fence more on the input sets where A[0][1] is odd: nothing else changes, not even a result
    # (fences cost only time), and the kernel is still rejected, naming the first set that differs.
    odd = [int(inputs(PROBLEM, 0, i)[0][0, 1]) % 2 != 0 for i in range(3)]
    assert len(set(odd)) == 2, "the inputs changed: pick another condition"
    first_different = odd.index(not odd[0]) + 1
    r = hostile.evaluate(PROBLEM, naive_with(after="  if (A[0][1] % 2 != 0) fence();\n"))
    assert_fails(r, "gemmini", stream_rule(first_different))
    assert stream_rule(first_different) in r.error
    assert r.latency is None


def test_data_dependent_dram_address_is_rejected(hostile):
    # The same instructions in every set, but the B tile is read from a row that depends on A: caught by
    # the DRAM addresses alone.
    body = NAIVE_BODY.replace("mvin2(&B[k][j],", "mvin2(&B[k][(j + (A[0][0] > 0 ? 0 : DIM)) % J],")
    assert "A[0][0] > 0" in body
    signs = [int(inputs(PROBLEM, 0, i)[0][0, 0]) > 0 for i in range(3)]
    assert len(set(signs)) == 2, "the inputs changed: pick another condition"
    r = hostile.evaluate(PROBLEM, gemm_kernel(body))
    assert_fails(r, "gemmini", stream_rule(signs.index(not signs[0]) + 1))


# The stream rule compares a 64-bit FNV-1a hash (dram.c) of each set's records, not the records. Fields
# the model ignores are hashed too: an mvin from NULL carries its config_ld's DRAM stride, scale and
# block stride, which a kernel may set to anything. Those 16 bytes were solved offline (lattice
# reduction, about a minute) so that a data-dependent mvin that zeroes other scratchpad rows, followed by
# such a "fix-up" mvin3, hashes like the honest pair.
COLLISION = {"STRIDE_A": 691672907343361484, "SCALE_A": 0x41F17EC3, "BS_A": 647892279,
             "STRIDE_B": 792929320644778247, "SCALE_B": 0x1F01001A, "BS_B": 252451843}
HASH_FORK = """
  float fa, fb;
  uint32_t ua = SCALE_Au, ub = SCALE_Bu;
  memcpy(&fa, &ua, 4);
  memcpy(&fb, &ub, 4);
  if (COND) {   /* zeroes the wrong rows, then the fix-up */
    config_ld(STRIDE_Aull, fa, BS_Au, 0); mvin(NULL, 3 * BANK_ROWS + 64, DIM, DIM);
    config_ld(STRIDE_Bull, fb, BS_Bu, 2); mvin3(NULL, 3 * BANK_ROWS + 32, DIM, DIM);
  } else {      /* zeroes the D tile */
    config_ld(0, 1.0f, DIM, 0); mvin(NULL, 3 * BANK_ROWS, DIM, DIM);
    config_ld(0, 1.0f, DIM, 2); mvin3(NULL, 3 * BANK_ROWS + 32, DIM, DIM);
  }
""" + NAIVE_BODY.replace("compute_preloaded(0, GARBAGE_ADDR,", "compute_preloaded(0, 3 * BANK_ROWS,")
for _name, _value in COLLISION.items():
    HASH_FORK = HASH_FORK.replace(_name, str(_value))


def _records(branch: bool) -> bytes:
    """The records (sim.h rec_t) the fork issues on one branch."""
    def rec(op, id=0, d=(0, 0, 0, 0), x0=0, x2=0, scale_bits=0, stride=0):
        return struct.pack("<BBBB4IIIIIQQ", op, 0, 0, id, *d, x0, 0, x2, scale_bits, 0, stride)
    config_ld, one = rec(1), 0x3F800000
    c = COLLISION
    if branch:
        return (config_ld + rec(2, 0, (16, 16, 0, 0), 3 * 4096 + 64, c["BS_A"], c["SCALE_A"], c["STRIDE_A"])
                + config_ld + rec(2, 2, (16, 16, 0, 0), 3 * 4096 + 32, c["BS_B"], c["SCALE_B"], c["STRIDE_B"]))
    return (config_ld + rec(2, 0, (16, 16, 0, 0), 3 * 4096, 16, one, 0)
            + config_ld + rec(2, 2, (16, 16, 0, 0), 3 * 4096 + 32, 16, one, 0))


def _fnv1a(data: bytes, h: int = 1469598103934665603) -> int:
    for byte in data:
        h = ((h ^ byte) * 1099511628211) & (2 ** 64 - 1)
    return h


def test_hash_fork_kernel_is_correct_when_it_does_not_branch(hostile):
    # The premise of the next test: both branches are what the test thinks they are. The forged branch
    # no longer even runs: every field of every record is range-checked, and its block stride is not
    # a scratchpad row.
    assert _records(True) != _records(False) and _fnv1a(_records(True)) == _fnv1a(_records(False))
    assert_correct(hostile.evaluate(PROBLEM, gemm_kernel(HASH_FORK.replace("COND", "0"))))
    r = hostile.evaluate(PROBLEM, gemm_kernel(HASH_FORK.replace("COND", "1")))
    assert_fails(r, "gemmini", "config_ld #1: block stride 647892279 is out of range (0..65535)")


def test_data_dependent_instructions_cannot_hide_behind_a_hash_collision(hostile):
    odd = [int(inputs(PROBLEM, 0, i)[0][0, 1]) % 2 != 0 for i in range(3)]
    assert len(set(odd)) == 2, "the inputs changed: pick another condition"
    r = hostile.evaluate(PROBLEM, gemm_kernel(HASH_FORK.replace("COND", "A[0][1] % 2 != 0")))
    assert_fails(r, "gemmini", stream_rule(odd.index(not odd[0]) + 1))


# A hand-written schedule (all of A and B loaded once, one accumulator tile per output tile) whose
# records are written directly with the kernel-side library's rec_emit, each marked as issued by the CPU
# (0) or by a loop FSM (1).
OP_SCHEDULE = """
  config_ld(K, 1.0f, DIM, 0);
  config_ld(J, 1.0f, DIM, 1);
  config_st(J);
  for (int i = 0; i < I; i += DIM)
    for (int k = 0; k < K; k += DIM)
      rec_emit(&(rec_t){.op = R_MVIN, .fsm = FSM, .id = 0, .d = {DIM, DIM}, .x0 = (i / DIM) * K + k,
                        .dram = (uintptr_t)&A[i][k]});
  for (int k = 0; k < K; k += DIM)
    for (int j = 0; j < J; j += DIM)
      rec_emit(&(rec_t){.op = R_MVIN, .fsm = FSM, .id = 1, .d = {DIM, DIM}, .x0 = 2 * BANK_ROWS + (k / DIM) * J + j,
                        .dram = (uintptr_t)&B[k][j]});
  for (int i = 0; i < I; i += DIM)
    for (int j = 0; j < J; j += DIM) {
      uint32_t acc = ACC_ADDR_BIT | ((i / DIM) * (J / DIM) + j / DIM) * DIM;
      for (int k = 0; k < K; k += DIM) {
        rec_emit(&(rec_t){.op = R_PRELOAD, .fsm = FSM, .d = {DIM, DIM, DIM, DIM},
                          .x0 = 2 * BANK_ROWS + (k / DIM) * J + j, .x1 = acc | (k ? ACCUMULATE_BIT : 0)});
        rec_emit(&(rec_t){.op = R_COMPUTE, .fsm = FSM, .d = {DIM, DIM, DIM, DIM}, .x0 = (i / DIM) * K + k,
                          .x1 = GARBAGE_ADDR});
      }
      rec_emit(&(rec_t){.op = R_MVOUT, .fsm = FSM, .d = {DIM, DIM}, .x0 = acc, .dram = (uintptr_t)&C[i][j]});
    }
"""


def test_kernel_cannot_claim_loop_fsm_timing_for_its_own_schedule(hostile):
    # Only the replayer's loop FSM issues FSM instructions: a record with the fsm flag from the kernel
    # process is rejected, whatever it contains.
    p = gemm(64, 64, 64)
    cpu = hostile.evaluate(p, gemm_kernel(OP_SCHEDULE.replace("FSM", "0"), REC_DECLS))
    assert_correct(cpu)
    assert cpu.feedback["fsm_instructions"] == 0
    claimed = hostile.evaluate(p, gemm_kernel(OP_SCHEDULE.replace("FSM", "1"), REC_DECLS))
    assert_fails(claimed, "gemmini", "malformed trace: only the replayer's loop FSM issues loop instructions")
    assert claimed.latency is None


def test_kernel_cannot_mark_a_single_instruction_as_fsm_issued(hostile):
    # One fsm=1 mvout at the very end of an otherwise honest kernel is enough to be rejected.
    mvout = forged("R_MVOUT", fsm=2, d="{DIM, DIM}", x0="ACC_ADDR_BIT", dram="(uintptr_t)&C[0][0]")
    r = hostile.evaluate(PROBLEM, naive_with(after="  " + mvout + "\n", prelude=REC_DECLS))
    assert_fails(r, "gemmini", "only the replayer's loop FSM issues loop instructions")


# --------------------------------------------------------------------------- seccomp before the kernel's first instruction
def test_constructor_spelled_with_underscores_cannot_escape_seccomp(hostile):
    target = Path(f"/tmp/autocomp-pwned-ctor-{uuid.uuid4().hex}")
    try:
        code = evil(prelude=f'__attribute__((__constructor__)) static void early(void) {{ '
                            f'FILE *f = fopen("{target}", "w"); if (f) fclose(f); }}\n')
        r = hostile.evaluate(PROBLEM, code)
        assert not target.exists(), "constructor ran outside the seccomp sandbox"
        assert_fails(r, "policy", "constructors/destructors (code that runs outside solution()) are not allowed")
    finally:
        target.unlink(missing_ok=True)


def test_constructor_that_passes_the_policy_is_still_confined(hostile, monkeypatch):
    # Defence in depth: with the source policy switched off, a constructor runs before the harness
    # installs its own filter (and its crash handler), and the launcher's filter kills it.
    import autocomp_zmq.hw_runners.gemmini_sim.target as target_module
    monkeypatch.setattr(target_module, "check_source", lambda code: None)
    target = Path(f"/tmp/autocomp-pwned-ctor-{uuid.uuid4().hex}")
    try:
        code = evil(prelude=f'__attribute__((constructor)) static void early(void) {{ '
                            f'FILE *f = fopen("{target}", "w"); if (f) fclose(f); }}\n')
        r = hostile.evaluate(PROBLEM, code)
        assert not target.exists(), "constructor ran outside the seccomp sandbox"
        assert_fails(r, "crash", "kernel killed by SIGSYS: it made a forbidden system call")
        assert "seccomp launcher" in r.sandbox and "seccomp on" not in r.sandbox, describe(r)
    finally:
        target.unlink(missing_ok=True)


PRCTL = "int prctl(int option, ...) { (void)option; return 0; }\n"


def test_kernel_cannot_replace_prctl_to_skip_seccomp(hostile):
    # The replaced prctl() disables the harness's own filter (which still reports "seccomp on"),
    # but the launcher installed its filter before exec.
    target = Path(f"/tmp/autocomp-pwned-prctl-{uuid.uuid4().hex}")
    try:
        code = evil(after=f'  FILE *f = fopen("{target}", "w"); if (f) fclose(f);\n', prelude=PRCTL)
        r = hostile.evaluate(PROBLEM, code)
        assert not target.exists(), "forbidden openat succeeded"
        assert_fails(r, "crash", FORBIDDEN, "(openat)")
        assert "seccomp launcher" in r.sandbox, describe(r)
    finally:
        target.unlink(missing_ok=True)


def test_token_pasted_asm_cannot_embed_host_files(hostile):
    prelude = ('#define CAT(a, b) a##b\n'
               'CAT(__as, m__)(".section .rodata\\n.globl leaked\\nleaked:\\n.inc" "bin \\"/etc/passwd\\"\\n'
               '.byte 0\\n.text");\nextern const char leaked[];\n')
    r = hostile.evaluate(PROBLEM, evil(after='  printf("%.200s", leaked);\n', prelude=prelude))
    first_line = Path("/etc/passwd").read_text().splitlines()[0]
    assert first_line not in r.stdout, "host file content reached the kernel's output"
    assert_fails(r, "policy", "token pasting (##) is not allowed")


# --------------------------------------------------------------------------- the evaluator survived
SURVIVAL = ("kill_parent", "fork_bomb", "system", "huge_output", "null_write", "include_etc_passwd")


def test_the_evaluator_keeps_working_after_hostile_kernels(tmp_path):
    """Self-contained (its own target and work root, whatever ran before or runs at all): hostile kernels,
    among them one that kills its parent and its process group, then honest kernels on the same target."""
    work_root = tmp_path / "work"
    work_root.mkdir()
    target = get_target("gemmini-sim", run_limits=Limits(wall_s=4, cpu_s=2, mem_bytes=512 << 20, fsize_bytes=1 << 20),
                        compile_limits=Limits(wall_s=20, cpu_s=20, mem_bytes=300 << 20), work_root=work_root)
    cases = {c[0]: c for c in CASES}
    for name in SURVIVAL:
        _, code, kinds, substrings = cases[name][:4]
        assert_fails(target.evaluate(PROBLEM, code), kinds, *substrings)
    assert_fails(target.evaluate(PROBLEM, evil("  kill(getppid(), 9); kill(0, 9);\n")), "crash", FORBIDDEN)
    r = target.evaluate(PROBLEM, gemm_kernel(NAIVE_BODY))
    assert_correct(r)
    assert "seccomp on" in r.sandbox
    p = gemm(64, 64, 64)
    for role in ("naive", "tuned", "hwloop"):
        assert_correct(target.evaluate(p, p.kernel_source(role)))
    assert list(work_root.iterdir()) == []  # every work directory was removed
    assert not any(Path("/tmp").glob("autocomp-system-pwned*"))
