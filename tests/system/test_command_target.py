"""Command targets through real processes: every malformed answer of a command (tests/command_target's
judge.py, which answers as told) is named and loses nothing; hostcpu refuses or honestly measures kernels that
try to forge their verdict; a search on hostcpu with the offline heuristic improves a naive kernel."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from autocomp_zmq.hw_runners import get_target
from tests.system.runkit import ROOT

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

FAKE = ROOT / "tests" / "command_target"


@pytest.fixture(scope="module")
def fake():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOCOMP_TARGET_PATH", str(FAKE))
        target = get_target("fake-command")
    return target, target.problem("echo")


@pytest.mark.parametrize("mode, kind, says", [
    ("nothing", "setup", "printed no usable verdict: it printed nothing on stdout"),
    ("two-lines", "setup", "printed 2 lines on stdout"),
    ("not-json", "setup", "its stdout is not a JSON line"),
    ("missing-field", "setup", "missing required field `correct`"),
    ("wrong-unit", "setup", "its latency is in 'ms'; the target's unit is 'us'"),
    ("crash", "setup", "exited with status 3"),
    ("signal", "setup", "was killed by signal SIGKILL"),
    ("timeout", "timeout", "ran past its timeout of 3 s and was killed"),
])
def test_a_malformed_answer_is_the_commands_fault_and_keeps_what_it_printed(fake, mode, kind, says):
    target, problem = fake
    result = target.evaluate(problem, f"mode: {mode}\n", seed=7)
    assert not result.correct and result.error_kind == kind, result
    assert says in result.error and "this is a fault of the command, not of the kernel" in result.error
    assert f"judge: mode {mode}, seed 7" in result.stderr          # the command's stderr, whole
    if mode in ("two-lines", "crash"):
        assert '"latency": 12.5' in result.stdout                  # and its stdout
    if mode == "timeout":
        assert "still measuring" in result.stdout


def test_a_wellformed_answer_is_the_verdict(fake):
    target, problem = fake
    ok = target.evaluate(problem, "mode: ok\n")
    assert ok.correct and ok.latency == 12.5 and ok.latency_unit == "us" and ok.feedback["noise"] == {"reps": 7}
    wrong = target.evaluate(problem, "mode: wrong\n")
    assert not wrong.correct and wrong.error_kind == "wrong_result" and "expected 2" in wrong.error


def test_a_folder_on_the_target_path_is_a_target_of_the_cli(tmp_path):
    env = {**os.environ, "AUTOCOMP_TARGET_PATH": str(FAKE)}
    listed = subprocess.run([sys.executable, str(ROOT / "launch.py"), "problems", "--target", "fake-command"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "echo" in listed.stdout, listed.stdout + listed.stderr


# ---- hostcpu: kernels that try to forge their verdict ------------------------------------------------------

SUM = "float solution(long n, const float *x) {{\n{body}\n}}\n"
HONEST_SUM = "float s = 0.0f;\n  for (long i = 0; i < n; i++) s += x[i];\n  return s;"


@pytest.fixture(scope="module")
def hostcpu():
    target = get_target("hostcpu")
    return target, target.problem("sum-16m")


def test_a_kernel_printing_a_fake_verdict_is_measured_honestly(hostcpu):
    target, problem = hostcpu
    forged = '#include <stdio.h>\n' + SUM.format(body='  printf("{\\"correct\\": true, \\"latency\\": 0.001, '
                                                      '\\"unit\\": \\"us\\"}\\n"); fflush(stdout);\n  ' + HONEST_SUM)
    result = target.evaluate(problem, forged)
    honest = target.evaluate(problem, SUM.format(body="  " + HONEST_SUM))
    assert result.correct and honest.correct, (result.error, honest.error)
    # the forged line went to the kernel's own stdout, which nobody reads: the latency is the harness's
    assert result.latency > 1000 and result.latency > 0.5 * honest.latency, (result.latency, honest.latency)


def test_a_kernel_writing_a_fake_timing_file_is_killed(hostcpu):
    target, problem = hostcpu
    forged = '#include <stdio.h>\n' + SUM.format(
        body='  FILE *f = fopen("timing.json", "w");\n  if (f) { fputs("{\\"latency\\": 0.001}", f); fclose(f); }\n  '
             + HONEST_SUM)
    result = target.evaluate(problem, forged)
    assert not result.correct and result.error_kind == "crash" and "SIGSYS" in result.error, result.error


def test_a_kernel_reading_the_reference_or_the_harness_is_killed(hostcpu):
    target, problem = hostcpu
    forged = '#include <fcntl.h>\n#include <unistd.h>\n' + SUM.format(
        body='  float r = 0; int fd = open("/proc/self/../1/mem", O_RDONLY);\n'
             '  if (fd >= 0 && read(fd, &r, sizeof r) == sizeof r) return r;\n  ' + HONEST_SUM)
    result = target.evaluate(problem, forged)
    assert not result.correct and result.error_kind == "crash" and "SIGSYS" in result.error, result.error


def test_a_kernel_that_reuses_an_earlier_result_is_wrong(hostcpu):
    target, problem = hostcpu
    cached = SUM.format(body="  static int done; static float last;\n  if (done) return last;\n  done = 1;\n"
                             "  float s = 0.0f;\n  for (long i = 0; i < n; i++) s += x[i];\n  return last = s;")
    result = target.evaluate(problem, cached)
    assert not result.correct and result.error_kind == "wrong_result" and "run 2" in result.error, result.error


def test_a_kernel_that_signals_done_before_it_has_computed_is_wrong(hostcpu):
    target, problem = hostcpu
    # the driver's done byte goes to descriptor 5: a kernel that writes it first and computes after it
    early = ('#include <unistd.h>\nfloat solution(long n, const float *x) {\n  if (write(5, "d", 1) != 1) return 0;\n'
             '  float s = 0.0f;\n  for (long i = 0; i < n; i++) s += x[i];\n  return s;\n}\n')
    result = target.evaluate(problem, early)
    assert not result.correct and result.error_kind == "wrong_result", result.error


def test_a_kernel_that_works_ahead_of_the_go_signal_is_measured_honestly(hostcpu):
    target, problem = hostcpu
    # it answers a run, says done itself and, without returning, watches the inputs so as to answer the next run
    # the moment they appear, before the go signal: but it is stopped while they are written, so its work falls
    # inside the next window anyway
    ahead = """#include <unistd.h>
static float total(long n, const float *x) { float s = 0.0f; for (long i = 0; i < n; i++) s += x[i]; return s; }
float solution(long n, const float *x) {
  float *out = (float *)((char *)x + ((n * 4 + 4095) & ~4095L));   /* the output follows the input */
  out[0] = total(n, x);
  const volatile unsigned *first = (const volatile unsigned *)x;
  for (;;) {
    const unsigned seen = *first;
    if (write(5, "d", 1) != 1) return 0;
    while (*first == seen) {}
    out[0] = total(n, x);
  }
}
"""
    result = target.evaluate(problem, ahead)
    honest = target.evaluate(problem, SUM.format(body="  " + HONEST_SUM))
    assert result.correct and honest.correct, (result.error, honest.error)
    assert result.latency > 0.5 * honest.latency, (result.latency, honest.latency)


def test_a_kernel_that_crashes_is_named_so(hostcpu):
    target, problem = hostcpu
    result = target.evaluate(problem, SUM.format(body="  *(volatile int *)0 = 1;\n  return 0;"))
    assert not result.correct and result.error_kind == "crash" and "SIGSEGV" in result.error, result.error


def test_a_kernel_that_never_ends_is_a_timeout_and_leaves_no_process(hostcpu):
    target, problem = hostcpu
    before = {p.pid for p in psutil.process_iter()}
    result = target.evaluate(problem, SUM.format(body="  for (volatile int i = 0;; i++) {}\n  return 0;"),
                             time_limit_s=4)
    assert not result.correct and result.error_kind == "timeout" and "timeout of 4 s" in result.error, result.error
    left = [p for p in psutil.process_iter(["pid", "name", "status"]) if p.pid not in before
            and p.info["name"] == "kernel" and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert not left, left


def test_a_kernel_with_another_signature_does_not_compile(hostcpu):
    target, problem = hostcpu
    result = target.evaluate(problem, "double solution(long n, const double *x) { return 0; }\n")
    assert not result.correct and result.error_kind == "compile" and "conflicting types" in result.error


# ---- hostcpu end to end ---------------------------------------------------------------------------------------

def test_an_offline_search_on_hostcpu_improves_the_naive_kernel(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(ROOT / "launch.py"), "run", "--target", "hostcpu", "--problem",
                           "sum-16m", "--out", str(run_dir), "-T", "3", "-B", "2", "-N", "3", "-K", "1",
                           "--dropout", "0", "--evaluators", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    best = json.loads((run_dir / "best.json").read_text())
    assert best["target"] == "hostcpu" and best["latency_unit"] == "us"
    # the naive loop is one chain of dependent adds; every listed variant breaks it (measured: 3-4x)
    assert best["speedup"] > 2, best
    assert "solution" in (run_dir / "best.c").read_text() and best["evaluations"] >= 3


# A worker's first jobs arrive together and its job threads read the target's files at once; under load the
# interpreter switches threads while msgspec completes a type's information (forced here with a tiny switch
# interval): before protocols.envelope.convert a quarter of such processes died of a segfault (the full suite lost
# a hostcpu planner that way and the run waited on it)
# work() run by four threads released together, under a tiny switch interval
IN_FOUR_THREADS = """
import threading
start = threading.Barrier(4)
def run():
    start.wait()
    work()
threads = [threading.Thread(target=run) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""

THREADED_FIRST_USE = """
import sys
sys.setswitchinterval(1e-6)
from pathlib import Path
from autocomp_zmq.hw_runners.command import spec
home = Path(sys.argv[1])
def work():
    spec.load_problem(home / "problems" / "sum-16m")
    spec.load_command(home)
""" + IN_FOUR_THREADS + """
print("loaded")
"""

FRESH_TYPES = """
import sys
from typing import Annotated
import msgspec
from autocomp_zmq.protocols.envelope import convert
sys.setswitchinterval(1e-6)
data = {"name": "x", "parts": [{"file": "a"}, {"file": "b", "dims": {"N": 3}}], "size": 3}
for i in range(300):
    part = msgspec.defstruct(f"Part{i}", [("file", str), ("dims", dict[str, int], {})])
    whole = msgspec.defstruct(f"Whole{i}", [("name", str), ("parts", list[part], []),
                                            ("size", Annotated[int, msgspec.Meta(ge=0)], 0)], kw_only=True)
    def work():
        assert convert(data, whole).parts[1].dims == {"N": 3}
""" + "\n".join("    " + line for line in IN_FOUR_THREADS.splitlines()) + """
print("converted")
"""

def test_a_command_targets_files_read_from_several_threads_at_once_do_not_crash_the_process():
    for _ in range(12):     # each process is a first use
        proc = subprocess.run([sys.executable, "-c", THREADED_FIRST_USE, str(ROOT / "hw_runners" / "hostcpu")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "loaded" in proc.stdout, (proc.returncode, proc.stderr[-2000:])


def test_first_conversions_of_new_types_from_several_threads_are_safe():
    proc = subprocess.run([sys.executable, "-c", FRESH_TYPES], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "converted" in proc.stdout, (proc.returncode, proc.stderr[-2000:])
