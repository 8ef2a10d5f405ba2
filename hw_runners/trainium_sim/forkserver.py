"""The evaluator's side of the tracing fork server (sandboxed/child.py --serve).

Launching a fresh sandboxed interpreter per candidate costs ~0.1 s before the kernel's first line runs
(the launcher's namespaces, the interpreter, numpy and the NKI front end), more than a small problem's
whole evaluation. The server is started once per evaluator through the same launcher, with the same
limits, environment, private filesystem view, network isolation and unprivileged user, and imports
everything once. Each job is a directory inside the server's working directory; the server hands it to
a child it forked ahead (while the evaluator was busy with the last job: the fork is off the job's path),
which opens only that directory's files, lowers its own rlimits to the job's and installs the seccomp
allowlist before the kernel runs, exactly like a freshly launched child. Every child takes one job. So a
kernel gets nothing from the server but a copy of a state no kernel has touched, and cannot reach the
server, the other jobs or their files (no open, kill or ptrace under the allowlist).

A child reports its exit status on a pipe of its own once its files are written and flushed, and the server
replies then, without waiting for the exit (tearing a traced kernel's memory down took 1-2 ms of every
evaluation); it kills the child (a kernel could forge that report and keep running: it is judged on what it
had written) and reaps it before it reads the next request, so a job's directory is reused only after the next
reply.

The server runs no kernel code, so it does not fail because of a kernel; if it dies or stops answering
anyway, the job reports it as a sandbox failure and the next job starts a new server.
"""
from __future__ import annotations

import math
import os
import select
import shutil
import struct
import tempfile
import threading
import time
import weakref
from dataclasses import replace
from pathlib import Path

import msgpack

from autocomp_zmq import sandbox
FRAME = struct.Struct("<I")
GRACE_S = 5.0          # how long past a job's own limit the server may take to report it before it is replaced
SERVER_CPU_S = 1 << 24  # the server's own CPU time: forking, over an evaluator's whole life


class ForkServer:
    """One sandboxed tracing server; run() is one job, serialized."""

    def __init__(self, argv: list[str], limits: sandbox.Limits, env: dict[str, str], root: Path | None = None,
                 grace_s: float = GRACE_S) -> None:
        self.argv, self.env, self.grace_s = argv, env, grace_s
        self.limits = replace(limits, wall_s=math.inf, cpu_s=SERVER_CPU_S)
        self.root = Path(tempfile.mkdtemp(prefix="trainium-sim-server-", dir=root))
        self._lock = threading.Lock()
        self._proc: sandbox.Sandboxed | None = None
        self._pipes: tuple[int, int] | None = None
        self._jobs = 0
        self._finished: list[Path] = []     # job directories to remove while the next job's kernel runs
        self._ended: set[Path] = set()      # job directories whose child the server reported ended
        self._ending: list[Path] = []       # job directories whose child was ending when the server replied
        self._awaiting: list[Path] = []     # job directories whose files were read, their child still ending
        self._spare: Path | None = None     # a finished job's directory, emptied, for the next job
        self._finalizer = weakref.finalize(self, _shutdown, self.root, [None])

    def job_dir(self) -> Path:
        """An empty directory inside the server's view for one job's files: the last finished job's (see
        discard), else a new one."""
        spare, self._spare = self._spare, None
        if spare is not None:
            return spare
        self._jobs += 1
        return Path(tempfile.mkdtemp(prefix=f"job{self._jobs}-", dir=self.root))

    def discard(self, job: Path) -> None:
        """A job whose files have been read. Once the server reported its child ended, its files are removed
        and the empty directory is a later job's (removing the directory itself takes 1-4 ms of waiting in the
        kernel, rmdir of a directory inside the server's private filesystem view: as long as a small kernel's
        whole trace, so it delayed the next job's reply); a directory the server never reported ended goes
        while the next job runs, or with the server. A child that reported its files written is usually still
        ending when its job is discarded: its directory waits for the next reply (see run)."""
        if job in self._ending:
            self._awaiting.append(job)
        else:
            self._recycle(job)

    def _recycle(self, job: Path) -> None:
        ended = job in self._ended
        self._ended.discard(job)
        if ended and self._spare is None and _emptied(job):
            self._spare = job
        else:
            self._finished.append(job)

    def _remove_finished(self) -> None:
        while self._finished:
            shutil.rmtree(self._finished.pop(), ignore_errors=True)

    def run(self, job: Path, limits: sandbox.Limits) -> sandbox.Outcome:
        """Trace the job in `job` (job.bin in, trace.bin, stdout.txt, stderr.txt out) under `limits`."""
        with self._lock:
            if self._proc is None or self._proc.proc.poll() is not None:
                self._start()
            sandbox.prepare_workdir(job, limits)
            req = msgpack.packb({"dir": str(job), "wall_s": limits.wall_s, "cpu_s": limits.cpu_s,
                                 "mem": limits.mem_bytes, "fsize": limits.fsize_bytes, "nofile": limits.nofile})
            started = time.monotonic()
            try:
                os.write(self._pipes[0], FRAME.pack(len(req)) + req)
                self._remove_finished()
                reply = self._reply(limits.wall_s + self.grace_s)
            except (OSError, EOFError, TimeoutError, ValueError) as exc:
                self._stop()
                return sandbox.Outcome(returncode=125, signal=None, timed_out=False,
                                       wall_s=time.monotonic() - started,
                                       notes=[f"the tracing server stopped answering ({type(exc).__name__}: {exc}); "
                                              f"it is restarted for the next job"])
        # the server reaps a child whose report came before its exit (reaped False) before it reads the next
        # request: this reply means every earlier job's child has ended, and nothing writes into its directory
        self._ended.update(self._ending)
        self._ending = [] if reply.get("reaped", True) else [job]
        for done in self._awaiting:
            self._recycle(done)
        self._awaiting = []
        if reply.get("reaped", True):
            self._ended.add(job)
        code = int(reply["status"])
        return sandbox.Outcome(returncode=None if code < 0 else code, signal=-code if code < 0 else None,
                               timed_out=bool(reply["timed_out"]), wall_s=float(reply["wall_s"]),
                               notes=list(self.notes))

    def _reply(self, within_s: float) -> dict:
        deadline = time.monotonic() + within_s
        size = FRAME.unpack(self._read(FRAME.size, deadline, within_s))[0]
        return msgpack.unpackb(self._read(size, deadline, within_s), raw=False)

    def _read(self, n: int, deadline: float, within_s: float) -> bytes:
        """Exactly n bytes of the server's report pipe, or TimeoutError/EOFError."""
        fd, data = self._pipes[1], b""
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no report within {within_s:.0f} s")
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise EOFError("the server exited")
            data += chunk
        return data

    def _start(self) -> None:
        self._stop()
        # the old server's children were killed with it, but were never reported reaped: not reused
        self._finished += self._awaiting
        self._awaiting, self._ending = [], []
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        sandbox.prepare_workdir(self.root, self.limits)
        try:
            self._proc = sandbox.start([*self.argv, "--serve"], self.root, self.limits, env=self.env,
                                       inherit={3: req_r, 4: rep_w}, tag="-server")
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._pipes = (req_w, rep_r)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self.root, [self._proc, *self._pipes])

    @property
    def notes(self) -> list[str]:
        status = self.root / ".sandbox-status-server"
        return status.read_text().splitlines() if status.exists() else []

    def _stop(self) -> None:
        if self._proc is not None:
            _shutdown(None, [self._proc, *self._pipes])
        self._proc, self._pipes = None, None

    def close(self) -> None:
        """Stop the server and remove its directory."""
        with self._lock:
            self._stop()
            self._finalizer()


def _emptied(job: Path) -> bool:
    """Remove a finished job's files (only plain files are ever there); whether the directory is empty now."""
    try:
        with os.scandir(job) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    return False
                os.unlink(e.path)
        return not os.listdir(job)
    except OSError:
        return False


def _shutdown(root: Path | None, held: list) -> None:
    """Close the pipes (the server exits when the request pipe closes), kill its group, reap it."""
    proc, fds = held[0], held[1:]
    for fd in fds:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
    if proc is not None:
        sandbox.kill_group(proc.proc.pid)
        try:
            proc.proc.wait(timeout=10)
        except Exception:
            pass
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)
