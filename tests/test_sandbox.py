"""sandbox: run() with small real programs, Outcome.describe and read_tail."""
from __future__ import annotations

import os
import shutil
import subprocess
import signal
import tempfile
import time
from dataclasses import replace as dataclass_replace
from pathlib import Path

import psutil
import pytest

from autocomp_zmq import sandbox
from autocomp_zmq.sandbox import Limits, Outcome

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

IS_ROOT = os.geteuid() == 0
SH = shutil.which("sh") or "/bin/sh"


@pytest.fixture
def workdir():
    # Like the evaluator: a private directory under the system temp dir, handed to the sandbox user.
    path = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_sh(workdir: Path, script: str, limits: Limits = Limits(wall_s=10, cpu_s=10), **kw) -> Outcome:
    sandbox.prepare_workdir(workdir, limits)
    return sandbox.run([SH, "-c", script], workdir, limits, **kw)


def out(workdir: Path, name: str = "stdout.txt") -> str:
    return (workdir / name).read_text()


def test_success_and_status_notes(workdir):
    r = run_sh(workdir, "echo hello; echo oops >&2")
    assert r.ok and r.returncode == 0 and r.signal is None and not r.timed_out
    assert out(workdir) == "hello\n" and out(workdir, "stderr.txt") == "oops\n"
    assert "exec" in r.notes
    assert any(n.startswith("net ") for n in r.notes)
    if IS_ROOT:
        assert "user nobody" in r.notes
    assert 0 <= r.cpu_s < 5           # the kernel's accounting of what it used (load does not stretch it)


def test_empty_environment(workdir, monkeypatch):
    monkeypatch.setenv("AUTOCOMP_TEST_SECRET", "leak-me-not")
    r = sandbox.run(["/usr/bin/env"], workdir, Limits(wall_s=10))
    assert r.ok
    assert out(workdir) == ""  # not a single variable, in particular not the secret


def test_explicit_environment_only(workdir, monkeypatch):
    monkeypatch.setenv("AUTOCOMP_TEST_SECRET", "leak-me-not")
    r = sandbox.run(["/usr/bin/env"], workdir, Limits(wall_s=10), env={"PATH": "/usr/bin:/bin"})
    assert r.ok and out(workdir) == "PATH=/usr/bin:/bin\n"


@pytest.mark.skipif(not IS_ROOT, reason="dropping privileges needs root")
def test_runs_as_nobody(workdir):
    r = run_sh(workdir, "id -u; id -g; touch made-here && echo wrote")
    assert r.ok
    assert out(workdir).split() == ["65534", "65534", "wrote"]
    assert (workdir / "made-here").stat().st_uid == 65534


def test_network_is_isolated(workdir):
    r = run_sh(workdir, "cat /proc/net/dev")
    assert r.ok
    if not any(n.startswith("net isolated") for n in r.notes):
        pytest.skip(f"network namespaces unavailable here: {r.notes}")
    interfaces = {line.split(":")[0].strip() for line in out(workdir).splitlines()[2:]}
    assert interfaces == {"lo"}


@pytest.mark.skipif(not shutil.which("ipcmk") or not shutil.which("ipcs"), reason="util-linux's ipcmk/ipcs missing")
def test_system_v_ipc_is_not_shared_with_the_host_or_other_sandboxes(workdir):
    """A shared-memory segment made on the host (or in another sandbox) is not there for a sandboxed program."""
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True).stdout
    shmid = made.split(":")[-1].strip()
    try:
        r = run_sh(workdir, "ipcs -m")
        assert r.ok, out(workdir, "stderr.txt")
        if not any(n.startswith("net isolated") for n in r.notes):
            pytest.skip(f"namespaces unavailable here: {r.notes}")
        assert shmid not in out(workdir)
    finally:
        subprocess.run(["ipcrm", "-m", shmid], check=False)


def test_stdin_is_empty_and_resource_limits_are_set(workdir):
    r = run_sh(workdir, "cat; ulimit -n; ulimit -c; ulimit -t; ulimit -f",
               Limits(wall_s=10, cpu_s=7, nofile=32, fsize_bytes=1 << 20))
    assert r.ok
    # cat returns at once (stdin is /dev/null); nofile 32, no core dumps, CPU 7 s, 1 MiB = 2048 blocks of 512 B
    assert out(workdir).split() == ["32", "0", "7", "2048"]


def test_exit_status(workdir):
    r = run_sh(workdir, "exit 7")
    assert not r.ok and r.returncode == 7 and r.signal is None
    assert r.describe(Limits()) == "exited with status 7"


def test_wall_clock_limit_kills_the_whole_process_group(workdir):
    r = run_sh(workdir, "sleep 60 & echo $! > bg.pid; sleep 60", Limits(wall_s=1, cpu_s=30))
    assert r.timed_out and not r.ok
    assert r.signal == signal.SIGKILL
    assert r.wall_s < 60              # killed, not finished: the program would have slept 60 s
    assert r.describe(Limits(wall_s=1)) == "timed out after 1 s (wall-clock limit); it may loop forever or sleep"
    pid = int(out(workdir, "bg.pid"))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the background sleep was killed too (gone or a zombie)
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"background process {pid} survived the wall-clock kill")


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """The process no longer runs (gone, or a zombie waiting to be reaped)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


# a program that leaves a process behind in a session of its own, then exits at once
DETACH = "setsid sh -c 'echo $$ > detached.pid; exec sleep 60' & while [ ! -s detached.pid ]; do :; done"


def test_a_detached_process_outlives_its_program_without_a_pid_namespace(workdir):
    # why pid_ns exists: the process group kill cannot reach a process that called setsid
    r = run_sh(workdir, DETACH, Limits(wall_s=10, cpu_s=10))
    pid = int(out(workdir, "detached.pid"))
    try:
        assert r.ok and not _gone(pid, within_s=0.5)
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("ending", ["exits", "times out", "is killed"])
def test_pid_namespace_ends_every_process_the_program_started(workdir, ending):
    script = DETACH + {"exits": "", "times out": "; sleep 60", "is killed": "; kill -9 $$"}[ending]
    r = run_sh(workdir, script, Limits(wall_s=2, cpu_s=10, pid_ns=True))
    assert "pid isolated" in r.notes
    pid = int(out(workdir, "detached.pid"))   # as seen inside the namespace: look it up by its marker instead
    assert pid > 1
    # when the namespace's pid 1 ends the kernel SIGKILLs the rest: gone at once, reaped a moment later
    survivors = [p for p in psutil.process_iter(["cmdline", "cwd"]) if p.info["cwd"] == str(workdir)]
    assert all(_gone(p.pid) for p in survivors), survivors
    if ending == "exits":
        assert r.ok and r.returncode == 0
    elif ending == "times out":
        assert r.timed_out and r.signal == signal.SIGKILL
    else:
        assert r.signal == signal.SIGKILL and not r.timed_out


def test_pid_namespace_keeps_the_program_s_way_of_ending(workdir):
    limits = Limits(wall_s=10, cpu_s=10, pid_ns=True)
    assert run_sh(workdir, "exit 7", limits).returncode == 7
    r = run_sh(workdir, "kill -SEGV $$", limits)
    assert r.signal == signal.SIGSEGV and not list(workdir.glob("core*"))
    r = run_sh(workdir, "exec head -c 1000000 /dev/zero", dataclass_replace(limits, fsize_bytes=64 << 10))
    assert r.signal == signal.SIGXFSZ      # a limit's signal still ends it: the program is not the namespace's init
    r = run_sh(workdir, "while :; do :; done", dataclass_replace(limits, cpu_s=1))
    # its CPU time is still accounted (the kernel's per-process split of ticks can read as low as 0.7 s on a loaded
    # machine when the 1 s limit fires, so the bound asks for most of it, not all)
    assert r.signal in (signal.SIGXCPU, signal.SIGKILL) and r.cpu_s >= 0.5


def test_cpu_limit(workdir):
    limits = Limits(wall_s=20, cpu_s=1)
    r = run_sh(workdir, "while :; do :; done", limits)
    assert not r.ok and not r.timed_out
    assert r.signal in (signal.SIGXCPU, signal.SIGKILL)
    assert "CPU time limit of 1 s" in r.describe(limits)
    assert 0.5 <= r.cpu_s < 5         # stopped at its CPU limit (however long a loaded machine took for it; the
                                      # accounted time read 0.70-0.72 s under load 10-20)


def test_file_size_limit(workdir):
    limits = Limits(wall_s=10, fsize_bytes=64 << 10)
    r = run_sh(workdir, "exec head -c 1000000 /dev/zero", limits)
    assert r.signal == signal.SIGXFSZ
    assert (workdir / "stdout.txt").stat().st_size == 64 << 10
    assert "file size limit of" in r.describe(limits)


def test_memory_limit(workdir):
    limits = Limits(wall_s=10, mem_bytes=64 << 20)
    # mawk/gawk grow a string until allocation fails under RLIMIT_AS
    r = run_sh(workdir, "awk 'BEGIN { s = \"x\"; while (1) s = s s }'", limits)
    assert not r.ok and not r.timed_out
    assert "out of memory" in out(workdir, "stderr.txt").lower()


def test_sigkill_is_not_blamed_on_memory_because_the_evaluator_is_large(workdir):
    # ru_maxrss of the launcher includes the evaluator's pages, so describe() must not use it.
    import numpy as np
    ballast = np.ones(300 << 20, dtype=np.uint8)  # make the evaluator process big
    limits = Limits(wall_s=10, mem_bytes=256 << 20)
    r = run_sh(workdir, "kill -9 $$", limits)
    assert ballast.sum() == 300 << 20
    assert r.signal == signal.SIGKILL and not r.timed_out
    assert r.describe(limits) == ("killed (SIGKILL): the CPU time limit of 60 s or the memory limit of 256 MiB "
                                  "was exceeded")


def test_descriptor_mapping(workdir):
    (workdir / "in.txt").write_text("payload\n")
    r = run_sh(workdir, "cat <&3 >&4; echo side >&5", fds={3: ("r", "in.txt"), 4: ("w", "copy.txt"),
                                                          5: ("w", "side.txt")})
    assert r.ok
    assert out(workdir, "copy.txt") == "payload\n" and out(workdir, "side.txt") == "side\n"


def test_descriptor_paths_may_contain_spaces_and_colons(workdir):
    (workdir / "in put.txt").write_text("payload\n")
    r = run_sh(workdir, "cat <&3 >&4", fds={3: ("r", "in put.txt"), 4: ("w", "out: copy.txt")})
    assert r.ok, r.notes
    assert out(workdir, "out: copy.txt") == "payload\n"
    assert not (workdir / "out:").exists() and not (workdir / "in").exists()


PROBE_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
  printf("started\n");
  fflush(stdout);
  if (argv[1][0] == 'o') { int fd = open(argv[2], O_WRONLY | O_CREAT, 0644); printf("open %d\n", fd); }
  if (argv[1][0] == 'd') {   /* a device the way CUDA uses its GPU's: open read-write, then ioctl (errno, or 0) */
    char buf[256];
    int fd = open(argv[2], O_RDWR), opened = fd < 0 ? errno : 0, ioctled = -1;
    if (fd >= 0) ioctled = ioctl(fd, TCGETS, buf) < 0 ? errno : 0;
    printf("open %d ioctl %d\n", opened, ioctled);
  }
  if (argv[1][0] == 'f') { pid_t pid = fork(); printf("fork %d\n", (int)pid); }
  if (argv[1][0] == 'p') { printf("pid %d\n", (int)getpid()); }
  fflush(stdout);
  return 0;
}
"""


@pytest.fixture(scope="module")
def static_probe(tmp_path_factory):
    """A small statically linked program (a dynamic one could not even load its libc under the filter)."""
    d = tmp_path_factory.mktemp("probe")
    (d / "probe.c").write_text(PROBE_C)
    cc = shutil.which("gcc") or pytest.skip("needs gcc")
    import subprocess
    res = subprocess.run([cc, "-O1", "-static", "-o", str(d / "probe"), str(d / "probe.c")], capture_output=True)
    if res.returncode:
        pytest.skip("cannot link statically: " + res.stderr.decode()[-300:])
    return d / "probe"


def run_probe(workdir: Path, probe: Path, *args: str, seccomp: bool = True,
              limits: Limits = Limits(wall_s=10, cpu_s=5)) -> Outcome:
    # where the sandbox user can execute it; a new file, as a forked child of the previous run may still be
    # executing the old one (writing into it would fail with ETXTBSY)
    (workdir / "probe").unlink(missing_ok=True)
    shutil.copy(probe, workdir / "probe")
    sandbox.prepare_workdir(workdir, limits)
    return sandbox.start(["./probe", *args], workdir, limits, seccomp=seccomp).wait()


def test_launcher_seccomp_allows_computing_and_printing(workdir, static_probe):
    r = run_probe(workdir, static_probe, "pid")
    assert r.ok, (r.notes, r.describe(Limits()))
    assert "seccomp launcher" in r.notes or "seccomp unavailable on this architecture" in r.notes
    assert out(workdir).startswith("started\npid ")


@pytest.mark.parametrize("what", ["open", "fork"])
def test_launcher_seccomp_kills_forbidden_calls(workdir, static_probe, what):
    target = workdir / "created-by-probe"
    unfiltered = run_probe(workdir, static_probe, what, str(target), seccomp=False)
    assert unfiltered.ok and "seccomp launcher" not in unfiltered.notes
    target.unlink(missing_ok=True)
    r = run_probe(workdir, static_probe, what, str(target))
    if "seccomp launcher" not in r.notes:
        pytest.skip(f"no seccomp here: {r.notes}")
    assert r.signal == signal.SIGSYS, (r.returncode, r.signal)
    assert r.describe(Limits()) == "killed by SIGSYS: it made a forbidden system call (e.g. to create a thread or process)"
    assert out(workdir) == "started\n"    # killed at the call, before it printed its result
    assert not target.exists()


def test_setup_failure_is_exit_125(workdir):
    r = sandbox.run(["/bin/true"], workdir, Limits(wall_s=10), fds={3: ("w", "missing-dir/x")})
    assert r.returncode == 125 and not r.ok
    assert any(n.startswith("setup-failed") for n in r.notes)
    assert r.describe(Limits()).startswith("the sandbox could not be set up: ")


def test_missing_program_is_reported(workdir):
    r = sandbox.run(["/nonexistent/program"], workdir, Limits(wall_s=10))
    assert r.returncode == 125 and not r.ok
    assert "exec /nonexistent/program" in out(workdir, "stderr.txt")


@pytest.mark.parametrize("outcome,limits,expected", [
    (Outcome(None, signal.SIGKILL, True, 1.0), Limits(wall_s=2.5),
     "timed out after 2.5 s (wall-clock limit); it may loop forever or sleep"),
    # SIGKILL: the CPU hard limit (a second after SIGXCPU) or an allocation failure in the kernel; the peak
    # RSS cannot tell them apart (it includes the evaluator's pages), so both limits are named
    (Outcome(None, signal.SIGKILL, False, 1.0), Limits(mem_bytes=512 << 20),
     "killed (SIGKILL): the CPU time limit of 60 s or the memory limit of 512 MiB was exceeded"),
    (Outcome(None, signal.SIGKILL, False, 1.0), Limits(cpu_s=3),
     "killed (SIGKILL): the CPU time limit of 3 s or the memory limit of 4096 MiB was exceeded"),
    # no memory limit (the cuda target's children: CUDA reserves far more address space than it uses)
    (Outcome(None, signal.SIGKILL, False, 1.0), Limits(cpu_s=3, mem_bytes=0),
     "killed (SIGKILL): the CPU time limit of 3 s was exceeded, or the machine ran out of memory (the kernel's OOM "
     "killer)"),
    (Outcome(None, signal.SIGSYS, False, 1.0), Limits(),
     "killed by SIGSYS: it made a forbidden system call (e.g. to create a thread or process)"),
    (Outcome(None, signal.SIGXCPU, False, 1.0), Limits(cpu_s=3), "CPU time limit of 3 s exceeded"),
    (Outcome(None, signal.SIGXFSZ, False, 1.0), Limits(fsize_bytes=8 << 20),
     "file size limit of 8 MiB exceeded (too much output)"),
    (Outcome(None, signal.SIGXFSZ, False, 1.0), Limits(fsize_bytes=1536 << 10),
     "file size limit of 1.5 MiB exceeded (too much output)"),
    (Outcome(None, signal.SIGSEGV, False, 1.0), Limits(), "killed by signal SIGSEGV"),
    (Outcome(125, None, False, 1.0, ["setup-failed chdir"]), Limits(), "the sandbox could not be set up: setup-failed chdir"),
    (Outcome(2, None, False, 1.0), Limits(), "exited with status 2"),
])
def test_describe(outcome, limits, expected):
    assert outcome.describe(limits) == expected
    assert not outcome.ok


def test_read_tail(tmp_path):
    f = tmp_path / "log.txt"
    f.write_bytes(b"a" * 6000 + b"TAIL\xff")
    text = sandbox.read_tail(f, 100)
    assert text.startswith("[... 5905 bytes omitted ...]\n")
    assert text.endswith("TAIL\ufffd")
    assert sandbox.read_tail(tmp_path / "missing.txt") == ""
    f.write_text("short")
    assert sandbox.read_tail(f) == "short"


@pytest.mark.skipif(not IS_ROOT, reason="chown needs root")
def test_prepare_workdir_hands_directory_to_nobody(workdir):
    (workdir / "file").write_text("x")
    sandbox.prepare_workdir(workdir, Limits())
    assert workdir.stat().st_uid == 65534 and (workdir / "file").stat().st_uid == 65534
    other = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    try:
        sandbox.prepare_workdir(other, Limits(drop_root=False))
        assert other.stat().st_uid == 0
    finally:
        shutil.rmtree(other)


def test_a_callers_restrictive_umask_does_not_reach_the_sandbox(workdir):
    """Before, a user whose umask was 077 could not run trainium-sim: the launcher built the private view's mount
    points as root under that umask, and the program, as nobody, could not even exec its interpreter."""
    import sys
    limits = Limits(wall_s=10, cpu_s=10, private_fs=True,
                    ro_paths=(*sandbox.toolchain_paths(), sys.prefix, sys.base_prefix))
    old = os.umask(0o077)
    try:
        r = sandbox.run([sys.executable, "-I", "-c", "print('ran')"], workdir, limits)
    finally:
        os.umask(old)
    assert r.ok and out(workdir) == "ran\n", r.notes
