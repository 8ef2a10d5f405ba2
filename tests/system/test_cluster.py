"""Workers on a cluster, for real: a one-node Slurm cluster on this host (tests/system/slurmkit.py: Debian's munged,
slurmctld and slurmd, started for this module and stopped after it) runs the evaluators of a search as Slurm
tasks, and the run's result equals a local run's; jobs are cancelled when a run or `workers` is interrupted; the
template's task count and port are parameters; a secret made before the run is the one the run uses."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat

import pytest

from tests.system import slurmkit
from tests.system.runkit import (SLOW_GEMM, finish, launch, processes_mentioning, query, summary, wait_for,
                                 write_config)

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def one_node():
    why = slurmkit.missing()
    if why:
        pytest.skip(why)
    started = slurmkit.start()
    yield started
    started.stop()


@pytest.fixture
def cluster(one_node):
    """The module's cluster, with an empty queue after each test: a job one test leaves is its own failure only."""
    yield one_node
    one_node.clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jobs(cluster, state: str | None = None) -> list[str]:
    return [line for line in cluster.queue() if state is None or line.endswith(state)]


def test_a_search_with_slurm_evaluators_equals_a_local_run(cluster, tmp_path):
    cfg = write_config(tmp_path / "cfg.toml")
    local, remote = tmp_path / "local", tmp_path / "slurm"
    out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--out", str(local)))
    assert "Speedup:" in out, out
    out = finish(launch("run", "--target", "gemmini-sim", "--problem", "gemm-256x256x256", "--config", str(cfg),
                        "--slurm", "2", "--out", str(remote), env=cluster.env))
    assert "Speedup:" in out, out + cluster.logs()
    assert _jobs(cluster) == [], "a job was left in the queue"
    a, b = summary(local), summary(remote)
    assert (b["best_latency"], b["best_id"], b["beam"]) == (a["best_latency"], a["best_id"], a["beam"])
    history = "SELECT iteration, rank, candidate_id, latency FROM beams ORDER BY iteration, rank"
    assert query(remote, history) == query(local, history) and len(query(local, history)) > 3
    assert (remote / "best.c").read_text() == (local / "best.c").read_text()
    # every evaluation but the starting kernel's (the coordinator checks it) came from the two Slurm tasks
    assert not list((remote / "logs").glob("evaluator-*.log")), "--slurm started local evaluators"
    evaluators = {agent for (agent,) in query(remote, "SELECT a.agent FROM attempts a JOIN jobs j ON j.id = "
                                                      "a.job_id WHERE j.kind = 'eval'")}
    assert 1 <= len(evaluators) <= 2 and b["evaluations"] > 1, evaluators
    assert len(list((remote / "logs").glob("slurm-*.out"))) == 1     # the tasks' output, in the run's logs


def _late_sbatch(tmp_path) -> tuple[dict, Path]:
    """PATH with an sbatch that, once it has queued a job, says its id only when `release` exists (a controller
    slow to answer; `--test-only` answers at once): the environment for it, and the release file."""
    release, bin_dir = tmp_path / "release", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nout=$({shutil.which("sbatch")} "$@"); rc=$?\ncase " $* " in *" --test-only "*) ;; *)\n'
        f'  while [ ! -e {release} ]; do sleep 0.1; done ;;\nesac\nprintf "%s\\n" "$out"; exit $rc\n')
    (bin_dir / "sbatch").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, release


@pytest.mark.parametrize("stage", ["submitting", "pending", "running"])
def test_an_interrupted_run_cancels_its_job(cluster, tmp_path, stage):
    run, env, release = tmp_path / "run", dict(cluster.env), None
    if stage == "submitting":  # interrupted while sbatch has queued the job but not yet said its id
        late, release = _late_sbatch(tmp_path)
        env.update(late)
        extra = ["--slurm-option=--begin=now+3600"]
    elif stage == "pending":   # a job Slurm holds back (as on a cluster too small for it) is cancelled as well
        extra = ["--slurm-option=--begin=now+3600"]
    else:                      # a starting kernel that keeps a Slurm task busy for seconds: interrupted mid-job
        (tmp_path / "slow.c").write_text(SLOW_GEMM)
        extra = ["--kernel", str(tmp_path / "slow.c"), "--no-check-start"]
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1)
    proc = launch("run", "--config", str(cfg), "--slurm", "2", "--out", str(run), *extra, env=env)
    if stage in ("submitting", "pending"):
        wait_for(lambda: _jobs(cluster, "PENDING"), timeout=60, what="the pending job")
    else:
        wait_for(lambda: query(run, "SELECT 1 FROM attempts a JOIN jobs j ON j.id = a.job_id "
                                    "WHERE j.kind = 'eval' AND a.finished IS NULL"),
                 timeout=90, what="a Slurm task evaluating the slow kernel")
    proc.send_signal(signal.SIGINT)
    if release:
        release.touch()
    out = finish(proc, timeout=120)
    assert _jobs(cluster) == [], f"{cluster.queue()}\n{out}"
    wait_for(lambda: not processes_mentioning(str(run / "secret")), timeout=30, what="the Slurm tasks to exit")


def test_secret_made_before_the_run_lets_slurm_workers_start_first(cluster, tmp_path):
    """The order a cluster needs: keys first, then `workers` (submitted before the coordinator exists), then the run,
    on a fixed port; `workers` stays until its job ends with the run."""
    run, port = tmp_path / "run", _free_port()
    out = finish(launch("secret", str(run)), timeout=60)
    assert stat.S_IMODE((run / "secret").stat().st_mode) == 0o600, out
    assert stat.S_IMODE((run / "curve" / "server.key_secret").stat().st_mode) == 0o600
    secret, key = (run / "secret").read_text(), (run / "curve" / "server.key").read_text()
    workers = launch("workers", "--slurm", "2", "--connect", f"tcp://127.0.0.1:{port}", "--secret-file",
                     str(run / "secret"), "--curve-server-key", str(run / "curve" / "server.key"), "--heartbeat-s",
                     "0.1", f"--slurm-option=--output={tmp_path}/slurm-%j.out", env=cluster.env)
    wait_for(lambda: _jobs(cluster, "RUNNING"), timeout=60, what="the workers' job to run")
    cfg = write_config(tmp_path / "cfg.toml", iterations=2)
    out = finish(launch("run", "--config", str(cfg), "--out", str(run), "--curve", "--bind",
                        f"tcp://127.0.0.1:{port}", "--evaluators", "0"))
    assert "Speedup:" in out, out
    said = finish(workers, timeout=60)
    assert workers.returncode == 0 and "ended" in said, said
    assert _jobs(cluster) == []
    assert (run / "secret").read_text() == secret and (run / "curve" / "server.key").read_text() == key
    assert query(run, "SELECT COUNT(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.kind = 'eval'")[0][0]


@pytest.mark.parametrize("stage", ["submitting", "running"])
def test_stopping_workers_cancels_their_job(cluster, tmp_path, stage):
    (tmp_path / "secret").write_text(os.urandom(32).hex() + "\n")
    (tmp_path / "secret").chmod(0o600)
    env, release = (_late_sbatch(tmp_path) if stage == "submitting" else ({}, None))
    workers = launch("workers", "--slurm", "1", "--connect", f"tcp://127.0.0.1:{_free_port()}", "--secret-file",
                     str(tmp_path / "secret"), f"--slurm-option=--output={tmp_path}/slurm-%j.out",
                     env={**cluster.env, **env})     # nobody there: the tasks retry until cancelled
    wait_for(lambda: _jobs(cluster, "RUNNING"), timeout=60, what="the workers' job to run")
    workers.send_signal(signal.SIGINT)
    if release:           # interrupted while sbatch had queued the job but not yet said its id
        release.touch()
    said = finish(workers, timeout=90)
    assert workers.returncode == 130 and "Cancelled Slurm job" in said, said
    assert _jobs(cluster) == []


def test_the_template_takes_its_task_count_and_port(cluster, tmp_path):
    """cluster/evaluators.sbatch submitted by hand, as the README shows, with a stand-in for Python that records
    the arguments each task was started with."""
    from autocomp_zmq.cluster.slurm import TEMPLATE
    fake = tmp_path / "python"
    fake.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$RECORD/task-$SLURM_PROCID"\n')
    fake.chmod(0o755)
    env = {**cluster.env, "HEAD": "headnode", "PORT": "6123", "SECRET": "/shared/run/secret",
           "WORKER_ARGS": '--target-option\nplatform="trn2 beta"', "AUTOCOMP_PYTHON": str(fake),
           "RECORD": str(tmp_path)}
    job = cluster.run("env", *[f"{k}={v}" for k, v in env.items()], "sbatch", "--parsable", "--ntasks=2",
                      f"--output={tmp_path}/job.out", str(TEMPLATE))
    assert job.returncode == 0, job.stderr
    wait_for(lambda: not _jobs(cluster), timeout=60, what="the job to end")
    tasks = sorted(tmp_path.glob("task-*"))
    assert [t.name for t in tasks] == ["task-0", "task-1"], (tmp_path / "job.out").read_text()
    args = tasks[0].read_text().splitlines()
    assert args[:5] == ["-m", "autocomp_zmq.launch", "worker", "--role", "evaluator"]
    assert args[args.index("--connect") + 1] == "tcp://headnode:6123"
    assert args[-2:] == ["--target-option", 'platform="trn2 beta"'] and "--curve-server-key" not in args


def test_slurm_refusals_are_one_line_and_leave_nothing(cluster, tmp_path):
    run = tmp_path / "run"
    proc = launch("run", "--slurm", "2", "--slurm-option=--partition=nope", "-T", "1", "--out", str(run),
                  env=cluster.env)
    out = finish(proc)
    assert proc.returncode == 2 and out.strip().endswith("error: Slurm would not take the evaluators' job: "
                                                         "invalid partition specified: nope"), out
    assert not run.exists()


def test_slurm_without_sbatch_says_so(tmp_path):
    run = tmp_path / "run"
    proc = launch("run", "--slurm", "2", "-T", "1", "--out", str(run), env={"PATH": str(tmp_path)})
    out = finish(proc)
    assert proc.returncode == 2 and "error: --slurm needs Slurm's sbatch on PATH, and there is none" in out, out
    assert not run.exists()
    proc = launch("workers", "--slurm", "2", "--connect", "tcp://head:5555", "--secret-file", str(tmp_path / "s"),
                  env={"PATH": str(tmp_path)})
    assert "error: cannot read the run secret" in finish(proc) and proc.returncode == 2


def test_secret_made_before_the_run_is_the_runs(tmp_path):
    """Without Slurm (workers started by hand, e.g. over ssh): a worker started before the coordinator, with the
    secret and CurveZMQ key made by `secret RUN_DIR`, serves the run that `run --out RUN_DIR --curve` starts."""
    run, port = tmp_path / "run", _free_port()
    finish(launch("secret", str(run)), timeout=60)
    worker = launch("worker", "--role", "evaluator", "--connect", f"tcp://127.0.0.1:{port}", "--secret-file",
                    str(run / "secret"), "--curve-server-key", str(run / "curve" / "server.key"))
    cfg = write_config(tmp_path / "cfg.toml", iterations=1)
    out = finish(launch("run", "--config", str(cfg), "--out", str(run), "--curve", "--bind",
                        f"tcp://127.0.0.1:{port}", "--evaluators", "0"))
    assert "Speedup:" in out, out
    assert finish(worker, timeout=30) is not None and worker.returncode == 0
    agents = {a for (a,) in query(run, "SELECT a.agent FROM attempts a JOIN jobs j ON j.id = a.job_id "
                                       "WHERE j.kind = 'eval'")}
    assert agents and all(a.endswith(f":{worker.pid}") for a in agents), agents
    assert json.loads((run / "config.json").read_text())["bus"]["curve"] is True


@pytest.mark.parametrize("fault", ["scancel", "node down"])
def test_a_job_cancelled_mid_run_is_submitted_again_and_the_run_finishes(cluster, tmp_path, fault):
    """Before, `scancel` of the run's job mid-run was warned about once and the run waited for evaluators forever;
    a node set down had Slurm requeue the job, which then waited 2 minutes (CredExpire) before starting again."""
    (tmp_path / "slow.c").write_text(SLOW_GEMM)         # keeps the Slurm task busy for seconds: cancelled mid-job
    cfg = write_config(tmp_path / "cfg.toml", iterations=1, beam=1, plans=1, codes=1)
    run = tmp_path / "run"
    proc = launch("run", "--config", str(cfg), "--slurm", "1", "--kernel", str(tmp_path / "slow.c"),
                  "--no-check-start", "--out", str(run), env=cluster.env)
    wait_for(lambda: query(run, "SELECT 1 FROM attempts a JOIN jobs j ON j.id = a.job_id "
                                "WHERE j.kind = 'eval' AND a.finished IS NULL"),
             timeout=90, what="a Slurm task evaluating the slow kernel")
    [first] = [line.split()[0] for line in cluster.queue()]
    if fault == "scancel":
        cluster.run("scancel", first)
    else:       # its tasks are killed and the job ends NODE_FAIL (the node returns: ReturnToService=2, or resume)
        node = socket.gethostname()
        assert cluster.run("scontrol", "update", f"nodename={node}", "state=down", "reason=test").returncode == 0
        wait_for(lambda: first not in " ".join(cluster.queue()), timeout=60, what=f"job {first} to leave the queue")
        cluster.run("scontrol", "update", f"nodename={node}", "state=resume")
    out = finish(proc, timeout=240)
    assert proc.returncode == 0, out + cluster.logs()
    assert f"job={first}" in out and "submitted again as job" in out, out
    assert summary(run)["evaluations"] >= 1 and _jobs(cluster) == []
