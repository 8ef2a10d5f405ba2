"""Run an untrusted program in a sandboxed child process.

Infrastructure shared by the hardware targets (hw_runners/), not a target
itself. The child starts in a new session (so the whole process group can be
killed), with an empty environment unless told otherwise, inside a private
working directory, through `launcher.c`, which applies hard rlimits, a private
network namespace and drops root; optionally a private filesystem view
(`privatefs.c`: the work directory, read-only paths, read-write device nodes
and a /proc of its own PID namespace). A wall-clock timer kills the process
group.
The evaluator that calls this never runs candidate code in its own process.
The launcher is built once per machine by `buildcache`; `seccomp_filter.h`
(in HEADER_DIR) holds what every seccomp allowlist shares, for programs that
install a stricter filter of their own.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from autocomp_zmq.sandbox.buildcache import cached_build, run_build

_HERE = Path(__file__).parent
# programs that include seccomp_filter.h: compile with -I HEADER_DIR, list SECCOMP_HEADER among the cached sources
HEADER_DIR = _HERE
SECCOMP_HEADER = HEADER_DIR / "seccomp_filter.h"
_LAUNCHER_SRC = [_HERE / "launcher.c", _HERE / "privatefs.c", _HERE / "privatefs.h", SECCOMP_HEADER]
NOBODY_UID = 65534


def launcher_path() -> Path:
    return cached_build("sandbox-launcher", _LAUNCHER_SRC, ["-O2"],
                        lambda out: run_build(["gcc", "-O2", "-o", str(out),
                                               *(str(p) for p in _LAUNCHER_SRC if p.suffix == ".c")]))


@functools.cache
def toolchain_paths(cc: str = "gcc") -> tuple[str, ...]:
    """Read-only paths a compiler needs in a private filesystem view: the system's program and library
    trees (merged-/usr links included) and the compiler's own installation if it lives elsewhere."""
    paths = [p for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32") if os.path.lexists(p)]
    found = shutil.which(cc)
    extra = [os.path.dirname(os.path.realpath(found))] if found else []
    try:
        out = subprocess.run([cc, "-print-search-dirs"], capture_output=True, text=True, timeout=30).stdout
        extra += [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("install:")]
    except (OSError, subprocess.SubprocessError):
        pass
    for p in extra:
        p = os.path.realpath(p)
        if os.path.isdir(p) and not any(p == q or p.startswith(q + "/") for q in paths):
            paths.append(p)
    return tuple(paths)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed program. All injectable for tests."""
    wall_s: float = 60.0
    cpu_s: int = 60
    mem_bytes: int = 4 << 30
    fsize_bytes: int = 64 << 20
    nofile: int = 64
    nproc: int = 0  # 0: no RLIMIT_NPROC (it does not bind root; seccomp blocks fork instead)
    isolate_net: bool = True
    drop_root: bool = True
    private_fs: bool = False      # see only the working directory, ro_paths and devices (fails closed)
    ro_paths: tuple[str, ...] = ()
    # device nodes the program may open read-write (a GPU's: CUDA opens them O_RDWR and drives them by ioctl);
    # with private_fs only (without it nothing is hidden)
    devices: tuple[str, ...] = ()
    force_landlock: bool = False  # Landlock even where a mount namespace is possible (for tests)
    # a PID namespace: every process the program started dies with it, even one that left its process group
    # (setsid); a status note says when none could be made (then the process group is all that is killed)
    pid_ns: bool = False
    # a /proc in the private view: a fresh, read-only procfs of the program's own PID namespace, so that it lists
    # only the program's processes (never the host's /proc, whose /proc/<pid>/root leads into other sandboxes).
    # Needs private_fs and pid_ns; where none can be mounted there is no /proc, and the status note
    # "proc none (<why>)" says why ("proc private" when there is one)
    proc: bool = False


@dataclass
class Outcome:
    returncode: int | None
    signal: int | None
    timed_out: bool
    wall_s: float
    notes: list[str] = field(default_factory=list)
    # CPU time (user + system) the program and the descendants it waited for used, from the kernel's
    # accounting at reaping: unlike wall time, not stretched by a loaded machine
    cpu_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self, limits: Limits) -> str:
        """One sentence saying why the program did not finish normally."""
        if self.timed_out:
            return f"timed out after {limits.wall_s:g} s (wall-clock limit); it may loop forever or sleep"
        if self.signal == signal.SIGKILL:
            # ru_maxrss cannot tell: it includes the pages of the Python process that forked us
            if not limits.mem_bytes:        # no address-space limit (the cuda target's): the machine's memory
                return (f"killed (SIGKILL): the CPU time limit of {limits.cpu_s} s was exceeded, or the machine ran "
                        "out of memory (the kernel's OOM killer)")
            return (f"killed (SIGKILL): the CPU time limit of {limits.cpu_s} s or the memory limit of "
                    f"{limits.mem_bytes >> 20} MiB was exceeded")
        if self.signal == signal.SIGSYS:
            return "killed by SIGSYS: it made a forbidden system call (e.g. to create a thread or process)"
        if self.signal == signal.SIGXCPU:
            return f"CPU time limit of {limits.cpu_s} s exceeded"
        if self.signal == signal.SIGXFSZ:
            return f"file size limit of {limits.fsize_bytes / 2**20:g} MiB exceeded (too much output)"
        if self.signal is not None:
            return f"killed by signal {signal.Signals(self.signal).name}"
        if self.returncode == 125:
            return "the sandbox could not be set up: " + "; ".join(self.notes)
        return f"exited with status {self.returncode}"


def prepare_workdir(path: Path, limits: Limits) -> None:
    """Let the unprivileged sandbox user write the private directory."""
    if limits.drop_root and os.geteuid() == 0:
        os.chown(path, NOBODY_UID, NOBODY_UID)
        for child in path.iterdir():
            os.chown(child, NOBODY_UID, NOBODY_UID)


class Sandboxed:
    """A started sandboxed program; wait() reaps it and says how it ended."""

    def __init__(self, proc: subprocess.Popen, limits: Limits, status: Path) -> None:
        self.proc, self.limits, self.status = proc, limits, status
        self.started = time.monotonic()
        self._timed_out = threading.Event()
        self._timer = threading.Timer(limits.wall_s, self._expire)
        self._timer.daemon = True
        if math.isfinite(limits.wall_s):    # a long-lived server (wall_s=inf) is stopped by its owner
            self._timer.start()

    def _expire(self) -> None:
        self._timed_out.set()
        kill_group(self.proc.pid)

    def wait(self) -> Outcome:
        try:
            # Wait without reaping: while the leader is a zombie its process-group id
            # cannot be reused, so killing the group cannot hit an unrelated process.
            os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
        finally:
            self._timer.cancel()
            kill_group(self.proc.pid)  # stragglers of a program that forked before dying
        _, wstatus, usage = os.wait4(self.proc.pid, 0)   # (its ru_maxrss would include the evaluator's pages)
        self.proc.returncode = code = os.waitstatus_to_exitcode(wstatus)
        sig = -code if code < 0 else None
        notes = self.status.read_text().splitlines() if self.status.exists() else []
        return Outcome(returncode=None if sig else code, signal=sig, timed_out=self._timed_out.is_set(),
                       wall_s=time.monotonic() - self.started, notes=notes,
                       cpu_s=usage.ru_utime + usage.ru_stime)


def start(argv: list[str], workdir: Path, limits: Limits, fds: dict[int, tuple[str, str]] | None = None,
          env: dict[str, str] | None = None, inherit: dict[int, int] | None = None, seccomp: bool = False,
          tag: str = "") -> Sandboxed:
    """Start argv in workdir. fds maps descriptor number -> ("r"|"w", path relative to workdir);
    inherit maps descriptor number -> one of our descriptors (e.g. a pipe end) to pass on;
    stdout/stderr go to workdir/stdout.txt and workdir/stderr.txt unless fds name 1/2.
    seccomp: apply the launcher's allowlist before exec (for candidate kernels)."""
    fds = {1: ("w", "stdout.txt"), 2: ("w", "stderr.txt"), **(fds or {})}
    status = workdir / f".sandbox-status{tag}"
    cmd = [str(launcher_path()), "--status", str(status), "--chdir", str(workdir),
           "--cpu", str(limits.cpu_s), "--mem", str(limits.mem_bytes),
           "--fsize", str(limits.fsize_bytes), "--nofile", str(limits.nofile)]
    if limits.nproc:
        cmd += ["--nproc", str(limits.nproc)]
    if limits.isolate_net:
        cmd.append("--isolate-net")
    if limits.drop_root:
        cmd.append("--drop-root")
    if seccomp:
        cmd.append("--seccomp")
    if limits.pid_ns:
        cmd.append("--pid-ns")
    if limits.private_fs:
        cmd.append("--private-fs")
        cmd += [arg for path in limits.ro_paths for arg in ("--ro", path)]
        cmd += [arg for path in limits.devices for arg in ("--dev", path)]
        if limits.proc:
            cmd.append("--proc")
        if limits.force_landlock:
            cmd.append("--fs-landlock")
    for num, (mode, rel) in sorted(fds.items()):
        cmd += ["--fd", f"{num}:{mode}:{workdir / rel}"]
    for num, ours in sorted((inherit or {}).items()):
        cmd += ["--fd", f"{num}:dup:{ours}"]
    cmd += ["--", *argv]
    # umask 022 whatever the user's: the launcher builds the private view's mount points as root and the program
    # runs as nobody, which must traverse them (under a 077 umask it could not even exec its interpreter)
    proc = subprocess.Popen(cmd, env=env or {}, cwd=workdir, start_new_session=True, umask=0o022,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            close_fds=True, pass_fds=tuple((inherit or {}).values()))
    return Sandboxed(proc, limits, status)


def run(argv: list[str], workdir: Path, limits: Limits, fds: dict[int, tuple[str, str]] | None = None,
        env: dict[str, str] | None = None) -> Outcome:
    """start() and wait()."""
    return start(argv, workdir, limits, fds, env).wait()


def kill_group(pid: int) -> None:
    """SIGKILL the process group a sandboxed program leads (if it still exists)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_tail(path: Path, limit: int = 4000) -> str:
    """Last `limit` bytes of a file the sandboxed program wrote, decoded leniently."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return ("[... %d bytes omitted ...]\n" % (size - limit) + text) if size > limit else text


@contextlib.contextmanager
def memory_ceiling(extra_bytes: int | None):
    """Bound what this process may allocate beyond its current size while the block runs (RLIMIT_AS, the
    soft limit only, restored after): trusted code handling an untrusted artefact (a kernel's recorded
    stream) then fails with MemoryError instead of taking the host's memory. None: no ceiling."""
    if extra_bytes is None:
        yield
        return
    vm = psutil.Process().memory_info().vms
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + extra_bytes if hard == resource.RLIM_INFINITY else min(hard, vm + extra_bytes)
    if soft != resource.RLIM_INFINITY and soft < cap:
        cap = soft                       # never loosen a ceiling someone else set
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
