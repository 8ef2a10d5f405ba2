"""What an operator and a newcomer read, without processes: agents named with their address, liveness as an
option, proposals of nothing counted apart from failures, how a run's end is worded, the progress display's
time, estimate and width, run durations, `runs` counting from the store, the schedule library's keys and scope,
`run --help` panels at 80 columns and `targets`."""
from __future__ import annotations

import json
import re
import time

import pytest
import structlog
from rich.console import Console
from typer.testing import CliRunner

from autocomp_zmq.agents.engine.failures import FailureTally, is_noop
from autocomp_zmq.hw_runners.toolkit.choice import choose_option
from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.agents.run.outcome import end_line, model_verdict
from autocomp_zmq.agents.run.progress import Progress
from autocomp_zmq.agents.run.runconfig import OPTIONS, ConfigError, RunConfig
from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.agents.views.runview import load, run_row
from autocomp_zmq.agents.engine.search import BeamConfig, BeamSearch
from autocomp_zmq.protocols.jobs import EvalReport, MenuOption, ProblemRef
from tests.unit.storekit import build
from tests.unit.test_coordinator import Rig, result

NOOP = ("HeuristicError: none of the menu options that survived dropout (tile-sizes) changes the current schedule "
        "(gemmini_loop_ws blocks of 4x8x32 tiles (I x J x K))")


# -- A: operators see who joined and went, and can set liveness ----------------------------------------------
def test_agent_joined_and_gone_name_the_peer_address(tmp_path):
    rig = Rig(tmp_path)
    with structlog.testing.capture_logs() as logs:
        a = rig.t.join("evaluator", target="t")
        rig.step()
        rig.t.kill(a)
        rig.step()
    joined = [e for e in logs if e["event"] == "agent_joined"]
    gone = [e for e in logs if e["event"] == "agent_gone"]
    assert joined and joined[0]["address"] == "inproc", logs
    assert gone and gone[0]["address"] == "inproc" and gone[0]["how"] == "dead", logs


def test_liveness_is_a_documented_option_of_the_bus():
    section, decl = OPTIONS["liveness"]
    assert section == "bus" and decl["resume"] == "local" and "declared dead" in decl["help"]
    assert RunConfig().bus.liveness == 10 and RunConfig.of(liveness=4).bus.liveness == 4
    with pytest.raises(ConfigError, match="liveness must be an integer >= 2, not 1"):
        RunConfig.of(liveness=1)
    for name in ("max_refused", "unreachable_s"):        # a worker's give-up bounds, declared once too
        assert OPTIONS[name][0] == "bus" and "gives up" in OPTIONS[name][1]["help"]


# -- B: proposals of nothing are not failures -------------------------------------------------------------
def test_the_heuristics_no_change_is_recognised_in_old_and_new_words():
    with pytest.raises(HeuristicError) as exc:
        choose_option([MenuOption(id="x", title="x", description="d")], 1, lambda _: None, lambda _: [],
                      lambda _: 1.0, "the current one")
    assert is_noop(f"HeuristicError: {exc.value}") and is_noop(NOOP) and not is_noop("HeuristicError: other")
    tally = FailureTally()
    tally.add("plan", "heuristic", NOOP)
    tally.add("plan", "heuristic", "HeuristicError: cannot write 'x' kernels")
    assert tally.noops == {"plan": 1} and sum(tally.counts.values()) == 1
    assert all("survived dropout" not in line for line in tally.top()) and len(tally.as_dict()) == 1


def test_noop_proposals_are_not_failures_in_show_runs_or_the_verdict(tmp_path):
    run = build(tmp_path / "run", iterations=1)
    store = RunStore(run / "run.db")
    with store.tx():
        for i in range(9):          # most model jobs "failed": before, a warning that the models mostly failed
            store.add_job(f"noop-{i}", "plan", 1, EvalReport(correct=False))   # (the request is not read)
            store.finish_job(f"noop-{i}", False, None, NOOP, "failed")
    assert model_verdict(store, produced=3) == {}
    store.close()
    view = load(run)
    assert view.noops == 9 and not any("survived dropout" in f.example for f in view.failures)
    from autocomp_zmq.agents.cli.inspect import print_view
    console = Console(record=True, width=200)
    print_view(console, view)
    assert "No-op proposals: 9 (" in console.export_text()


def test_a_normal_finish_is_worded_as_one():
    base = {"evaluations": 52, "iterations": 8, "duration_s": 21.4, "run_dir": "runs/x"}
    assert end_line({**base, "stop_reason": "finished 8 iterations"}) == \
        "Finished: 8 iterations, 52 evaluations in 21 s."
    assert end_line({**base, "stop_reason": "no improvement for 3 iterations", "iterations": 5}) == \
        "Stopped: no improvement for 3 iterations; 5 iterations, 52 evaluations in 21 s."
    assert end_line({**base, "stop_reason": "interrupted", "iterations": 2}).startswith(
        "Interrupted in iteration 2 after 52 evaluations in 21 s; continue with --resume runs/x")


# -- B: progress says how far and how long, and fits -----------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_has_elapsed_time_an_estimate_and_the_iterations_evaluations(tmp_path):
    rig = Rig(tmp_path, cfg=BeamConfig(iterations=3, beam=2, plans=2, codes=2, seed=3, patience=10,
                                       plan_models=("synthetic",), code_models=("synthetic",)))
    clock = FakeClock()
    progress = Progress("gemm-512x512x512", live=False, plain_every_s=0.0, clock=clock)
    progress.console = Console(record=True, width=300, file=open("/dev/null", "w"))
    agents = rig.standard_agents()
    progress.update(rig.coord)
    for _ in range(500):                      # part of the way, a second of fake time per turn of the loop
        rig.step()
        clock.now += 1.0
        if rig.search.iteration == 2 and rig.search.summary().iteration_evals[0] >= 1:
            break
        for a in agents:
            for job in rig.t.jobs_for(a):
                rig.t.reply(a, result(job))
    progress.update(rig.coord)
    snap = progress._snap
    done, expected = snap["step"]
    assert 0 <= done <= expected and snap["elapsed"] > 0 and snap["left"] is not None
    line = progress.console.export_text().splitlines()[-1]
    assert re.search(rf"iteration 2/3 \({done}/{expected} evals\)", line), line
    assert re.search(r"\d+:\d\d elapsed, ~\d+:\d\d left", line), line


def test_progress_lines_and_table_fit_the_width(tmp_path):
    rig = Rig(tmp_path)
    for _ in range(5):                         # long failure reasons, as a run of unusable answers has
        rig.coord.failures.add("plan", "openai-compat@http://127.0.0.1:41235/v1:m", "unusable answer: " + "x" * 300)
    rig.coord.failures.add("plan", "heuristic", NOOP)
    progress = Progress("gemm-512x512x512", live=False, plain_every_s=0.0)
    progress.console = Console(record=True, width=1000, file=open("/dev/null", "w"))   # a pipe: no terminal
    progress.update(rig.coord)
    line = progress.console.export_text().rstrip("\n")
    assert "\n" not in line and len(line) <= 120 and "failed 5" in line and "no-ops 1" in line, line
    narrow = Console(record=True, width=60, file=open("/dev/null", "w"))
    narrow.print(progress._table(progress._snap))
    lines = narrow.export_text().splitlines()
    assert lines and all(len(ln) <= 60 for ln in lines), lines
    assert any(ln.strip().startswith("no-op proposals") for ln in lines), lines


# -- B: `runs` counts from the store and says how long runs took ------------------------------------------------
def test_runs_counts_evaluations_and_kernels_from_the_store_with_the_duration(tmp_path):
    run = build(tmp_path / "run", iterations=2)
    store = RunStore(run / "run.db")
    evals = store.count("jobs", "kind = 'eval' AND state IN ('done', 'failed')")
    kernels = store.count("evals")
    store.set_meta("summary", {**(store.meta("summary") or {}), "stop_reason": "interrupted", "duration_s": 125.0})
    store.close()
    row = run_row(run)
    assert (row.evaluations, row.kernels, row.duration_s) == (evals, kernels, 125.0)
    from autocomp_zmq.launch import app
    out = CliRunner().invoke(app, ["runs", str(tmp_path)], env={"COLUMNS": "200"}).output
    header = next(ln for ln in out.splitlines() if "evals" in ln)
    assert "kernels" in header and "took" in header and "2 min 05 s" in out, out


# -- B: the schedule library: keyed by the run, scoped to its project -------------------------------------------
def _trace(project: str | None, dims: dict, name: str) -> dict:
    trace = {"format": 1, "target": "gemmini-sim", "isa": "", "problem": {"name": name, "family": "gemm",
                                                                          "dims": dims},
             "steps": [{"option_id": "tile-sizes", "text": "t", "params": {}}], "recorded": time.time()}
    return {**trace, "project": project} if project else trace


def test_reuse_auto_looks_in_this_project_unless_told_global(tmp_path):
    from autocomp_zmq.agents.run import reuse
    folder = tmp_path / "gemmini-sim" / "default"
    folder.mkdir(parents=True)
    here, there = str(tmp_path / "a"), str(tmp_path / "b")
    (folder / "one.json").write_text(json.dumps(_trace(there, {"I": 512, "J": 512, "K": 512}, "other-project")))
    (folder / "two.json").write_text(json.dumps(_trace(here, {"I": 64, "J": 64, "K": 64}, "this-project")))
    dims = {"I": 512, "J": 512, "K": 512}
    assert reuse.find(tmp_path, "gemmini-sim", "", "gemm", dims, project=here)["problem"]["name"] == "this-project"
    assert reuse.find(tmp_path, "gemmini-sim", "", "gemm", dims)["problem"]["name"] == "other-project"
    with pytest.raises(reuse.ReuseError, match="--schedule-scope global"):
        reuse.find(tmp_path, "gemmini-sim", "", "gemm", dims, project=str(tmp_path / "c"))
    assert "the optimization trace of this-project" in reuse.describe(_trace(here, dims, "this-project"), dims)
    assert RunConfig().task.schedule_scope == "project"


# -- B: --help and `targets` --------------------------------------------------------------------------------------
def test_run_help_shows_the_sections_in_order_with_readable_defaults_at_80_columns():
    from autocomp_zmq.launch import app
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"},
                             terminal_width=80).output
    assert max(len(ln) for ln in out.splitlines()) <= 80, out
    panels = [m.group(1) for m in re.finditer(r"╭─ (Options(?:: [a-z: ]+)?) ─", out)]
    assert panels[:8] == ["Options", "Options: task", "Options: search", "Options: search: beam", "Options: models",
                          "Options: budget", "Options: bus", "Options: local"], panels
    assert "[search.options]" in out and "[task.target_options]" in out   # not eaten as markup
    # every option's default is there whole, however its cell wraps
    cells = re.sub(r"\s*│\s*", " ", out)
    cells = re.sub(r"\s+", " ", cells)
    for shown in ("[default: (gemm-512x512x512)]", "[default: ($AUTOCOMP_SCHEDULE_LIBRARY, else the user's data "
                  "directory)]", "[default: (project)]", "[default: ($AUTOCOMP_PRICES, else none)]",
                  "[default: (10)]", "[default: (tcp://127.0.0.1:*)]"):
        assert shown in cells, shown
    assert "new totals" in cells and "--liveness" in cells


def test_targets_say_what_each_has_run_on_and_its_sandbox():
    from autocomp_zmq.hw_runners.base import target_info
    from autocomp_zmq.launch import app
    assert target_info("cuda").hardware.startswith("never run on a GPU")
    assert target_info("trainium").hardware.startswith("never run on Trainium")
    for sim in ("gemmini-sim", "trainium-sim"):
        assert target_info(sim).hardware.startswith("simulator")
    out = CliRunner().invoke(app, ["targets"], env={"COLUMNS": "400"}, terminal_width=400).output
    assert "never run on a GPU" in out and "never run on Trainium" in out and out.count("simulator: ") == 2
    assert "Sandbox (how each target confines candidate code):" in out
    assert f"gemmini-sim: {target_info('gemmini-sim').sandbox[:60]}" in out
    lines = [json.loads(ln) for ln in CliRunner().invoke(app, ["targets", "--json"]).output.splitlines()]
    assert {ln["name"]: ln["hardware"][:9] for ln in lines}["trainium-sim"] == "simulator"


def test_latencies_keep_their_precision_in_every_view():
    """Before, the report wrote a 29.41 us kernel as "29 us" (whole numbers, as for cycles)."""
    from autocomp_zmq.agents.console import latency_number, latency_text
    assert latency_text(29.4127, "us") == "29.41 us" and latency_number(1234567.4, "cycles") == "1,234,567"
    assert latency_text(0.012345, "ms") == "0.01235 ms"
