"""Run options: one name per option in the CLI and TOML, types and ranges checked with one-line errors,
and what a resumed run may change (fast: no processes)."""
from __future__ import annotations

import pytest

from autocomp_zmq.agents.failures import FailureTally, reason_of
from autocomp_zmq.agents.runconfig import ConfigError, RunConfig, max_local_evaluators, resume_config
from autocomp_zmq.agents.outcome import model_verdict
from autocomp_zmq.agents.runstore import RunStore


def test_wrong_types_are_named_errors():
    with pytest.raises(ConfigError, match="beam must be an integer, not 'four'"):
        RunConfig(beam="four")
    with pytest.raises(ConfigError, match="model must be a list of strings"):
        RunConfig(model="heuristic")
    with pytest.raises(ConfigError, match="curve must be true or false"):
        RunConfig(curve="yes")
    with pytest.raises(ConfigError, match="dropout must be a number"):
        RunConfig(dropout="0.3")
    assert RunConfig(dropout=1).dropout == 1.0   # an int where a float is expected is fine


@pytest.mark.parametrize("options, message", [
    ({"evaluators": -1}, "evaluators must be between 0 and"),
    ({"evaluators": 100_000}, "evaluators must be between 0 and"),
    ({"max_evals": 0}, "max_evals must be >= 1"),
    ({"iterations": 0}, "iterations, beam, plans and codes must each be >= 1"),
    ({"dropout": 0.0}, "keep-probability"),
    ({"reasoning_effort": "max"}, "reasoning_effort must be low, medium or high"),
    ({"model": []}, "at least one --model"),
])
def test_out_of_range_values_are_named_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**options)


def test_evaluator_cap_follows_the_cores():
    assert RunConfig(evaluators=max_local_evaluators()).evaluators == max_local_evaluators()


def test_toml_keys_are_the_flag_names(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('model = ["heuristic"]\ncode_model = ["heuristic"]\nout = "runs/x"\nmax_evals = 5\n')
    cfg = RunConfig(**RunConfig.from_toml(path))
    assert cfg.model == ["heuristic"] and cfg.out == "runs/x" and cfg.max_evals == 5
    path.write_text('models = ["heuristic"]\n')
    with pytest.raises(ConfigError, match=r"models \(did you mean model\?\)"):
        RunConfig.from_toml(path)
    path.write_bytes(b"beam = \xff\n")
    with pytest.raises(ConfigError, match="cannot read config"):
        RunConfig.from_toml(path)


SAVED = {**RunConfig(bind="tcp://0.0.0.0:5555", curve=True, evaluators=0, model=["heuristic"]).to_dict()}


def test_resume_restores_security_settings_and_local_processes():
    cfg = resume_config(SAVED, {})
    assert (cfg.bind, cfg.curve, cfg.evaluators, cfg.model) == ("tcp://0.0.0.0:5555", True, 0, ["heuristic"])


def test_resume_refuses_a_conflicting_security_setting():
    with pytest.raises(ConfigError, match="--curve False conflicts"):
        resume_config(SAVED, {"curve": False})
    with pytest.raises(ConfigError, match="--bind tcp://127.0.0.1:6000 conflicts"):
        resume_config(SAVED, {"bind": "tcp://127.0.0.1:6000"})
    assert resume_config(SAVED, {"curve": True}).curve   # the same value is no conflict


def test_resume_extends_budgets_and_refuses_search_changes():
    cfg = resume_config(SAVED, {"iterations": 20, "max_evals": 500, "max_cost": 9.5, "patience": 7, "evaluators": 2})
    assert (cfg.iterations, cfg.max_evals, cfg.max_cost, cfg.patience, cfg.evaluators) == (20, 500, 9.5, 7, 2)
    with pytest.raises(ConfigError, match="--beam cannot change on resume"):
        resume_config(SAVED, {"beam": 9})
    with pytest.raises(ConfigError, match="--model cannot change on resume"):
        resume_config(SAVED, {"model": ["openai:gpt-4o"]})


def test_configs_saved_by_older_runs_resume():
    old = {k: v for k, v in SAVED.items() if k not in ("model", "code_model")}
    old.update(models=["heuristic"], code_models=[])
    assert resume_config(old, {}).model == ["heuristic"]


def test_failure_tally_is_bounded_and_grouped():
    tally = FailureTally()
    for i in range(1000):
        tally.add("code", "m", f"unusable answer number {i}")
    assert len(tally.counts) <= 32 + 1 and sum(tally.counts.values()) == 1000
    assert reason_of("model m failed: APIConnectionError: Connection error.", "m") == \
        "APIConnectionError: Connection error."


def _store_with_jobs(tmp_path, jobs):
    store = RunStore(tmp_path / "run.db")
    for i, (kind, model, ok, error) in enumerate(jobs):
        store.add_job(f"j{i}", kind, 1, {"model": model})
        store.finish_job(f"j{i}", ok, {"x": 1} if ok else None, error, "done" if ok else "failed")
    return store


def test_verdict_is_an_error_when_every_model_call_failed(tmp_path):
    down = "model m failed: APIConnectionError: Connection error. (connection refused)"
    store = _store_with_jobs(tmp_path, [("plan", "m", False, down)] * 4)
    verdict = model_verdict(store, produced=0)
    assert verdict == {"error": "the models produced no candidate: all 4 planning calls to m failed: "
                                "APIConnectionError: Connection error. (connection refused)"}


def test_verdict_warns_when_most_calls_failed_and_ignores_the_cost_cap(tmp_path):
    jobs = [("plan", "m", True, None)] + [("code", "m", False, "unusable answer from m: no code block")] * 3
    assert "3 of 4 model jobs failed" in model_verdict(_store_with_jobs(tmp_path, jobs), produced=1)["warning"]
    capped = [("plan", "m", True, None), ("code", "m", False, "not run: cost cap reached")]
    (tmp_path / "b").mkdir()
    assert model_verdict(_store_with_jobs(tmp_path / "b", capped), produced=1) == {}


def test_model_lease_covers_every_try_of_a_call():
    assert RunConfig(call_timeout_s=100, call_retries=2).model_lease_s == 100 * 3 + 60
    assert RunConfig(llm_lease_s=30).model_lease_s == 30


def test_worker_arguments_use_the_run_option_names():
    from autocomp_zmq.agents.runconfig import WORKER_OPTIONS, as_args
    cfg = RunConfig(temperature=0.5, reasoning_effort="low", call_retries=1, heartbeat_s=0.2)
    args = as_args(cfg, WORKER_OPTIONS)
    assert args == ["--heartbeat-s", "0.2", "--call-timeout-s", "600.0", "--call-retries", "1",
                    "--temperature", "0.5", "--reasoning-effort", "low", "--max-tokens", "32000"]


def test_a_run_store_of_an_older_format_is_not_resumed(tmp_path):
    from autocomp_zmq.agents.run import RunError, execute
    store = RunStore(tmp_path / "run.db")       # format 1: no store_format mark, results with "cycles"
    store.set_meta("config", RunConfig().to_dict())
    store.set_meta("initial_code", "void solution() {}")
    store.close()
    with pytest.raises(RunError, match=r"recorded by an older version \(run store format 1, this version resumes "
                                       r"format 3\); show and report still read it"):
        execute(None, resume=tmp_path, given={})
    assert not (tmp_path / "best.json").exists()
