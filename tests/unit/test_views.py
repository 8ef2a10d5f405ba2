"""The data behind `show --candidate`, `show --calls` and the report's candidate details, on stores the real
BeamSearch and RunStore wrote (tests/unit/storekit.py): which jobs produced each candidate, a page that stays
bounded for a paper-sized run, and stores written before calls kept their texts."""
from __future__ import annotations

import re
import sqlite3

import pytest
from rich.console import Console

from autocomp_zmq.agents.views.callprint import print_calls, print_candidate
from autocomp_zmq.agents.views.callview import CandidateIndex
from autocomp_zmq.agents.views.report import render
from autocomp_zmq.agents.views.runview import connect, load
from autocomp_zmq.agents.store import RunStore, expand
from autocomp_zmq.protocols.jobs import Plan
from tests.unit.storekit import build, make_old


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return build(tmp_path_factory.mktemp("views") / "run", iterations=3, beam=2, plans=2, codes=2)


def index_of(run_dir) -> CandidateIndex:
    return CandidateIndex(connect(run_dir))


def test_every_candidate_knows_the_calls_that_produced_it(small):
    ix = index_of(small)
    results = {job_id: (kind, expand(ix.db, result)) for job_id, kind, result in ix.db.execute(
        "SELECT id, kind, result FROM jobs WHERE kind IN ('code', 'repair')")}
    repaired = [c for c in ix.cands.values() if c.origin == "repair"]
    assert repaired, "the store should have repaired candidates"
    for c in ix.cands.values():
        producers = ix.producers(c.id)
        if c.origin == "initial":
            assert producers == []
            continue
        kinds = [p.kind for p in producers]
        assert producers[0].job_id == c.plan_job and kinds[0] == "plan"
        assert c.origin in kinds, (c.id, kinds)
        for p in producers[1:]:
            assert p.calls, "every job of the fake agents made a call"
            assert all(call.job_id == p.job_id for call in p.calls)
        # the jobs that wrote this code answered exactly this code
        for job_id in ix.made_by[c.id]:
            assert results[job_id][1]["code"] == c.code
    for c in repaired:
        repair = next(p for p in ix.producers(c.id) if p.kind == "repair")
        failed = ix.repaired[repair.job_id]
        assert all(ix.cands[b].parent_id == c.parent_id and ix.cands[b].correct == 0 for b in failed)
        assert c.id in ix.repaired_into(failed[0])
        # and the code call that wrote the failed kernel is listed too
        assert any("which was repaired" in p.why for p in ix.producers(c.id))
    # the first code job's truncated answer and its retry are both calls of that job
    first = next(call for call in ix.calls if call.finish == "length")
    assert [call.finish for call in ix.calls_of[first.job_id]] == ["length", "stop"]
    assert all(call.candidates for call in ix.calls if call.kind in ("code", "repair"))


def test_prefix_lookup(small):
    ix = index_of(small)
    some = next(iter(ix.cands))
    assert ix.resolve(some[:8]) == some and ix.resolve(some.upper()) == some
    with pytest.raises(LookupError, match="at least 6 characters"):
        ix.resolve(some[:5])
    with pytest.raises(LookupError, match="no candidate id starts with 'ffffffzz'"):
        ix.resolve("ffffffzz")
    # an ambiguous prefix names every candidate it matches
    ids = list(ix.cands)
    ix.cands[ids[0][:6] + "x" * 18] = ix.cands[ids[0]]
    with pytest.raises(LookupError, match=rf"'{ids[0][:6]}' matches 2 candidates: {ids[0]}"):
        ix.resolve(ids[0][:6])


def test_candidate_and_calls_print_texts_as_they_are(small):
    ix = index_of(small)
    cid = next(c.id for c in ix.cands.values() if c.origin == "repair")
    console = Console(record=True, width=1000, soft_wrap=True)
    print_candidate(console, ix, cid, "cycles")
    out = console.export_text()
    plan = ix.plans[ix.cands[cid].plan_job].text
    assert plan in out and "[bold]A[i][k]" in out            # rich markup in run text stays text
    assert ix.cands[cid].code in out
    assert "reference line" in out and out.count("reference line") < 20   # the prefix once, shortened
    assert "# Your role: plan" in out and "# Your role: code" in out and "# Your role: repair" in out
    assert "thinking [bold]hard[/bold]" in out
    console = Console(record=True, width=1000, soft_wrap=True)
    print_candidate(console, ix, cid, "cycles", full=True)
    assert console.export_text().count("reference line") >= 2000
    console = Console(record=True, width=1000, soft_wrap=True)
    print_calls(console, ix, "run")
    out = console.export_text()
    total = ix.db.execute("SELECT COUNT(*), SUM(tokens_in), SUM(tokens_cached), SUM(cost) FROM model_calls").fetchone()
    assert re.search(rf"total\s*│\s*{total[0]} calls\s*│.*│\s*{total[1]:,} \({total[2]:,}\)\s*│.*\${total[3]:.4f}\*",
                     out)
    assert "1 of" in out and "no known price" in out


def test_report_of_a_paper_sized_run_stays_bounded(tmp_path):
    run = build(tmp_path / "big", iterations=15, beam=6, plans=6, codes=2)
    view = load(run, details=True)
    html = render(view)
    n = len(view.index.cands)
    assert n > 1000
    assert html.count("<details class='cand") == n
    assert len(html) < 6_000_000, f"{len(html):,} characters for {n} candidates"
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<pre class='txt'>You are an expert [bold]") == 1   # the prefix once
    lineage = {s.id for s in view.lineage}
    shown = set(re.findall(r"<div id='cand-(\w+)'>(?:(?!</details>).)*?Call \d+ \(", html, re.S))
    assert shown and shown <= lineage        # prompts and answers only for the lineage
    for cid in view.index.cands:
        assert f"href='#cand-{cid}'" in html  # every node of the beam tree links to its candidate


def test_the_report_shows_plans_whole(tmp_path):
    """Before, plans were cut at 3,000 characters (31 of 34 published plans are longer)."""
    run = build(tmp_path / "run", iterations=2, beam=2, plans=2, codes=1)
    store = RunStore(run / "run.db")
    job_id, parent, iteration, model = store.db.execute(
        "SELECT c.plan_job, p.parent_id, p.iteration, p.model FROM candidates c JOIN plans p ON p.job_id = c.plan_job "
        "LIMIT 1").fetchone()
    long_plan = "Diagnosis first. " + "step %d: move the load of B out of the i loop; " * 400 + "THE END"
    store.add_plan(job_id, parent, iteration, model, Plan(text=long_plan % tuple(range(400)), option_id="x",
                                                          choice="prose"), ["x"])
    store.close()
    html = render(load(run, details=True))
    assert "step 399: move the load" in html and "THE END" in html and "plans are whole" in html


def test_old_stores_read_with_what_they_have(tmp_path):
    run = build(tmp_path / "old", iterations=2)
    make_old(run)
    ix = index_of(run)
    assert all(c.tokens_cached is None and c.priced is None and not c.texts_recorded for c in ix.calls)
    cid = next(c.id for c in ix.cands.values() if c.origin == "code")
    console = Console(record=True, width=1000, soft_wrap=True)
    print_candidate(console, ix, cid, "cycles")
    out = console.export_text()
    assert "prompt and answer: not recorded" in out and "(cached -)" in out
    html = render(load(run, details=True))
    assert html.count("<details class='cand") == len(ix.cands) and "prompt and answer not recorded" in html
    db = sqlite3.connect(run / "run.db")
    assert "texts" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}


def test_a_store_with_cycles_columns_reads_the_same_and_is_migrated_only_when_opened_to_write(tmp_path):
    run = build(tmp_path / "run", iterations=2, beam=2, plans=2, codes=1)
    before = load(run)
    make_old(run)
    schema = lambda: {t: [r[1] for r in sqlite3.connect(run / "run.db").execute(f"PRAGMA table_info({t})")]
                      for t in ("evals", "beams")}
    assert all("cycles" in cols and "latency" not in cols for cols in schema().values())
    after = load(run, details=True)           # read through temporary views: the file is not written
    assert (after.baseline, after.best_cycles, after.speedup) == (before.baseline, before.best_cycles, before.speedup)
    assert [(n.id, n.cycles) for n in after.nodes] == [(n.id, n.cycles) for n in before.nodes]
    assert [(b.iteration, b.cycles) for b in after.iterations] == [(b.iteration, b.cycles) for b in before.iterations]
    assert all("cycles" in cols for cols in schema().values())
    RunStore(run / "run.db").close()          # opened to write (resume): renamed in place
    assert all("latency" in cols and "cycles" not in cols for cols in schema().values())
    assert load(run).best_cycles == before.best_cycles
