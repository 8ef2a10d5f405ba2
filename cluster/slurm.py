"""Slurm through its own commands: `sbatch --parsable` submits (`--test-only` checks a job before anything
starts), `squeue` says where a job is, `scancel` ends it. Nothing here schedules or tracks more than one job id:
the cluster is Slurm's to manage."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import structlog

log = structlog.get_logger("cluster.slurm")
TEMPLATE = Path(__file__).with_name("evaluators.sbatch")   # package data: a checkout's file or the installed one
COMMAND_TIMEOUT_S = 60.0      # a controller that does not answer in this long is down, not slow
GONE_STATES = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
               "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"}


class SlurmError(RuntimeError):
    """Slurm is missing or refused a request; the message is one line saying which and why."""


def require(tool: str, flag: str = "--slurm") -> str:
    """The path of one of Slurm's commands, or a one-line error naming the flag that needs it."""
    path = shutil.which(tool)
    if path is None:
        raise SlurmError(f"{flag} needs Slurm's {tool} on PATH, and there is none: install Slurm's client commands "
                         f"(Debian: slurm-client) on this host, or leave out {flag}")
    return path


def _run(argv: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{Path(argv[0]).name} did not answer in {COMMAND_TIMEOUT_S:.0f} s: is slurmctld up?") \
            from None
    except OSError as exc:
        raise SlurmError(f"cannot run {argv[0]}: {exc.strerror}") from None


def _why(proc: subprocess.CompletedProcess) -> str:
    """Slurm's own reason, without its 'sbatch: error: ' prefix: its fatal line, else its first error line (what
    follows it repeats it in the controller's words, e.g. 'allocation failure: Invalid partition name specified'),
    else its last line."""
    lines = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
    said = [line for line in lines if ": fatal: " in line] or [line for line in lines if ": error: " in line]
    text = (said or lines)[0 if said else -1] if lines else f"exit status {proc.returncode}"
    for prefix in ("sbatch: error: ", "sbatch: fatal: ", "squeue: error: ", "scancel: error: ", "error: "):
        text = text.removeprefix(prefix)
    return text


def check(args: list[str], env: dict) -> None:
    """Ask slurmctld whether it would take this job (`sbatch --test-only`: validates the options and finds a
    place and time for it, submits nothing), so that a bad partition or an impossible request is an error
    before the run creates anything."""
    proc = _run([require("sbatch"), "--test-only", *args], env)
    if proc.returncode != 0:
        raise SlurmError(f"Slurm would not take the evaluators' job: {_why(proc)}")


def submit(args: list[str], env: dict) -> str:
    """Submit with `sbatch --parsable` and return the job id."""
    proc = _run([require("sbatch"), "--parsable", *args], env)
    job_id = proc.stdout.strip().split(";")[0]        # --parsable prints "ID" or "ID;CLUSTER"
    if proc.returncode != 0 or not job_id.isdigit():
        raise SlurmError(f"sbatch refused the evaluators' job: {_why(proc)}")
    return job_id


def state(job_id: str) -> tuple[str, str] | None:
    """(state, reason) of a job while squeue lists it (PENDING, RUNNING, COMPLETING...); None once it is gone."""
    proc = _run([require("squeue", "squeue"), "--noheader", "--jobs", job_id, "--format", "%T|%r"])
    if proc.returncode != 0:
        if "Invalid job id" in (proc.stderr or ""):    # purged from the controller's memory: long gone
            return None
        raise SlurmError(f"squeue cannot say where job {job_id} is: {_why(proc)}")
    line = proc.stdout.strip()
    if not line:
        return None
    current, _, reason = line.partition("|")
    return None if current in GONE_STATES else (current, reason)


def cancel(job_id: str, grace_s: float = 0.0, wait_s: float = 60.0) -> bool:
    """End a job: give a started one `grace_s` to leave the queue on its own (workers told that the run is over
    exit, and the job completes), then scancel it, then wait up to `wait_s` for it to leave the queue (its tasks get
    SIGTERM, then SIGKILL after the cluster's KillWait). True when it is gone."""
    try:
        now = state(job_id)
    except SlurmError:          # the controller is unreachable: scancel anyway (it retries), then wait
        now = ("UNKNOWN", "")
    if now is None:
        return True
    if now[0] != "PENDING" and _gone_within(job_id, grace_s):    # a pending job has no worker to exit
        return True
    proc = _run([require("scancel", "scancel"), job_id])
    if proc.returncode != 0 and "already completed" not in proc.stderr and "Invalid job id" not in proc.stderr:
        log.warning("slurm_cancel_failed", job=job_id, reason=_why(proc))
    if _gone_within(job_id, wait_s):
        log.info("slurm_job_ended", job=job_id)
        return True
    log.warning("slurm_job_still_queued", job=job_id, note=f"scancel {job_id} did not end it in {wait_s:.0f} s")
    return False


def _gone_within(job_id: str, seconds: float) -> bool:
    deadline, warned = time.monotonic() + seconds, False
    while True:
        try:
            if state(job_id) is None:
                return True
        except SlurmError as exc:       # the controller is unreachable: keep trying until the deadline
            if not warned:
                log.warning("slurm_unreachable", job=job_id, reason=str(exc))
                warned = True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
