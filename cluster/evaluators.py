"""Evaluators as Slurm tasks: what `run --slurm N` and `workers --slurm N` submit, one job of N tasks of
`evaluators.sbatch`, each task an evaluator that connects back to the coordinator, and how that job is
watched while the run goes on and cancelled when it ends.

Nothing secret travels with the job: a cluster shares its filesystem, so the job's environment names the
secret file (RUN_DIR/secret, mode 0600) and the CurveZMQ public key file where they are; a command line or an
environment variable would show the secret itself to `ps` and `scontrol show job`. The job's environment is
the submitter's without model API keys (sbatch exports it), as for local evaluators."""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import structlog

from autocomp_zmq.cluster import slurm
from autocomp_zmq.cluster.slurm import SlurmError

log = structlog.get_logger("cluster.evaluators")
WILDCARDS = {"0.0.0.0", "*", "::", "[::]", ""}
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
# Options that bound how many tasks share a node: a device target's evaluator claims one device of its node
# (a lock file per NeuronCore or GPU, or the one the task's environment names, e.g. CUDA_VISIBLE_DEVICES
# from --gpus-per-task), so a node given more tasks than devices has evaluators with nothing to run on.
PER_NODE_LIMITS = ("--ntasks-per-node", "--gpus-per-task", "--tres-per-task")


@dataclass
class EvaluatorJob:
    """One sbatch job of `tasks` evaluators for the coordinator at host:port."""
    tasks: int
    host: str
    port: str
    secret: Path
    curve_key: Path | None = None
    target: str = "gemmini-sim"
    worker_args: list[str] = field(default_factory=list)   # heartbeat, target options: as for local evaluators
    options: list[str] = field(default_factory=list)       # --slurm-option: last, so that they override ours
    name: str = "autocomp-evaluators"
    output: str | None = None                              # sbatch --output (None: slurm-%j.out where submitted)

    def sbatch_args(self) -> list[str]:
        out = [f"--output={self.output}"] if self.output else []
        # --no-requeue: a job whose node fails leaves the queue at once and the run submits it again (Submitted)
        # within seconds; requeued by Slurm instead, it would wait the cluster's CredExpire (2 min by default)
        # before starting anywhere. --slurm-option=--requeue comes after it and wins.
        return [f"--ntasks={self.tasks}", f"--job-name={self.name}", "--export=ALL", "--no-requeue", *out,
                *self.options, str(slurm.TEMPLATE)]

    def environment(self, base: dict[str, str], argv: list[str]) -> dict[str, str]:
        """`base` (the submitter's environment, without model keys) with what each task needs to start a worker
        by `argv` (its command before the arguments: python -m autocomp_zmq.launch, or python path/launch.py)."""
        env = {k: v for k, v in base.items() if k not in ("CURVE_KEY", "WORKER_ARGS", "AUTOCOMP_LAUNCH")}
        env.update(HEAD=self.host, PORT=self.port, SECRET=str(self.secret), TARGET=self.target,
                   WORKER_ARGS="\n".join(self.worker_args), AUTOCOMP_PYTHON=argv[0])
        if argv[1] != "-m":               # a checkout that was never installed: its launch.py, by path
            env["AUTOCOMP_LAUNCH"] = argv[1]
        if self.curve_key:
            env["CURVE_KEY"] = str(self.curve_key)
        return env


def connect_address(endpoint: str, flag: str = "--bind") -> tuple[str, str]:
    """(host, port) the tasks connect to: the endpoint's, with a wildcard address (tcp://0.0.0.0:5555) replaced by
    this host's name. A loopback address is kept (a one-node cluster) with a warning: other nodes cannot reach it."""
    scheme, _, rest = endpoint.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme != "tcp" or not port.isdigit():
        raise SlurmError(f"Slurm tasks connect over TCP: {flag} {endpoint} is not tcp://HOST:PORT")
    if host in WILDCARDS:
        host = socket.gethostname()
    elif host in LOOPBACK:
        log.warning("slurm_loopback_endpoint", endpoint=endpoint,
                    note="tasks on other nodes cannot reach it" + (": listen with --bind tcp://0.0.0.0:PORT"
                                                                    if flag == "--bind" else ""))
    return host, port


def warn_unless_one_per_device(unit: str, options: list[str]) -> None:
    """A device target's job with nothing that limits its tasks per node: say so (Slurm would pack them by CPUs)."""
    if unit == "devices" and not any(o.split("=", 1)[0].split(" ")[0] in PER_NODE_LIMITS for o in options):
        log.warning("slurm_devices_per_node", note="each evaluator takes one device of its node: give "
                    "--slurm-option=--ntasks-per-node=DEVICES (or --gpus-per-task=1) so that no node gets more "
                    "tasks than it has devices")


class Submitted:
    """A submitted job (or none): watched while the run goes on, ended with end() however the run ends. A job that
    leaves the queue while the run goes on (scancel, a node failure, its time limit) is said on the terminal and
    submitted again, up to max_resubmits times; after that `failed` says why, and the run stops on it."""

    def __init__(self, job_id: str | None = None, output: str | None = None,
                 resubmit: Callable[[], str] | None = None, max_resubmits: int = 2) -> None:
        self.job_id, self.output = job_id, output
        self.resubmit, self.resubmits_left = resubmit, max_resubmits if resubmit else 0
        self.failed: str | None = None
        self._stop = threading.Event()
        self._watch = None
        if job_id:
            self._watch = threading.Thread(target=self._watch_queue, daemon=True, name=f"slurm-{job_id}")
            self._watch.start()

    def end(self, finished: bool) -> None:
        """Cancel the job: after a normal end its workers were told to exit, so it gets a few seconds to complete
        on its own; after an error or an interruption it is cancelled at once."""
        if not self.job_id:
            return
        self._stop.set()
        slurm.cancel(self.job_id, grace_s=10.0 if finished else 0.0)

    def _watch_queue(self, every_s: float = 5.0, pending_warn_s: float = 60.0, gone_grace_s: float = 10.0) -> None:
        """Say what the run would otherwise only show as evaluators that never come: the job still pending after a
        minute (with Slurm's reason: Resources, Priority, PartitionTimeLimit...), or gone while the run goes on
        (then submitted again, or the run told to stop)."""
        started, warned = time.monotonic(), False
        while not self._stop.wait(every_s):
            try:
                now = slurm.state(self.job_id)
            except SlurmError:
                continue
            if now is None:
                # the job also leaves the queue when the run ends normally (its workers are told to exit) just
                # before end() is called: only a job still gone unremarked after a while left early
                if self._stop.wait(gone_grace_s) or not self._replace():
                    return
                started, warned = time.monotonic(), False
            elif now[0] == "PENDING" and not warned and time.monotonic() - started >= pending_warn_s:
                warned = True
                log.warning("slurm_job_pending", job=self.job_id, reason=now[1],
                            note="the evaluators' job has not started; the run waits for it")

    def _replace(self) -> bool:
        """The job left early: submit it again (True), or say the run cannot go on (False)."""
        gone, output = self.job_id, self.output or f"slurm-{self.job_id}.out"
        if self.resubmits_left <= 0:
            self.failed = (f"the evaluators' Slurm job {gone} left the queue before the run ended (cancelled, a node "
                           f"failure or its time limit; its output: {output})"
                           + (", and so did the jobs submitted again" if self.resubmit else ""))
            log.error("slurm_job_gone", job=gone, note=self.failed)
            return False
        self.resubmits_left -= 1
        try:
            self.job_id = self.resubmit()
        except SlurmError as exc:
            self.failed = f"the evaluators' Slurm job {gone} left the queue early, and submitting it again failed: {exc}"
            log.error("slurm_job_gone", job=gone, note=self.failed)
            return False
        if self.output:
            self.output = self.output.replace(gone, self.job_id)
        log.warning("slurm_job_gone", job=gone, resubmitted_as=self.job_id,
                    note=f"the evaluators' job left the queue before the run ended (its output: {output}); submitted "
                         f"again as job {self.job_id} ({self.resubmits_left} more time(s) at most)")
        return True
