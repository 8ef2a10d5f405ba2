"""`show`, `report` and `runs` on real runs: a finished one (made once for the module, with failed plans,
kernels that do not compile and paid calls), one stopped by its evaluation budget, one shown while it runs
and then killed, one whose lock the test holds, and a corrupt store. The report is rendered by headless
Chromium and the screenshot is checked for each plot's series colour, in the expected places."""
from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.agents.views.report import DIFF_ADD, PLOT_COLOURS
from tests.llm.fake_servers import HWLOOP, FakeLLM, smart_answer
from tests.system.runkit import (ROOT, SLOW_GEMM, finish, kill_tree, launch, plan_texts, query, stored, wait_for,
                                 write_config)

pytestmark = pytest.mark.system

CHROMIUM = "/usr/bin/chromium"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "launch.py"), *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120)


def table_rows(out: str, title: str) -> list[list[str]]:
    """The cells of each body row of the rich table printed under `title`."""
    lines = out[out.index(title):].splitlines()
    rows = []
    for line in lines[next(i for i, ln in enumerate(lines) if ln.startswith("┡")) + 1:]:
        if not line.startswith("│"):
            break
        rows.append([c.strip() for c in line.strip("│").split("│")])
    return rows


BROKEN = HWLOOP.replace("gemmini_loop_ws(", "gemmini_loop_ws_oops(", 1)   # does not compile


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A 3-iteration search planned by the heuristic and coded by it and by a priced fake LLM whose first
    (and every other) kernel does not compile. Dropout 0.1 leaves some plan requests no option the heuristic
    can apply, so the run has failed plan jobs, incorrect kernels, repairs and paid calls."""
    base = tmp_path_factory.mktemp("finished")
    code_answers = itertools.count()

    def script(prompt, n):
        if "OPTION: <id" in prompt or "## The failing kernel" in prompt:   # plans and repairs: a competent answer
            return 200, {}, smart_answer(prompt)
        return 200, {}, f"```c\n{BROKEN if next(code_answers) % 2 == 0 else HWLOOP}```\n"

    fake = FakeLLM(script, usage=(9000, 1500))
    try:
        model = f"openai-compat@{fake.url}/v1:fake-coder"
        (base / "prices.toml").write_text(f'["{model}"]\ninput = 2.5\noutput = 10.0\n')
        cfg = write_config(base / "run.toml", dropout=0.9, model=["heuristic"], code_model=["heuristic", model])
        run_dir = base / "runs" / "small"
        out = finish(launch("run", "--config", str(cfg), "--evaluators", "2", "--no-live", "--out", str(run_dir),
                            env={"AUTOCOMP_PRICES": str(base / "prices.toml")}))
    finally:
        fake.close()
    assert (run_dir / "best.json").exists(), out[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def stopped(finished) -> Path:
    """A heuristic run stopped early by its evaluation budget."""
    run_dir = finished.parent / "stopped"
    cfg = write_config(finished.parent.parent / "stopped.toml", max_evals=3)
    out = finish(launch("run", "--config", str(cfg), "--evaluators", "1", "--no-live", "--out", str(run_dir)))
    assert (run_dir / "best.json").exists(), out[-3000:]
    return run_dir


def lineage_of(run_dir: Path) -> list[tuple[str, int, str | None]]:
    """(id, iteration, option) from the starting kernel to best.json's best, straight from the store."""
    best = json.loads((run_dir / "best.json").read_text())["best_id"]
    chain = []
    while best:
        cid, parent, it, plan_job = query(run_dir, "SELECT id, parent_id, iteration, plan_job FROM candidates "
                                                   "WHERE id = ?", best)[0]
        option = query(run_dir, "SELECT option_id FROM plans WHERE job_id = ?", plan_job)
        chain.append((cid, it, option[0][0] if option else None))
        best = parent
    return chain[::-1]


def test_show_prints_lineage_options_failures_and_cost(finished):
    digest = hashlib.sha256((finished / "run.db").read_bytes()).hexdigest()
    files = sorted(p.name for p in finished.iterdir())
    res = cli("show", str(finished))
    assert res.returncode == 0, res.stderr
    # read-only: the store is byte for byte the same and nothing appeared next to it (no -wal, no -shm)
    assert hashlib.sha256((finished / "run.db").read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in finished.iterdir()) == files
    out = res.stdout
    best = json.loads((finished / "best.json").read_text())
    assert f"{best['speedup']:.2f}x" in out.splitlines()[1] and f"cost ${best['cost_usd']:.2f}" in out

    rows = table_rows(out, "Lineage of the best kernel")
    expected = lineage_of(finished)
    assert [(int(r[0]), r[1]) for r in rows] == [(it, opt or "(start)") for _, it, opt in expected]
    assert rows[0][5] == "1.00x" and rows[-1][5] == f"{best['speedup']:.2f}x"
    assert rows[-1][4] == f"{best['best_latency']:,.0f}"
    product = 1.0   # the steps' speedups over their parents multiply up to the total
    for r in rows[1:]:
        product *= float(r[6].rstrip("x"))
    assert product == pytest.approx(best["speedup"], rel=0.02)

    options = {r[0]: r for r in table_rows(out, "Menu options tried")}
    stored = dict(query(finished, "SELECT option_id, COUNT(*) FROM plans GROUP BY option_id"))
    assert {k: int(v[1]) for k, v in options.items()} == stored
    accepted = sum(int(r[4]) for r in options.values())
    assert accepted == query(finished, "SELECT COUNT(DISTINCT b.candidate_id) FROM beams b JOIN candidates c "
                                       "ON c.id = b.candidate_id WHERE c.origin != 'initial'")[0][0]

    failed_jobs = query(finished, "SELECT COUNT(*) FROM jobs WHERE ok = 0")[0][0]
    incorrect = query(finished, "SELECT COUNT(*) FROM evals WHERE correct = 0")[0][0]
    assert failed_jobs and incorrect, "the fixture run should have failed plans and incorrect kernels"
    groups = table_rows(out, "Failures")
    # plans the offline heuristic could not make (no surviving option changes the schedule) are counted apart
    noops = re.search(r"No-op proposals: (\d+)", out)
    noops = int(noops.group(1)) if noops else 0
    assert sum(int(g[0]) for g in groups) + noops == failed_jobs + incorrect
    by_kind = {(g[1], g[2]): g for g in groups}
    assert noops or "(…)" in by_kind["plan", "HeuristicError"][3]   # option lists normalised away: one group
    assert int(by_kind["eval", "compile"][0]) == incorrect
    assert "[-Werror=implicit-function-declaration]" in by_kind["eval", "compile"][3]   # not read as rich markup

    usage = {(r[0], r[1]): r for r in table_rows(out, "Model calls")}
    assert {("heuristic", "planner"), ("heuristic", "coder")} <= set(usage)
    assert sum(int(r[2]) for r in usage.values()) == query(finished, "SELECT COUNT(*) FROM model_calls")[0][0]
    assert sum(float(r[7].lstrip("$*")) for r in usage.values()) == pytest.approx(best["cost_usd"], abs=1e-3)


def test_bad_directories_are_one_line_errors(tmp_path, finished):
    for args, message in [(["show", str(tmp_path)], "is not a run directory (no run.db)"),
                          (["show", str(tmp_path / "nope")], "is not a directory"),
                          (["report", str(tmp_path)], "is not a run directory"),
                          (["runs", str(tmp_path / "nope")], "is not a directory"),
                          (["report", str(finished), "-o", str(tmp_path / "no" / "dir.html")], "cannot write")]:
        res = cli(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert res.stderr.startswith("error: ") and message in res.stderr and res.stderr.count("\n") == 1, res.stderr
    (tmp_path / "run.db").write_bytes(b"this is not a database" * 100)
    res = cli("show", str(tmp_path))
    assert res.returncode == 2 and "unreadable: file is not a database" in res.stderr


def test_runs_lists_finished_stopped_incomplete_running_and_unreadable(finished, stopped, tmp_path):
    parent = finished.parent
    # a run killed while its starting kernel (slow to simulate) is being evaluated
    (tmp_path / "slow.c").write_text(SLOW_GEMM)
    cfg = write_config(tmp_path / "slow.toml")
    proc = launch("run", "--config", str(cfg), "--kernel", str(tmp_path / "slow.c"), "--evaluators", "1",
                  "--no-live", "--out", str(parent / "killed"))
    try:
        wait_for(lambda: query(parent / "killed", "SELECT COUNT(*) FROM attempts") not in ([], [(0,)]),
                 timeout=60, what="the first job to be dispatched")
        live = cli("show", str(parent / "killed"))   # a run in progress is readable while it is written
        assert live.returncode == 0, live.stderr
        assert live.stdout.splitlines()[0].endswith("gemm-256x256x256 on gemmini-sim, running"), live.stdout
    finally:
        kill_tree(proc.pid)
        proc.communicate()
    # a run whose coordinator lock is held (here by the test itself)
    shutil.copytree(finished, parent / "locked", ignore=shutil.ignore_patterns("run.db-*"))
    (parent / "corrupt").mkdir()
    (parent / "corrupt" / "run.db").write_bytes(b"\0garbage" * 512)
    (parent / "not-a-run").mkdir()
    fd = os.open(parent / "locked" / "coordinator.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        res = cli("runs", str(parent))
    finally:
        os.close(fd)
    assert res.returncode == 0, res.stderr
    rows = {r[0]: r for r in table_rows(res.stdout, "runs in")}
    assert set(rows) == {"small", "stopped", "killed", "locked", "corrupt"}
    best = json.loads((finished / "best.json").read_text())
    assert rows["small"][1:4] == ["gemm-256x256x256", "gemmini-sim", f"{best['speedup']:.2f}x"]
    assert rows["small"][4] == str(best["evaluations"]) and int(rows["small"][5]) >= best["evaluations"]   # kernels
    assert rows["small"][7] == "finished" and rows["small"][9] != "-"                                    # took
    assert rows["stopped"][7] == "stopped: evaluation budget of 3 spent"
    assert rows["killed"][7] == "incomplete (resume with --resume)"
    assert cli("report", str(parent / "killed")).returncode == 0 and (parent / "killed" / "report.html").exists()
    assert rows["locked"][7] == "running"
    assert rows["corrupt"][7] == "unreadable: file is not a database"
    assert cli("runs", str(parent)).stdout.count("running") == 0   # the lock is gone with the test's fd


def test_report_is_self_contained_and_escapes_run_text(finished, tmp_path):
    # a copy of the run with hostile text in a plan: it must come out escaped
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy, ignore=shutil.ignore_patterns("run.db-*"))
    job = lineage_of(copy)[-1][0]
    db = sqlite3.connect(copy / "run.db")
    db.execute("UPDATE plans SET text = ?, text_id = NULL WHERE job_id = (SELECT plan_job FROM candidates WHERE id = ?)",
               ("<script>alert(1)</script> [bold]A[i][k]", job))
    db.commit()
    db.close()
    res = cli("report", str(copy))
    assert res.returncode == 0, res.stderr
    html = (copy / "report.html").read_text()
    for plot in PLOT_COLOURS:
        assert f"id='{plot}'" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; [bold]A[i][k]" in html
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "url(" not in html
    assert "for (int i = 0; i &lt; I; i += DIM)" in html   # kernel code is escaped too


def screenshot(html: Path, png: Path, height: int = 3000) -> None:
    """Render html in headless Chromium, offline, into a 1280 px wide png."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) to run this test")
    profile = png.parent / f"{png.stem}-profile"
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size=1280,{height}",
                          f"--screenshot={png}", html.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot (exit {res.returncode}):\n{res.stderr[-2000:]}"
    shutil.rmtree(profile, ignore_errors=True)


def colour_box(pixels: np.ndarray, hex_colour: str, tol: int = 6) -> tuple[int, int, int, int, int]:
    """(count, top, bottom, left, right) of the pixels within tol of the colour in every channel."""
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    hit = (np.abs(pixels[:, :, :3].astype(int) - rgb) <= tol).all(axis=2)
    ys, xs = np.nonzero(hit)
    if not len(ys):
        return 0, -1, -1, -1, -1
    return len(ys), ys.min(), ys.max(), xs.min(), xs.max()


def test_report_renders_every_plot_in_chromium(finished, tmp_path):
    from PIL import Image
    out = tmp_path / "report.html"
    assert cli("report", str(finished), "-o", str(out)).returncode == 0
    png = tmp_path / "report.png"
    screenshot(out, png)
    pixels = np.asarray(Image.open(png).convert("RGB"))
    boxes = {name: colour_box(pixels, colour) for name, colour in {**PLOT_COLOURS, "diff": DIFF_ADD}.items()}
    for name, (count, *_) in boxes.items():
        assert count >= 50, f"{name}: only {count} pixels of its colour in the screenshot: {boxes}"
    speed, cost, tree, options, diff = (boxes[k] for k in ("plot-speedup", "plot-cost", "plot-tree",
                                                           "plot-options", "diff"))
    # layout: speedup | cost side by side on top, then the tree, the options, the diffs
    assert speed[4] < cost[3], "the speedup plot should be left of the cost plot"
    assert max(speed[2], cost[2]) < tree[1] and tree[2] < options[1] and options[2] < diff[1], boxes


def test_any_candidate_opens_with_its_plan_diff_and_feedback(finished, tmp_path):
    """A candidate off the best lineage: the beam tree links to it, following the link opens its <details>
    (Chromium's DOM after navigating to #cand-ID), and opened it draws its plan, its diff against its parent
    and its feedback. The screenshot shows the candidates section alone (the sections above hidden by an added
    style rule) with that candidate open, next to the same page with it closed."""
    from html import escape

    from PIL import Image
    out = tmp_path / "report.html"
    assert cli("report", str(finished), "-o", str(out)).returncode == 0
    html = out.read_text()
    lineage = {cid for cid, _, _ in lineage_of(finished)}
    cid, plan_job, eval_job = next(r for r in query(
        finished, "SELECT c.id, c.plan_job, e.job_id FROM candidates c JOIN evals e ON e.candidate_id = c.id "
                  "JOIN plans p ON p.job_id = c.plan_job WHERE e.correct = 1 ORDER BY c.iteration DESC, c.id")
        if r[0] not in lineage)
    plan = plan_texts(finished)[plan_job][1]
    feedback = stored(finished, eval_job)["feedback_text"]
    assert f"<a href='#cand-{cid}'><circle" in html   # its node in the beam tree

    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'dom-profile'}", "--dump-dom", out.resolve().as_uri()
                          + f"#cand-{cid}"], capture_output=True, text=True, timeout=120).stdout
    start = dom.index(f'<div id="cand-{cid}">')
    details = dom.rfind("<details", 0, start)
    assert "open" in dom[details:dom.index(">", details)], "following the link should open the candidate"
    body = dom[start:dom.index("</details>", start)]
    assert escape(plan, quote=False) in body and escape(feedback.splitlines()[0], quote=False) in body
    assert re.search(r'<span class="add">\+[^<]*\S', body), "a line the candidate added to its parent's code"
    # nothing else was opened by the link
    assert dom.count(" open=") == 1

    from autocomp_zmq.agents.views.report_cands import FEEDBACK_BG, PLAN_BG
    boxes = {}
    for state in ("open", "closed"):
        page = html.replace("</style>", "body > div.row, body > section:not(#candidates) { display: none }</style>")
        if state == "open":
            at = page.index(f"<div id='cand-{cid}'>")
            tag = page.rfind("<details", 0, at)
            page = page[:tag] + "<details open" + page[tag + len("<details"):]
        (tmp_path / f"{state}.html").write_text(page)
        screenshot(tmp_path / f"{state}.html", tmp_path / f"{state}.png", height=4000)   # a whole-kernel diff is long
        pixels = np.asarray(Image.open(tmp_path / f"{state}.png").convert("RGB"))
        boxes[state] = {name: colour_box(pixels, colour, tol=2) for name, colour in
                        {"plan": PLAN_BG, "diff": DIFF_ADD, "feedback": FEEDBACK_BG}.items()}
    plan_box, diff_box, feedback_box = (boxes["open"][k] for k in ("plan", "diff", "feedback"))
    assert all(box[0] >= 200 for box in (plan_box, diff_box, feedback_box)), boxes["open"]
    assert plan_box[2] < diff_box[1] and diff_box[2] < feedback_box[1], boxes["open"]   # plan, diff, feedback
    assert all(box[0] == 0 for box in boxes["closed"].values()), boxes["closed"]
