"""Adding a target takes new files only: tests/tiny_target registers itself through the
`autocomp_zmq.targets` entry point group (a dist-info written here, as `pip install` of a plug-in
would), brings its own descriptor, prompts, menu, problems and offline heuristic, and runs a search
end to end with the unchanged product: coordinator, heuristic agents and evaluators in their own
processes. A plug-in agent implementation registers the same way (`autocomp_zmq.agents`)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.system.runkit import ROOT, query
from tests.system.runkit import plugin_env as install_plugin

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


@pytest.fixture
def plugin_env(tmp_path):
    """An environment in which the tiny plug-in is installed."""
    agent = "tests.tiny_target.agent:TinyAgent"
    return install_plugin(tmp_path, "tiny_target_plugin", "[autocomp_zmq.targets]\ntiny = tests.tiny_target:TinyTarget\n\n"
                          f"[autocomp_zmq.agents]\nplanner.tiny = {agent}\ncoder.tiny = {agent}\n"
                          f"repairer.tiny = {agent}\n")


def _launch(env, *args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "launch.py"), *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=240)


def test_a_plugin_target_runs_a_search_without_product_changes(plugin_env, tmp_path):
    listed = _launch(plugin_env, "targets", "--json")
    tiny = next(json.loads(line) for line in listed.stdout.splitlines() if '"tiny"' in line)
    assert tiny["latency_unit"] == "us" and tiny["heuristic"] == "tests.tiny_target.heuristic:TinyHeuristic"
    assert "sum-4096" in _launch(plugin_env, "problems", "--target", "tiny").stdout

    run_dir = tmp_path / "run"
    proc = _launch(plugin_env, "run", "--target", "tiny", "--problem", "sum-4096", "--out", str(run_dir),
                   "-T", "6", "-B", "2", "-N", "3", "-K", "1", "--dropout", "0", "--evaluators", "2",
                   "--patience", "6", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    best = json.loads((run_dir / "best.json").read_text())
    assert best["target"] == "tiny" and best["latency_unit"] == "us"
    # start: tile 1, no unroll, scalar (57.844 us); the best schedule (64, 8, vectorized) is 1.812 us
    assert best["baseline_latency"] == pytest.approx(57.844) and best["speedup"] > 10, best
    assert f"Speedup: {best['speedup']:.2f}x" in proc.stdout
    assert "us vs 57.84 us for the starting kernel" in proc.stdout
    assert "solution(tile=" in (run_dir / "best.txt").read_text()
    # every candidate was judged by the plug-in's evaluator, in evaluator processes of the product
    assert best["evaluations"] > 5 and query(run_dir, "SELECT COUNT(*) FROM evals")[0][0] >= best["evaluations"]
    options = {row[0] for row in query(run_dir, "SELECT option_id FROM plans")}
    assert options <= {"bigger-tiles", "unroll", "vectorize"} and len(options) >= 2


def test_run_starts_a_plugin_agent_implementation_named_as_the_model(plugin_env, tmp_path):
    run_dir = tmp_path / "run"
    proc = _launch(plugin_env, "run", "--target", "tiny", "--problem", "sum-4096", "--model", "tiny", "--out",
                   str(run_dir), "-T", "4", "-B", "1", "-N", "2", "-K", "1", "--evaluators", "1", "--no-live",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((run_dir / "best.json").read_text())["speedup"] > 1.5
    # every plan and code job was addressed to the model "tiny" and answered by the plug-in agent's processes,
    # which the run started (the built-in heuristic would answer as "heuristic")
    served = set(query(run_dir, "SELECT kind, json_extract(payload, '$.model'), json_extract(result, '$.model') "
                                "FROM jobs WHERE kind != 'eval' AND ok = 1"))
    assert {"plan", "code"} <= {kind for kind, _, _ in served}
    assert {(asked, answered) for _, asked, answered in served} == {("tiny", "tiny")}
    # a name no role implements is refused before anything starts
    refused = _launch(plugin_env, "run", "--target", "tiny", "--problem", "sum-4096", "--model", "tinny", "--out",
                      str(tmp_path / "refused"), cwd=tmp_path)
    assert refused.returncode == 2 and "model 'tinny' is not provider:MODEL" in refused.stderr
    assert "choose from" in refused.stderr and "tiny" in refused.stderr and not (tmp_path / "refused").exists()


def test_a_plugin_agent_implementation_is_offered_by_the_worker(plugin_env):
    code = "from autocomp_zmq.agents.workers.registry import implementations; print(implementations('planner')['tiny'])"
    out = subprocess.run([sys.executable, "-c", code], env=plugin_env, cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "tests.tiny_target.agent:TinyAgent", out.stderr
    help_text = _launch(plugin_env, "worker", "--role", "planner", "--impl", "nope", "--connect", "tcp://127.0.0.1:9",
                        "--secret-file", "/nonexistent")
    assert help_text.returncode != 0 and "tiny" in help_text.stderr and "heuristic" in help_text.stderr


def test_targets_are_imported_only_when_used_and_a_broken_plugin_is_named_not_fatal(tmp_path):
    env = install_plugin(tmp_path, "broken_plugin", "[autocomp_zmq.targets]\nbroken = no_such_package.target:T\n"
                                                    "unnamed = tests.tiny_target\n")
    code = ("import sys; from autocomp_zmq.hw_runners import target_names; names = target_names(); "
            "print(names); print(sorted(m for m in sys.modules if m.startswith('autocomp_zmq.hw_runners.')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    names, modules = out.stdout.splitlines()
    assert "'broken'" in names and "'gemmini-sim'" in names, out.stderr
    assert modules == "['autocomp_zmq.hw_runners.base', 'autocomp_zmq.hw_runners.registry']"   # no target loaded
    listed = _launch(env, "targets", "--json")
    assert listed.returncode == 0 and '"gemmini-sim"' in listed.stdout
    assert "target 'broken' (broken_plugin (plug-in): 'no_such_package.target:T'): cannot import" in listed.stderr
    assert "target 'unnamed' (broken_plugin (plug-in): 'tests.tiny_target'): write \"module:Class\"" in listed.stderr
    refused = _launch(env, "eval", "--target", "broken", "--problem", "x", str(tmp_path / "k.c"))
    assert refused.returncode == 2 and "cannot import no_such_package" in refused.stderr, refused.stderr
