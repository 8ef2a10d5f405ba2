"""Run options: one name per option in the CLI and TOML, types and ranges checked with one-line errors,
and what a resumed run may change (fast: no processes)."""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.agents.engine.failures import FailureTally, reason_of
from autocomp_zmq.agents.run.runconfig import (OPTIONS, ConfigError, RunConfig, build, flat_view, from_toml,
                                               max_local_evaluators, merge, resume_config, sectioned)
from autocomp_zmq.agents.run.outcome import model_verdict
from autocomp_zmq.agents.store import RunStore


def test_wrong_types_are_named_errors():
    with pytest.raises(ConfigError, match="beam must be an integer, not 'four'"):
        RunConfig.of(beam="four")
    with pytest.raises(ConfigError, match="model must be a list of strings"):
        RunConfig.of(model="heuristic")
    with pytest.raises(ConfigError, match="curve must be true or false"):
        RunConfig.of(curve="yes")
    with pytest.raises(ConfigError, match="dropout must be a number"):
        RunConfig.of(dropout="0.3")
    assert RunConfig.of(call_timeout_s=5).models.call_timeout_s == 5.0   # an int where a float is expected is fine


@pytest.mark.parametrize("options, message", [
    ({"evaluators": -1}, "evaluators must be an integer >= 0, not -1"),
    ({"evaluators": 100_000}, "evaluators must be between 0 and"),
    ({"max_evals": 0}, "max_evals must be an integer >= 1, not 0"),
    ({"iterations": 0}, "iterations must be an integer >= 1, not 0"),
    ({"beam": 0}, "beam must be an integer >= 1, not 0"),
    ({"dropout": 1.0}, "dropout must be a number < 1"),
    ({"dropout": -0.1}, "dropout must be a number >= 0"),
    ({"planners": 65}, "planners must be an integer <= 64"),
    ({"temperature": 3}, "temperature must be a number <= 2"),
    ({"heartbeat_s": 0}, "heartbeat_s must be a number > 0"),
    ({"max_tokens": 100}, "max_tokens must be an integer >= 1024"),
    ({"reasoning_effort": "max"}, "reasoning_effort must be 'low' or 'medium' or 'high', not 'max'"),
    ({"model_allocation": "greedy"}, "model_allocation must be 'even' or 'bandit', not 'greedy'"),
    ({"model": []}, "at least one --model"),
    ({"search": "nope"}, "--search: unknown search policy 'nope'; available: beam"),
    ({"bogus": 1}, "--bogus: not an option of the search policy beam"),
])
def test_out_of_range_values_are_named_errors(options, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        RunConfig.of(**options)


def test_evaluator_cap_follows_the_cores():
    assert RunConfig.of(evaluators=max_local_evaluators()).local.evaluators == max_local_evaluators()


def test_options_land_in_their_sections_and_the_policy_section_gets_its_defaults():
    cfg = RunConfig.of(beam=2, max_cost=1.5, bind="tcp://0.0.0.0:5555", search="beam")
    assert (cfg.budget.max_cost, cfg.bus.bind, cfg.search.policy) == (1.5, "tcp://0.0.0.0:5555", "beam")
    assert cfg.search.options == {"beam": 2, "plans": 4, "codes": 2, "dropout": 0.7, "one_phase": False,
                                  "translate_iters": 0, "translate_slack": 15.0, "propose_options": 0,
                                  "code_edits": False, "stage_barriers": False}
    assert cfg.flat()["beam"] == 2 and cfg.flat()["max_cost"] == 1.5
    assert build(cfg.to_dict()) == cfg            # what a run stores reads back unchanged


def test_toml_takes_sections_or_the_flag_names(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('model = ["heuristic"]\ncode_model = ["heuristic"]\nout = "runs/x"\nmax_evals = 5\n')
    cfg = build(from_toml(path))
    assert cfg.models.model == ["heuristic"] and cfg.task.out == "runs/x" and cfg.budget.max_evals == 5
    path.write_text('[budget]\nmax_evals = 7\n[search]\npolicy = "beam"\n[search.options]\nbeam = 3\n'
                    '[local]\nevaluators = 0\n')
    cfg = build(from_toml(path))
    assert (cfg.budget.max_evals, cfg.search.options["beam"], cfg.local.evaluators) == (7, 3, 0)
    path.write_text('[budget]\nmax_evlas = 7\n')
    with pytest.raises(ConfigError, match=re.escape("unknown option 'max_evlas' in [budget]")):
        build(from_toml(path))
    path.write_text('models = ["heuristic"]\n')
    with pytest.raises(ConfigError, match=r"models \(did you mean model\?\)"):
        from_toml(path)
    path.write_bytes(b"beam = \xff\n")
    with pytest.raises(ConfigError, match="cannot read config"):
        from_toml(path)


def test_command_line_options_override_the_file_option_by_option(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[search.options]\nbeam = 3\nplans = 2\n[budget]\niterations = 5\n')
    cfg = build(merge(from_toml(path), sectioned({"plans": 6, "iterations": 2})))
    assert (cfg.search.options["beam"], cfg.search.options["plans"], cfg.budget.iterations) == (3, 6, 2)


def test_every_option_declares_a_resume_rule_and_help():
    for name, (section, decl) in OPTIONS.items():
        assert decl["resume"] in ("fixed", "extend", "local", "security"), name
        assert decl["help"], name
    extend = sorted(n for n, (_, d) in OPTIONS.items() if d["resume"] == "extend")
    assert extend == ["iterations", "max_cost", "max_evals", "patience"]


SAVED = RunConfig.of(bind="tcp://0.0.0.0:5555", curve=True, evaluators=0, model=["heuristic"]).to_dict()


def test_resume_restores_security_settings_and_local_processes():
    cfg = resume_config(SAVED, {})
    assert (cfg.bus.bind, cfg.bus.curve, cfg.local.evaluators, cfg.models.model) == \
        ("tcp://0.0.0.0:5555", True, 0, ["heuristic"])


def test_resume_refuses_a_conflicting_security_setting():
    with pytest.raises(ConfigError, match="--curve False conflicts"):
        resume_config(SAVED, {"curve": False})
    with pytest.raises(ConfigError, match="--bind tcp://127.0.0.1:6000 conflicts"):
        resume_config(SAVED, {"bind": "tcp://127.0.0.1:6000"})
    assert resume_config(SAVED, {"curve": True}).bus.curve   # the same value is no conflict


def test_resume_may_extend_the_budget_but_not_change_the_search():
    cfg = resume_config(SAVED, {"iterations": 20, "max_evals": 500, "max_cost": 9.5, "patience": 7, "evaluators": 2})
    assert (cfg.budget.iterations, cfg.budget.max_evals, cfg.local.evaluators) == (20, 500, 2)
    with pytest.raises(ConfigError, match="--beam cannot change on resume"):
        resume_config(SAVED, {"beam": 9})
    with pytest.raises(ConfigError, match="--dropout cannot change on resume"):
        resume_config(SAVED, {"dropout": 0.5})
    with pytest.raises(ConfigError, match="--search cannot change on resume"):
        resume_config(SAVED, {"policy": "greedy"})
    with pytest.raises(ConfigError, match="--model cannot change on resume"):
        resume_config(SAVED, {"model": ["openai:gpt-4o"]})
    assert resume_config(SAVED, {"beam": 4}).search.options["beam"] == 4   # the same value is no change


def test_configs_saved_by_older_runs_resume():
    """Flat names, `models` for `model`, and `dropout` as the probability of keeping an option (0.3 = drop 0.7)."""
    old = {"target": "gemmini-sim", "problem": "gemm-512x512x512", "models": ["heuristic"], "code_models": [],
           "beam": 2, "dropout": 0.3, "search": "beam", "bind": "tcp://0.0.0.0:5555", "iterations": 3}
    cfg = resume_config(old, {"iterations": 5})
    assert cfg.models.model == ["heuristic"] and cfg.search.options["dropout"] == 0.7
    assert (cfg.search.options["beam"], cfg.bus.bind, cfg.budget.iterations) == (2, "tcp://0.0.0.0:5555", 5)
    assert flat_view(old)["model"] == ["heuristic"] and flat_view(cfg.to_dict())["beam"] == 2


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
    # a job's two calls (a cut-off answer is asked again), each tried 3 times, with the longest wait between tries
    assert RunConfig.of(call_timeout_s=100, call_retries=2).model_lease_s == 2 * (3 * 100 + 2 * 60) + 60
    assert RunConfig.of(llm_lease_s=30).model_lease_s == 30


def test_worker_arguments_use_the_run_option_names():
    from autocomp_zmq.agents.run.runflags import WORKER_OPTIONS, as_args
    cfg = RunConfig.of(temperature=0.5, reasoning_effort="low", call_retries=1, heartbeat_s=0.2)
    args = as_args(cfg, WORKER_OPTIONS)
    assert args == ["--heartbeat-s", "0.2", "--max-refused", "5", "--unreachable-s", "600.0",
                    "--call-timeout-s", "600.0", "--call-retries", "1", "--temperature", "0.5",
                    "--reasoning-effort", "low", "--max-tokens", "32000", "--llm-concurrency", "64",
                    "--openai-api", "responses", "--no-long-cache", "--service-tier", "default"]


def test_a_run_store_of_an_older_format_is_not_resumed(tmp_path):
    from autocomp_zmq.agents.run.execute import RunError, execute
    store = RunStore(tmp_path / "run.db")       # format 1: no store_format mark, results with "cycles"
    store.set_meta("config", RunConfig().to_dict())
    store.set_meta("initial_code", "void solution() {}")
    store.close()
    with pytest.raises(RunError, match=r"recorded by an older version \(run store format 1, this version resumes "
                                       r"format 3\); show and report still read it"):
        execute(None, resume=tmp_path, given={})
    assert not (tmp_path / "best.json").exists()


def test_search_option_pairs_read_their_values_as_toml():
    from autocomp_zmq.agents.run.runflags import option_values
    assert option_values(["menu_size=3", "ratio=0.5", "strict=true", "label=greedy", 'name="x y"']) == \
        {"menu_size": 3, "ratio": 0.5, "strict": True, "label": "greedy", "name": "x y"}
    for bad in ("menu_size", "=3", "limits.=3"):
        with pytest.raises(ConfigError, match="write NAME=VALUE"):
            option_values([bad])
    assert option_values(["limits.wall_s=60", "limits.drop_root=false", "lnc=2"], "--target-option") == \
        {"limits": {"wall_s": 60, "drop_root": False}, "lnc": 2}
    with pytest.raises(ConfigError, match="--target-option 'lnc.x=1': lnc is set to a value and to fields"):
        option_values(["lnc=2", "lnc.x=1"], "--target-option")


def test_target_options_come_from_the_file_and_the_flags_and_reach_every_evaluator(tmp_path):
    """Target options (trainium's platform, lnc, ...) had no way in from `run`: only `eval` could set them."""
    from pathlib import Path

    from autocomp_zmq.agents.run.localagents import agent_command
    from autocomp_zmq.agents.run.runflags import option_values
    path = tmp_path / "c.toml"
    path.write_text('[task]\ntarget = "trainium"\n[task.target_options]\nplatform = "trn2"\nlnc = 1\n')
    cfg = build(merge(from_toml(path), {"task": {"target_options": option_values(["lnc=2", "limits.wall_s=900"])}}))
    assert cfg.task.target_options == {"platform": "trn2", "lnc": 2, "limits": {"wall_s": 900}}
    cmd = agent_command("evaluator", "tcp://127.0.0.1:1", Path("/run"), cfg, 1)
    pairs = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--target-option"]
    assert pairs == ['platform="trn2"', "lnc=2", "limits.wall_s=900"]
    assert option_values(pairs, "--target-option") == cfg.task.target_options       # read back as written
    assert "--target-option" not in agent_command("planner", "tcp://127.0.0.1:1", Path("/run"), cfg, 1, "heuristic")
    saved = cfg.to_dict()
    assert resume_config(saved, {}).task.target_options == cfg.task.target_options   # a resumed run keeps them
    assert flat_view(saved)["target_options"] == cfg.task.target_options
    with pytest.raises(ConfigError, match="--target-option cannot change on resume"):
        resume_config(saved, {"target_options": {"platform": "trn3"}})
