"""The run directory on disk: one coordinator at a time (an OS file lock), files written atomically, and
a fallback place for the results when the directory vanished during the run.

Run directory layout:
    run.db      SQLite run store (WAL)          secret   HMAC key, mode 0600
    config.json the configuration, for humans   logs/    coordinator.log and one log per local agent
    best.c      the best kernel found           best.json  its numbers
                (best.py etc.: the ending is the target's kernel_suffix)
    coordinator.lock  held (flock) by the coordinator running the run; holds its pid
"""
from __future__ import annotations

import fcntl
import os
import sqlite3
import tempfile
import time
from pathlib import Path

LOCK_NAME = "coordinator.lock"


class RunDirError(RuntimeError):
    """The run directory cannot be used; the message says why and what to do."""


class RunLock:
    """An exclusive flock on RUN_DIR/coordinator.lock for as long as the coordinator runs. The kernel drops
    it when the process dies, however it dies, so a crashed run never leaves a stale lock behind."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RunDirError(f"cannot create {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self.path.read_text().strip() or "unknown"
            os.close(self.fd)
            raise RunDirError(f"{run_dir} is in use by another coordinator (pid {holder}); wait for it to "
                              "finish or stop it first") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)   # closing drops the lock; the file stays (unlinking would race a new holder)
            self.fd = -1


def is_locked(run_dir: Path) -> bool:
    """Whether a coordinator is running the run in run_dir right now."""
    try:
        fd = os.open(Path(run_dir) / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


# Modes of what a run writes in its directory: the owner's only, or also its group's to read (--group-read). Set
# per file, never through the process's umask, which the agents and the sandboxes they start would inherit.
MODES = {"dir": 0o700, "file": 0o600}


def keep_private(run_dir: Path, group_read: bool = False) -> None:
    """The run directory, its logs folder and its store the owner's only (0700, 0600), or also its group's to read
    (0750, 0640); so is what the run writes there from now on (private_open, write_atomic). A run that an older
    version left readable by all is closed on resume."""
    MODES.update(dir=0o750 if group_read else 0o700, file=0o640 if group_read else 0o600)
    for folder in (run_dir, run_dir / "logs"):
        if folder.is_dir():
            folder.chmod(MODES["dir"])
    for name in ("run.db", "run.db-wal", "run.db-shm", "config.json", "best.json"):
        if (run_dir / name).exists():
            (run_dir / name).chmod(MODES["file"])


def private_open(path: Path, mode: str = "ab"):
    """A file of the run directory opened for appending, created with (and kept at) the run's file mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, MODES["file"])
    os.fchmod(fd, MODES["file"])
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def prepare_new(run_dir: Path) -> RunLock:
    """Create (or reuse an empty) run directory and lock it; refuse one that holds a run or is not a dir."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"--out {run_dir} exists and is not a directory")
    try:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirError(f"cannot create the run directory {run_dir}: {exc.strerror}") from None
    lock = RunLock(run_dir)
    if (run_dir / "run.db").exists():
        lock.release()
        raise RunDirError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it")
    return lock


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, MODES["file"])        # mkstemp's 0600, or the run's group-readable mode
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fallback_dir(run_dir: Path) -> Path:
    """Where the results go when run_dir is gone: the user's data dir, else the temp dir."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "autocomp" / "rescued"
    name = f"{Path(run_dir).name}-{time.strftime('%Y%m%d-%H%M%S')}"
    for root in (base, Path(tempfile.gettempdir()) / "autocomp-rescued"):
        try:
            (root / name).mkdir(parents=True, exist_ok=True)
            return root / name
        except OSError:
            continue
    raise RunDirError(f"{run_dir} vanished and no fallback directory could be created")


def rescue_store(db: sqlite3.Connection, dest: Path) -> None:
    """Copy the whole run store from its open connection (its file may already be unlinked)."""
    target = sqlite3.connect(dest)
    try:
        db.backup(target)
    finally:
        target.close()
