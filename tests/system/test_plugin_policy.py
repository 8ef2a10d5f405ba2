"""A search policy is a plug-in: tests/greedy_policy (hill climbing, written against agents/engine/policy.py only)
registers itself in the `autocomp_zmq.policies` entry-point group (a dist-info written here, as `pip install`
of a plug-in would), `run --search greedy` runs it end to end with the unchanged product, and show, report
and runs read its run from what it recorded."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.system.runkit import ROOT, query
from tests.system.runkit import plugin_env as install_plugin
from tests.system.test_report import table_rows

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


@pytest.fixture
def plugin_env(tmp_path):
    return install_plugin(tmp_path, "greedy_policy_plugin",
                          "[autocomp_zmq.policies]\ngreedy = tests.greedy_policy:GreedySearch\n")


def _launch(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "launch.py"), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=240)


def test_a_plugin_policy_runs_and_its_run_shows_and_reports(plugin_env, tmp_path):
    run = tmp_path / "run"
    listed = [json.loads(line) for line in _launch(plugin_env, "plugins", "--json").stdout.splitlines()]
    greedy = next(row for row in listed if row["kind"] == "policy" and row["name"] == "greedy")
    assert greedy["flags"] == "--menu-size" and greedy["origin"] == "greedy_policy_plugin (plug-in)"
    # its own option as a flag, as the default policy's are
    proc = _launch(plugin_env, "run", "--search", "greedy", "--menu-size", "6", "--problem",
                   "gemm-256x256x256", "-T", "5", "--evaluators", "1", "--out", str(run), "--no-live")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    best = json.loads((run / "best.json").read_text())
    assert best["speedup"] > 1.5 and f"Speedup: {best['speedup']:.2f}x" in proc.stdout
    search = json.loads((run / "config.json").read_text())["search"]
    assert search["policy"] == "greedy" and search["options"] == {"menu_size": 6}   # the policy's own section
    # the greedy climb's own shape: one plan per step, each on the best kernel so far, from 6 menu options
    plans = query(run, "SELECT iteration, parent_id, menu FROM plans ORDER BY iteration")
    assert [it for it, _, _ in plans] == sorted({it for it, _, _ in plans}) and len(plans) >= 2
    assert {len(json.loads(menu)) for _, _, menu in plans} == {6}

    shown = _launch(plugin_env, "show", str(run))
    assert shown.returncode == 0, shown.stderr
    rows = table_rows(shown.stdout, "Lineage of the best kernel")
    assert rows[0][1] == "(start)" and rows[-1][5] == f"{best['speedup']:.2f}x"
    reported = _launch(plugin_env, "report", str(run))
    assert reported.returncode == 0, reported.stderr
    html = (run / "report.html").read_text()
    assert best["best_id"][:8] in html and "gemm-256x256x256" in html
    listed = _launch(plugin_env, "runs", str(tmp_path))
    assert "run" in listed.stdout and f"{best['speedup']:.2f}x" in listed.stdout, listed.stdout

    # the policy is part of what a run is: it cannot change on resume
    resumed = _launch(plugin_env, "run", "--resume", str(run), "--search", "beam")
    assert resumed.returncode != 0 and "--search cannot change on resume" in resumed.stderr


def test_a_policy_refuses_options_it_does_not_declare(plugin_env, tmp_path):
    proc = _launch(plugin_env, "run", "--search", "greedy", "--beam", "2", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert "--beam: not an option of the search policy greedy (its options: menu_size)" in proc.stderr
    proc = _launch(plugin_env, "run", "--search", "greedy", "--search-option", "menu_size=0", "--out",
                   str(tmp_path / "run"))
    assert proc.returncode == 2 and "menu_size must be an integer >= 1, not 0" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_an_unknown_policy_is_named_with_the_ones_there_are(tmp_path):
    proc = _launch(dict(os.environ), "run", "--search", "nope", "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "unknown search policy 'nope'; available: beam" in proc.stderr
    assert not (tmp_path / "run").exists()
