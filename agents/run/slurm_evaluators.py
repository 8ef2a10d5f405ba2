"""A run's evaluators on Slurm (`run --slurm N`): the job cluster/evaluators.py submits, built from the run's
options. Here rather than in cluster/ so that cluster/ knows nothing of a run's configuration: it is given
the numbers, the worker's arguments and its command line."""
from __future__ import annotations

from pathlib import Path

import structlog

from autocomp_zmq.agents.run.localagents import keyless_env, worker_argv
from autocomp_zmq.agents.run.runflags import evaluator_args, option_pairs
from autocomp_zmq.cluster import slurm
from autocomp_zmq.cluster.evaluators import EvaluatorJob, Submitted, connect_address, warn_unless_one_per_device
from autocomp_zmq.cluster.slurm import SlurmError
from autocomp_zmq.hw_runners.base import TargetInfo

log = structlog.get_logger("cluster.evaluators")


def run_job(cfg, run_dir: Path, endpoint: str) -> EvaluatorJob:
    """The job of a run's `--slurm N` evaluators, for the endpoint the coordinator bound."""
    host, port = connect_address(endpoint)
    args = evaluator_args(cfg, option_pairs(cfg.task.target_options))
    return EvaluatorJob(tasks=cfg.cluster.slurm, host=host, port=port, secret=run_dir / "secret",
                        curve_key=run_dir / "curve" / "server.key" if cfg.bus.curve else None,
                        target=cfg.task.target, worker_args=args, options=list(cfg.cluster.slurm_option),
                        name=f"autocomp-{run_dir.name}", output=str(run_dir / "logs" / "slurm-%j.out"))


def preflight(cfg, info: TargetInfo) -> None:
    """Before a run creates anything: Slurm's commands are there and slurmctld would take the job as asked."""
    if not cfg.cluster.slurm:
        return
    if not cfg.bus.bind.startswith("tcp://"):
        raise SlurmError(f"Slurm tasks connect over TCP: --bind {cfg.bus.bind} is not tcp://HOST:PORT")
    for tool in ("sbatch", "squeue", "scancel"):
        slurm.require(tool)
    warn_unless_one_per_device(info.evaluators, cfg.cluster.slurm_option)
    job = EvaluatorJob(tasks=cfg.cluster.slurm, host="head", port="1", secret=Path("secret"),
                       options=list(cfg.cluster.slurm_option))
    slurm.check(job.sbatch_args(), job.environment(keyless_env(passed=cfg.local.pass_env), worker_argv()))


def start(cfg, run_dir: Path, endpoint: str, named_keys: set[str]) -> Submitted:
    """Submit the run's evaluators (nothing without --slurm)."""
    if not cfg.cluster.slurm:
        return Submitted()
    job = run_job(cfg, run_dir, endpoint)

    def submit() -> str:
        env = job.environment(keyless_env(named_keys, cfg.local.pass_env), worker_argv())
        job_id = slurm.submit(job.sbatch_args(), env)
        log.info("slurm_submitted", job=job_id, tasks=job.tasks, connect=f"tcp://{job.host}:{job.port}",
                 options=job.options)
        return job_id
    job_id = submit()
    return Submitted(job_id, job.output.replace("%j", job_id), resubmit=submit)
