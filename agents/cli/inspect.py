"""`show`, `report` and `runs`: read-only looks at run directories, finished, interrupted or running.

Program text, plans and errors contain square brackets (`A[i][k]`), which rich would read as markup,
so every value from a run reaches rich as a `rich.text.Text`, never as a markup string.
"""
from __future__ import annotations

import os

import sqlite3
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autocomp_zmq.agents.views.callprint import (calls_json, print_calls, print_candidate, print_one_call,
                                                 unpriced_note, usage_table)
from autocomp_zmq.agents.views.callview import CandidateIndex, combined
from autocomp_zmq.agents.console import NOOP_NOTE, duration_text
from autocomp_zmq.agents.views.runview import (RunView, RunViewError, clip, connect, latency_unit, list_runs, load,
                                               plural)

RUNS_DIR = Path("runs")   # where `run` puts runs without --out (relative to the working directory)
RunDirArg = Annotated[Path, typer.Argument(help="Run directory (the --out of `run`).", metavar="RUN_DIR",
                                           show_default=False)]


def register(app: typer.Typer, console: Console, err: Console) -> None:
    def fail(message: str) -> None:
        err.print(f"error: {message}", markup=False, highlight=False)
        raise typer.Exit(2)

    def view_of(run_dir: Path, details: bool = False) -> RunView:
        try:
            return load(run_dir, details)
        except RunViewError as exc:
            fail(str(exc))

    @app.command()
    def show(run_dir: RunDirArg,
             candidate: Annotated[Optional[str], typer.Option(
                 "--candidate", "-c", metavar="ID",
                 help="One candidate in full (an id prefix of at least 6 characters): its result, code, plan, "
                      "evaluation feedback and the model calls that produced it, prompts and answers.",
                 show_default=False)] = None,
             calls: Annotated[bool, typer.Option("--calls", help="Every model call in time order, with totals.")]
             = False,
             call: Annotated[Optional[int], typer.Option(
                 "--call", metavar="N", help="Model call N of --calls in full, whatever came of it (a candidate, a "
                                             "failed job, a lost or retried try): its job, prompt and raw answer.",
                 show_default=False)] = None,
             texts: Annotated[bool, typer.Option("--texts", help="With --calls --json: each call's prefix, prompt, "
                                                                "reasoning and raw answer too.")] = False,
             full: Annotated[bool, typer.Option("--full", help="With --candidate: print the shared prompt prefix "
                                                              "whole.")] = False,
             as_json: Annotated[bool, typer.Option("--json", help="With --calls: one JSON object per call.")]
             = False) -> None:
        """What a run did: the best kernel's lineage, best per iteration, menu options, failures, cost."""
        if sum((candidate is not None, calls, call is not None)) > 1:
            fail("give one of --candidate, --calls and --call")
        if texts and not (calls and as_json):
            fail("--texts goes with --calls --json")
        if candidate is None and not calls and call is None:
            if full or as_json:
                fail("--full goes with --candidate or --call, and --json with --calls")
            print_view(console, view_of(run_dir))
            return
        try:
            db = connect(run_dir)
        except RunViewError as exc:
            fail(str(exc))
        try:
            index = CandidateIndex(db)
            if calls:
                if as_json:
                    for line in calls_json(index, texts):
                        print(line)
                else:
                    print_calls(console, index, str(run_dir))
                return
            if call is not None:
                try:
                    print_one_call(console, index, call, full=full)
                except LookupError as exc:
                    fail(str(exc))
                return
            try:
                cid = index.resolve(candidate)
            except LookupError as exc:
                fail(str(exc))
            print_candidate(console, index, cid, latency_unit(db), full=full)
        except (sqlite3.Error, ValueError) as exc:   # a store with missing tables or garbled JSON
            fail(f"{Path(run_dir) / 'run.db'} is unreadable: {exc}")
        finally:
            db.close()

    @app.command()
    def report(run_dir: RunDirArg,
               output: Annotated[Optional[Path], typer.Option("--output", "-o", help="HTML file to write.",
                                                              show_default="RUN_DIR/report.html")] = None) -> None:
        """Write one self-contained HTML page with plots of a run (no scripts, nothing fetched)."""
        from autocomp_zmq.agents.views.report import render
        view = view_of(run_dir, details=True)
        path = output or Path(run_dir) / "report.html"
        try:   # as private as the run it shows: the owner's, or also its group's when the run directory is
            mode = 0o640 if Path(run_dir).stat().st_mode & 0o050 else 0o600
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(render(view))
        except OSError as exc:
            fail(f"cannot write {path}: {exc.strerror or exc}")
        console.print(Text(f"Wrote {path}"))

    @app.command()
    def runs(parent: Annotated[Optional[Path], typer.Argument(help="Directory holding run directories.",
                                                              metavar="DIR", show_default="runs/")] = None) -> None:
        """List the runs under a directory: problem, best speedup, evaluations, cost, status."""
        if parent is None and not (RUNS_DIR).exists():   # nothing has been run here yet: not an error
            console.print(Text(f"No runs in {RUNS_DIR.resolve()} yet."))
            return
        parent = parent or RUNS_DIR
        try:
            rows = list_runs(parent)
        except RunViewError as exc:
            fail(str(exc))
        if not rows:
            console.print(Text(f"No runs in {parent}."))
            return
        # evals: evaluations run; kernels: kernels evaluated (identical kernels share one evaluation)
        table = _table(Text(f"runs in {parent}"), ["run", "problem", "target", "speedup", "evals", "kernels", "cost",
                                                    "status", "started", "took"], right={3, 4, 5, 6, 9})
        for r in rows:
            table.add_row(*_cells([r.run_dir.name, r.problem, r.target, _x(r.speedup),
                                   "" if r.evaluations is None else r.evaluations, "" if r.kernels is None else r.kernels,
                                   "" if r.cost is None else f"${r.cost:.2f}", r.status, _when(r.started),
                                   duration_text(r.duration_s)]))
        console.print(table)


def print_view(console: Console, v: RunView) -> None:
    status = v.summary.get("stop_reason") if v.summary and v.status == "finished" else v.status
    isa = f" --isa {v.config['isa']}" if v.config.get("isa") else ""
    head = Text(f"{v.run_dir}: {v.problem} on {v.target}{isa}, {status}", style="bold")
    console.print(head)
    if v.reused:
        steps = v.reused.get("steps", [])
        console.print(Text(f"Reused the optimization trace of {v.reused.get('problem', {}).get('name')} "
                           f"({v.reused.get('run_dir', '?')}) as the plans of iterations 1-{len(steps)}: "
                           + ", ".join(s["option_id"] for s in steps)))
    c = v.config    # the search modes the run used (README: Search modes)
    modes = [text for text, on in (("one-phase", c.get("one_phase")), ("code as edits", c.get("code_edits")),
                                   (f"{c.get('translate_iters')} translation iterations", c.get("translate_iters")),
                                   (f"up to {c.get('propose_options')} proposed options", c.get("propose_options")))
             if on]
    if modes:
        console.print(Text("Search modes: " + ", ".join(modes)))
    if v.continued:
        console.print(Text(f"Continued from {v.continued.get('run_dir', '?')}: the {len(v.continued.get('kernels', []))} "
                           "kernels of its final beam, evaluated again here, were the first parents"))
    shared = v.kernels - v.evaluations
    line = plural(v.evaluations, 'evaluation') + (f" of {plural(v.kernels, 'kernel')} ({shared} identical to one "
                                                  "evaluated before)" if shared > 0 else "")
    line += f", cost ${v.cost:.2f}, started {_when(v.started)}"
    if v.duration_s is not None:
        line += f", took {duration_text(v.duration_s)}"
    if v.summary is None and (v.in_flight or v.queued):   # a live or crashed run
        line += f", {plural(v.in_flight, 'job')} leased to agents and {v.queued} queued"
    if v.speedup:
        line += f"; best {v.best_cycles:,.0f} {v.unit} vs {v.baseline:,.0f} at the start: {v.speedup:.2f}x"
    console.print(Text(line))

    if v.lineage:
        t = _table(Text("Lineage of the best kernel"), ["iter", "option", "plan", "model", v.unit, "vs start",
                                                         "vs parent"], right={0, 4, 5, 6})
        for s in v.lineage:
            t.add_row(*_cells([s.iteration, s.option_id or "(start)", s.plan or "", s.model or "",
                               _cycles(s.cycles), _x(s.vs_start), _x(s.vs_parent)]))
        console.print(t)
    else:
        console.print(Text("No correct kernel yet."))

    if v.iterations:
        t = _table(Text("Best per iteration"), ["iter", f"best {v.unit}", "speedup", "beam", "kernels", "correct"],
                   right={0, 1, 2, 3, 4, 5})
        for b in v.iterations:
            t.add_row(*_cells([b.iteration, _cycles(b.cycles), _x(b.speedup), b.beam, b.candidates, b.correct]))
        console.print(t)

    if v.options:
        t = _table(Text("Menu options tried"), ["option", "plans", "kernels", "correct", "accepted",
                                                "best over parent"], right={1, 2, 3, 4, 5})
        for o in v.options:
            t.add_row(*_cells([o.option_id, o.plans, o.candidates, o.correct, o.accepted, _x(o.best_gain)]))
        console.print(t)

    if v.plan_choices:
        ways = ("option line", "prose", "off menu", "free text")
        t = _table(Text("How the models' plans named their option (off menu: an option not offered in that step; "
                        "free text: none, the plan went to the coder as written)"),
                   ["model", "plans", *ways, "off-menu rate"], right={1, 2, 3, 4, 5, 6})
        for model, by in sorted(v.plan_choices.items()):
            n = sum(by.values())
            t.add_row(*_cells([model, n, *(by.get(w, 0) for w in ways), f"{by.get('off menu', 0) / n:.0%}"]))
        console.print(t)

    if v.failures:
        t = _table(Text("Failures"), ["count", "job", "error kind", "error"], right={0})
        for f in v.failures:
            t.add_row(*_cells([f.count, f.kind, f.error_kind, clip(f.message, 160)]))
        console.print(t)
    else:
        console.print(Text("No failed jobs and no incorrect kernels."))
    if v.noops:
        console.print(Text(f"No-op proposals: {v.noops} ({NOOP_NOTE})"))

    if v.usage:
        console.print(usage_table(v.usage, "Model calls"))
        note = unpriced_note(combined(v.usage))
        if note:
            console.print(Text(note))


def _table(title: Text, columns: list[str], right: set[int] = frozenset()) -> Table:
    table = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(Text(col), justify="right" if i in right else "left")
    return table


def _cells(values: list) -> list[Text]:
    return [Text(str(v)) for v in values]


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


def _cycles(v: float | None) -> str:
    return f"{v:,.0f}" if v is not None else "-"


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"
