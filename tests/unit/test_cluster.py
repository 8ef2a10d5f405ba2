"""Slurm evaluators without a cluster (fast: no processes): the --slurm options in the option model, what a job is
submitted with (the template's task count and port are parameters, no secret in its environment), the keys made
before a run, and what the run says about a job that does not start. tests/system/test_cluster.py submits real
jobs."""
from __future__ import annotations

import re
import socket
import stat
import subprocess
import threading

import pytest
import structlog

from autocomp_zmq.agents.run.runconfig import ConfigError, RunConfig, resume_config
from autocomp_zmq.cluster import evaluators, slurm
from autocomp_zmq.agents.cli.cluster import make_keys
from autocomp_zmq.agents.run import slurm_evaluators
from autocomp_zmq.agents.run.slurm_evaluators import run_job
from autocomp_zmq.cluster.evaluators import EvaluatorJob, Submitted, connect_address
from autocomp_zmq.cluster.slurm import SlurmError
from autocomp_zmq.hw_runners.base import target_info


def test_slurm_options_are_declared_once_in_the_cluster_section():
    cfg = RunConfig.of(slurm=4, slurm_option=["--partition=trn", "--time=1:00:00"])
    assert (cfg.cluster.slurm, cfg.cluster.slurm_option) == (4, ["--partition=trn", "--time=1:00:00"])
    assert cfg.flat()["slurm"] == 4 and RunConfig.of().cluster.slurm is None
    with pytest.raises(ConfigError, match="slurm must be an integer >= 1, not 0"):
        RunConfig.of(slurm=0)
    # a resumed run may submit another number of evaluators elsewhere: the search does not change
    assert resume_config(cfg.to_dict(), {"slurm": 8}).cluster.slurm == 8


def test_the_template_leaves_size_port_and_time_to_its_parameters():
    text = slurm.TEMPLATE.read_text()
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert not [d for d in directives if re.search(r"--(nodes|ntasks-per-node|time|partition)\b", d)], directives
    assert "5555" not in "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert '"tcp://${HEAD}:${PORT}"' in text and '--secret-file "${SECRET}"' in text


def test_a_job_is_submitted_with_its_task_count_and_endpoint_and_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("MY_PROVIDER_KEY", "named-by-a-spec")
    cfg = RunConfig.of(slurm=3, slurm_option=["--partition=trn", "--ntasks=5"], heartbeat_s=0.5, curve=True,
                       max_refused=2, unreachable_s=30)
    cfg.task.target_options = {"platform": "trn2 beta"}
    make_keys(tmp_path, curve=True)
    job = run_job(cfg, tmp_path, "tcp://0.0.0.0:5601")
    args = job.sbatch_args()
    assert args[0] == "--ntasks=3" and args[-1] == str(slurm.TEMPLATE)
    # the user's options come after ours: sbatch takes the last, so --slurm-option=--ntasks=5 wins
    assert args.index("--ntasks=5") > args.index("--ntasks=3") and "--partition=trn" in args
    assert "--no-requeue" in args      # a failed node's job comes back through the run's resubmission, not in 2 min
    assert f"--output={tmp_path}/logs/slurm-%j.out" in args and f"--job-name=autocomp-{tmp_path.name}" in args
    from autocomp_zmq.agents.run.localagents import keyless_env, worker_argv
    env = job.environment(keyless_env({"MY_PROVIDER_KEY"}), worker_argv())
    assert (env["HEAD"], env["PORT"]) == (socket.gethostname(), "5601")    # the wildcard as this host's name
    assert env["SECRET"] == str(tmp_path / "secret") and env["CURVE_KEY"] == str(tmp_path / "curve" / "server.key")
    # the tasks take the run's heartbeat and when to give up
    assert env["WORKER_ARGS"].split("\n") == ["--heartbeat-s", "0.5", "--max-refused", "2",
                                              "--unreachable-s", "30.0", "--target-option", 'platform="trn2 beta"']
    assert "OPENAI_API_KEY" not in env and "MY_PROVIDER_KEY" not in env
    secret = (tmp_path / "secret").read_text().strip()
    assert not [k for k, v in env.items() if secret in v] and not [a for a in args if secret in a]


def test_agents_without_model_keys_get_an_allowlisted_environment(monkeypatch):
    """Before, only names ending in _API_KEY, _TOKEN or _SECRET were dropped: AWS_SECRET_ACCESS_KEY and
    MY_DB_PASSWORD reached the evaluators and the Slurm tasks."""
    from autocomp_zmq.agents.run.localagents import keyless_env
    for name, value in {"AWS_SECRET_ACCESS_KEY": "a", "MY_DB_PASSWORD": "b", "OPENAI_API_KEY": "c", "HF_TOKEN": "d",
                        "RANDOM_SETTING": "e", "SLURM_CONF": "/etc/slurm.conf", "CUDA_VISIBLE_DEVICES": "0",
                        "AUTOCOMP_LOG_LEVEL": "INFO", "NEURON_RT_API_KEY": "f", "LICENSE_SERVER": "g",
                        "LC_ALL": "C.UTF-8", "PATH": "/usr/bin"}.items():
        monkeypatch.setenv(name, value)
    env = keyless_env()
    assert {"PATH", "SLURM_CONF", "CUDA_VISIBLE_DEVICES", "AUTOCOMP_LOG_LEVEL", "LC_ALL"} <= set(env)
    assert not {"AWS_SECRET_ACCESS_KEY", "MY_DB_PASSWORD", "OPENAI_API_KEY", "HF_TOKEN", "RANDOM_SETTING",
                "NEURON_RT_API_KEY", "LICENSE_SERVER"} & set(env)
    assert keyless_env(passed=["LICENSE_SERVER"])["LICENSE_SERVER"] == "g"           # --pass-env
    assert "CUDA_VISIBLE_DEVICES" not in keyless_env({"CUDA_VISIBLE_DEVICES"})     # a model spec's key: never
    cfg = RunConfig.of(pass_env=["LICENSE_SERVER"])
    assert cfg.local.pass_env == ["LICENSE_SERVER"] and resume_config(cfg.to_dict(), {}).local.pass_env == ["LICENSE_SERVER"]


def test_endpoints_the_tasks_cannot_use_are_refused():
    assert connect_address("tcp://head.example:7000") == ("head.example", "7000")
    with pytest.raises(SlurmError, match="not tcp://HOST:PORT"):
        connect_address("ipc:///tmp/coordinator")
    with pytest.raises(SlurmError, match="--connect tcp://head is not tcp://HOST:PORT"):
        connect_address("tcp://head", "--connect")


def test_keys_made_before_a_run_are_private_and_never_remade(tmp_path):
    run_dir = tmp_path / "runs" / "big"
    made = dict(make_keys(run_dir, curve=True))
    assert made["secret"] == run_dir / "secret"
    for private in (run_dir / "secret", run_dir / "curve" / "server.key_secret"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    assert (run_dir / "curve" / "server.key").exists()
    before = (run_dir / "secret").read_bytes()
    with pytest.raises(ValueError, match="exists .workers may already hold it."):
        make_keys(run_dir, curve=True)
    assert (run_dir / "secret").read_bytes() == before
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "run.db").write_text("")
    with pytest.raises(ValueError, match="already holds a run"):
        make_keys(tmp_path / "done", curve=False)


def test_a_job_that_does_not_start_or_leaves_early_is_said_on_the_terminal(monkeypatch):
    states = iter([("PENDING", "Resources"), ("PENDING", "Resources"), ("RUNNING", "None"), None])
    monkeypatch.setattr(slurm, "state", lambda job_id: next(states))
    watched = Submitted()
    watched.job_id, watched.output = "41", "runs/x/logs/slurm-41.out"
    with structlog.testing.capture_logs() as logs:
        watched._watch_queue(every_s=0.001, pending_warn_s=0.0, gone_grace_s=0.0)
    events = [(e["event"], e.get("reason")) for e in logs]
    assert events == [("slurm_job_pending", "Resources"), ("slurm_job_gone", None)]
    assert "runs/x/logs/slurm-41.out" in logs[-1]["note"] and "left the queue" in watched.failed
    # a job that leaves the queue because the run ended (end() follows within seconds) is not reported
    ended = Submitted()
    ended.job_id = "42"
    monkeypatch.setattr(slurm, "state", lambda job_id: None)
    threading.Timer(0.05, ended._stop.set).start()
    with structlog.testing.capture_logs() as logs:
        ended._watch_queue(every_s=0.001, gone_grace_s=5.0)
    assert logs == []


def test_a_job_cancelled_mid_run_is_submitted_again_then_the_run_is_told_to_stop(monkeypatch):
    """Before, a job scancelled mid-run was warned about once and the run waited for evaluators forever."""
    queue = {"41": iter([("RUNNING", "None"), None]), "51": iter([None]), "52": iter([None])}
    monkeypatch.setattr(slurm, "state", lambda job_id: next(queue[job_id]))
    new_ids = iter(["51", "52"])
    watched = Submitted(resubmit=lambda: next(new_ids), max_resubmits=2)
    watched.job_id, watched.output = "41", "runs/x/logs/slurm-41.out"
    with structlog.testing.capture_logs() as logs:
        watched._watch_queue(every_s=0.001, gone_grace_s=0.0)
    assert [(e["event"], e["log_level"], e.get("resubmitted_as")) for e in logs] == [
        ("slurm_job_gone", "warning", "51"), ("slurm_job_gone", "warning", "52"), ("slurm_job_gone", "error", None)]
    assert "runs/x/logs/slurm-41.out" in logs[0]["note"] and watched.output == "runs/x/logs/slurm-52.out"
    assert watched.failed.startswith("the evaluators' Slurm job 52 left the queue before the run ended")


def test_sbatch_errors_are_one_line_in_slurms_words():
    proc = subprocess.CompletedProcess([], 1, "", "sbatch: error: invalid partition specified: trn\n"
                                                 "sbatch: error: Batch job submission failed: Invalid partition\n")
    assert slurm._why(proc) == "invalid partition specified: trn"
    proc.stderr = ("sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
                   "sbatch: fatal: Could not establish a configuration source\n")
    assert slurm._why(proc) == "Could not establish a configuration source"


def test_without_slurm_nothing_is_submitted_or_checked():
    cfg = RunConfig.of()
    slurm_evaluators.preflight(cfg, target_info(cfg.task.target))    # no sbatch needed
    assert slurm_evaluators.start(cfg, None, "tcp://127.0.0.1:1", set()).job_id is None


def test_a_device_targets_job_without_a_per_node_limit_is_warned_about():
    with structlog.testing.capture_logs() as logs:
        evaluators.warn_unless_one_per_device("devices", ["--partition=trn"])
        evaluators.warn_unless_one_per_device("devices", ["--ntasks-per-node=32"])
        evaluators.warn_unless_one_per_device("devices", ["--gpus-per-task 1"])
        evaluators.warn_unless_one_per_device("cores", [])
    assert [e["event"] for e in logs] == ["slurm_devices_per_node"]
