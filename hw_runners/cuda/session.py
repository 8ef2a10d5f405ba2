"""Starting the cuda target's children (child/README.md) and the evaluator's end of the conversation with each: one
Unix SOCK_SEQPACKET socket per child, a JSON message per packet, outputs attached as descriptors of sealed memory files.

What a child sends is checked here before anything reads it: a message is one bounded JSON object; descriptors come
only with the messages that hand over outputs and must be sealed memory (memfd with write, grow and shrink sealed), so
nothing, the child included, can change them after they were sent. Anything else ends the conversation."""
from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult

CHILD = Path(__file__).with_name("child")
SCRIPTS = ("judge_common.py", "judge_timing.py", "judge_compare.py")
WIRE_FD = 3                          # the child's end of its socket
MESSAGE_BYTES = 1 << 16
MAX_FDS = 250                        # descriptors per message (the kernel's SCM_MAX_FD is 253)
SEALED = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK
# what a stage failing means, for the error kind and the sentence the repair prompt reads
STAGES = {"setup": ("setup", "the judge could not start"),
          "import": ("compile", "kernel.py failed to import (its inline CUDA is compiled on import)"),
          "init": ("compile", "building ModelNew(*get_init_inputs()) failed"),
          "run": ("crash", "forward failed"),
          "benchmark": ("crash", "timing forward failed"),
          "compare": ("setup", "comparing the outputs failed")}


class Hangup(Exception):
    """The child ended the conversation (exited, crashed, timed out, or broke the protocol); str says how."""


@dataclass
class Child:
    dir: Path
    python: str
    env: dict[str, str]
    limits: sandbox.Limits


def sealed(fd: int) -> bool:
    """Whether `fd` is a regular memory file whose contents can no longer change."""
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALED == SEALED
    except OSError:
        return False


def close_all(fds) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class Conversation:
    """One running child and the evaluator's end of its socket. The clock that matters is this process's own
    (time.monotonic): `receive` notes when each message arrived."""

    def __init__(self, child: Child, proc: sandbox.Sandboxed, sock: socket.socket) -> None:
        self.child, self.proc, self.sock = child, proc, sock
        self.deadline = time.monotonic() + child.limits.wall_s + 5
        self.outcome: sandbox.Outcome | None = None
        self.arrived = 0.0
        self.stopped_early = False           # it was still running when the evaluator stopped it

    def send(self, message: dict, fds=()) -> float:
        """Send; returns the time just before it was sent (this process's clock: the child cannot have read the
        message earlier, whenever this process gets to run again)."""
        data = json.dumps(message).encode()
        sent = time.monotonic()
        try:
            socket.send_fds(self.sock, [data], list(fds))
        except OSError as exc:
            raise Hangup(f"the judge's child stopped listening ({exc.strerror or exc})") from None
        return sent

    def receive(self, timeout: float | None = None) -> tuple[dict, list[int]]:
        """The next message and its descriptors (checked: sealed memory), or Hangup."""
        until = self.deadline if timeout is None else min(self.deadline, time.monotonic() + timeout)
        ready, _, _ = select.select([self.sock], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            raise Hangup("timed out" if time.monotonic() >= self.deadline else "sent nothing in time")
        try:
            data, fds, flags, _ = socket.recv_fds(self.sock, MESSAGE_BYTES, MAX_FDS)
        except OSError as exc:
            raise Hangup(f"its socket failed ({exc.strerror or exc})") from None
        self.arrived = time.monotonic()
        if not data:
            close_all(fds)
            raise Hangup("hung up")
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            close_all(fds)
            raise Hangup("sent a message larger than the protocol allows")
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            close_all(fds)
            raise Hangup("sent something that is not a protocol message")
        if fds and not all(sealed(fd) for fd in fds):
            close_all(fds)
            raise Hangup("handed over descriptors that are not sealed memory")
        return message, list(fds)

    def expect(self, key: str, timeout: float | None = None) -> tuple[dict, list[int]]:
        """The next message, which must carry `key` (a child's report of its own failure raises Failed)."""
        message, fds = self.receive(timeout)
        if "failed" in message and isinstance(message["failed"], dict):
            close_all(fds)
            raise Failed(message["failed"])
        if key not in message:
            close_all(fds)
            raise Hangup(f"said {sorted(message)[:3]} where the protocol expects {key!r}")
        return message, fds

    def stop(self) -> sandbox.Outcome:
        """End the child now (what it had not sent by now does not count) and reap it."""
        if self.outcome is None:
            self.stopped_early = self.alive()
            sandbox.kill_group(self.proc.proc.pid)
            self.outcome = self.proc.wait()
            self.sock.close()
        return self.outcome

    def alive(self) -> bool:
        if self.outcome is not None:
            return False
        try:
            return os.waitid(os.P_PID, self.proc.proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None
        except ChildProcessError:
            return False

    def wait(self, timeout: float) -> sandbox.Outcome:
        """Let the child exit by itself (for at most `timeout` s), then stop it."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if os.waitid(os.P_PID, self.proc.proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                    break
            except ChildProcessError:
                break
            time.sleep(0.02)
        return self.stop()

    @property
    def stdout(self) -> str:
        return sandbox.read_tail(self.child.dir / "stdout.txt")

    @property
    def stderr(self) -> str:
        return sandbox.read_tail(self.child.dir / "stderr.txt", 6000)

    def ended(self, why: str, common: dict) -> EvalResult:
        """The verdict for a child that ended the conversation early (`why`): how it ended, from its outcome."""
        o = self.stop()
        if o.returncode == 125:
            return EvalResult.failure("sandbox", o.describe(self.child.limits), **common)
        kind = "timeout" if o.timed_out else "crash"
        ended_itself = o.timed_out or not self.stopped_early
        how = o.describe(self.child.limits) if ended_itself and (o.timed_out or o.signal or o.returncode) else why
        if not ended_itself:
            kind = "policy"
        tail = self.stderr[-2000:]
        return EvalResult.failure(kind, f"the evaluation {how} before the judge finished" + (f":\n{tail}" if tail else ""),
                                  **common)


class Failed(Exception):
    """A child's own report of a failed stage (judge_common.fail)."""

    def __init__(self, report: dict) -> None:
        super().__init__(str(report.get("error", "")))
        self.report = report

    def result(self, child_dir: Path, common: dict) -> EvalResult:
        stage = str(self.report.get("stage"))
        kind, what = STAGES.get(stage, ("crash", "the judge failed"))
        kind = self.report.get("kind") or kind
        trace = str(self.report.get("traceback") or "").replace(str(child_dir) + "/", "")
        return EvalResult.failure(kind, f"{what}: {self.report.get('error', '')}" + (f"\n{trace}" if trace else ""),
                                  **common)


def start(child: Child, reference: str, script: str, job: dict, files: dict[str, str] | None = None) -> Conversation:
    """Install the judge's scripts, the problem's reference (its source, at the sizes this evaluation runs) and
    `files` into the child's directory and start `script` sandboxed, with its end of a new socket as descriptor
    WIRE_FD."""
    child.dir.mkdir(parents=True, exist_ok=True)
    (child.dir / "tmp").mkdir(exist_ok=True)
    for name in (*SCRIPTS, script):
        shutil.copyfile(CHILD / name, child.dir / name)
    (child.dir / "reference.py").write_text(reference)
    for name, text in (files or {}).items():
        (child.dir / name).write_text(text)
    (child.dir / "job.json").write_text(json.dumps({**job, "wire": WIRE_FD}))
    sandbox.prepare_workdir(child.dir, child.limits)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = sandbox.start([child.python, script, "job.json"], child.dir, child.limits, env=child.env,
                             inherit={WIRE_FD: theirs.fileno()})
    finally:
        theirs.close()
    return Conversation(child, proc, ours)


def run_profile(child: Child, job: dict) -> dict:
    """Nsight Compute's metrics of one forward of the candidate (ncu.py) run in the candidate's own directory (its
    compiled extensions and Triton cache are reused), or {"ncu_error": why not}."""
    from autocomp_zmq.hw_runners.cuda import ncu
    tool = ncu.ncu_path()
    if tool is None:
        return {"ncu_error": "ncu (Nsight Compute) is not installed"}
    refused = ncu.refused_to(child.limits)
    if refused:
        return {"ncu_error": refused}
    shutil.copyfile(CHILD / "profile_run.py", child.dir / "profile_run.py")
    (child.dir / "profile.json").write_text(json.dumps({**job, "wire": None}))
    sandbox.prepare_workdir(child.dir, child.limits)
    argv = ncu.command(tool, child.python, "profile_run.py", "profile.json")
    outcome = sandbox.run(argv, child.dir, child.limits, env=child.env,
                          fds={1: ("w", "profile-stdout.txt"), 2: ("w", "profile-stderr.txt")})
    metrics = ncu.parse(sandbox.read_tail(child.dir / "profile-stdout.txt", 1 << 20))
    if metrics:
        return {"ncu": metrics}
    why = ncu.describe_failure(sandbox.read_tail(child.dir / "profile-stderr.txt")
                               + sandbox.read_tail(child.dir / "profile-stdout.txt"))
    return {"ncu_error": why if outcome.ok or not outcome.timed_out else outcome.describe(child.limits)}
