"""Schedule reuse: the optimization trace of a run's best kernel (the menu options and plans that led from
the starting kernel to it, with the problem's shape), recorded in the run store and in a schedule library
directory, and picked for a new run of a similar workload.

A trace is plain JSON. The library keeps one file per run under <library>/<target>/<isa>/, named by the run's
identity (a random id kept in its store: two runs never share an entry, whatever their folders are called, and a
resumed run updates its own), and records the project directory the run was started from; `--reuse auto` takes,
among the traces of this project (or of every project, with --schedule-scope global), the recorded workload of the
same target, ISA profile and problem family whose shape is closest (sum over dimensions of |log2(new / old)|),
`--reuse RUN_DIR` the trace of that run. A reused trace only ever becomes plans: the planner adapts each to the
new problem and every kernel is evaluated as usual."""
from __future__ import annotations

import json
import math
import os
import secrets
import time
from pathlib import Path
from typing import Any

import platformdirs

from autocomp_zmq.agents.run.rundir import write_atomic
from autocomp_zmq.agents.run.runconfig import flat_view
from autocomp_zmq.agents.store import RunStore, trace_step

TRACE_FORMAT = 1
LIBRARY_ENV = "AUTOCOMP_SCHEDULE_LIBRARY"   # overrides the default library directory (e.g. for a cluster)


class ReuseError(ValueError):
    """No usable trace: the message says why and what to do."""


def library_dir(option: str | None = None) -> Path:
    """--schedule-library, else $AUTOCOMP_SCHEDULE_LIBRARY, else schedules/ in the user's data directory."""
    chosen = option or os.environ.get(LIBRARY_ENV)
    return Path(chosen) if chosen else Path(platformdirs.user_data_dir("autocomp-zmq")) / "schedules"


def trace_of(store: RunStore, best_id: str | None, summary: dict | None = None) -> dict[str, Any] | None:
    """The trace from the starting kernel to candidate best_id: one step per plan on the way (repairs keep
    their plan), oldest first, with the latency each step reached. None if the best is the start."""
    steps = []
    cid = best_id
    while cid:
        row = trace_step(store.db, cid)
        if row is None:
            break
        parent, iteration, model, option, text, params, latency = row
        if parent is not None and option is not None:
            steps.append({"option_id": option, "text": text, "params": json.loads(params or "{}"),
                          "model": model, "iteration": iteration, "latency": latency})
        cid = parent
    if not steps:
        return None
    config, problem = flat_view(store.meta("config") or {}), store.meta("problem") or {}
    # a trace holds plans and shapes, never code: a problem file's texts stay in its run
    problem = {k: v for k, v in problem.items() if k != "definition"}
    summary = summary or store.meta("summary") or {}
    return {"format": TRACE_FORMAT, "target": config.get("target"), "isa": config.get("isa") or "",
            "problem": problem, "start_latency": summary.get("baseline_latency"),
            "best_latency": summary.get("best_latency"), "steps": steps[::-1], "recorded": time.time()}


def record(store: RunStore, run_dir: Path, best_id: str | None, library: Path,
           summary: dict | None = None) -> Path | None:
    """Store the run's trace in its run store (meta schedule_trace) and in the library; the library file's
    path, or None when there is nothing to record (no step improved the start). A library that cannot be
    written is reported by the OSError (the run store keeps the trace either way)."""
    trace = trace_of(store, best_id, summary)
    if trace is None:
        return None
    run_id = store.meta("run_id")
    if not run_id:                   # the run's identity, made once: its library entry is its own
        run_id = secrets.token_hex(6)
        store.set_meta("run_id", run_id)
    trace.update(run_dir=str(run_dir), run_id=run_id, project=project_dir())
    store.set_meta("schedule_trace", trace)
    folder = library / trace["target"] / (trace["isa"] or "default")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{trace['problem'].get('name', 'problem')}--{run_dir.name}-{run_id}.json"
    write_atomic(path, json.dumps(trace, indent=1))
    return path


def distance(a: dict[str, int], b: dict[str, int]) -> float:
    """How far apart two shapes of one family are: sum over dimensions of |log2(a / b)| (0: the same)."""
    return sum(abs(math.log2(a[k] / b[k])) for k in a)


def _usable(trace: Any, target: str, isa: str, family: str, dims: dict[str, int]) -> bool:
    return (isinstance(trace, dict) and trace.get("format") == TRACE_FORMAT and trace.get("target") == target
            and (trace.get("isa") or "") == isa and trace.get("steps")
            and (trace.get("problem") or {}).get("family") == family
            and set((trace.get("problem") or {}).get("dims", {})) == set(dims))


def project_dir() -> str:
    """The project a run belongs to: the directory it was started from (where runs/ goes by default)."""
    return str(Path.cwd().resolve())


def find(library: Path, target: str, isa: str, family: str, dims: dict[str, int],
         project: str | None = None) -> dict[str, Any]:
    """--reuse auto: the library's trace of the most similar workload (ties: the faster best, then the newest),
    among those recorded from `project` (None: every project's)."""
    folder = library / target / (isa or "default")
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            trace = json.loads(path.read_text())
        except (OSError, ValueError):
            continue   # a damaged or foreign file is skipped, not fatal
        if _usable(trace, target, isa, family, dims) and project in (None, trace.get("project")):
            found.append((distance(dims, trace["problem"]["dims"]), -trace.get("recorded", 0), trace))
    if not found:
        where = f" recorded from {project} (--schedule-scope global: every project's)" if project else ""
        raise ReuseError(f"--reuse auto: the schedule library {folder} holds no trace of a {family} problem on "
                         f"{target}{f' --isa {isa}' if isa else ''}{where}; run one first, or give --reuse RUN_DIR")
    return min(found, key=lambda f: f[:2])[2]


def describe(trace: dict[str, Any], dims: dict[str, int]) -> str:
    """Which trace a run reuses, for the line it prints: the workload, its run, its steps and what they reached."""
    p, steps = trace.get("problem") or {}, trace.get("steps") or []
    reached = ""
    if trace.get("start_latency") and trace.get("best_latency"):
        reached = f", {trace['start_latency'] / trace['best_latency']:.2f}x there"
    return (f"the optimization trace of {p.get('name')} from {trace.get('run_dir', '?')} ({len(steps)} steps: "
            f"{', '.join(s['option_id'] for s in steps)}{reached}; shape distance "
            f"{distance(dims, p.get('dims') or dims):.2f})")


def from_run(run_dir: Path, target: str, isa: str, family: str, dims: dict[str, int]) -> dict[str, Any]:
    """--reuse RUN_DIR: the trace that run recorded (computed from its store if it ran before traces existed)."""
    db = Path(run_dir) / "run.db"
    if not db.is_file():
        raise ReuseError(f"--reuse {run_dir}: not a run directory (no run.db)")
    store = RunStore(db)
    try:
        trace = store.meta("schedule_trace") or trace_of(store, (store.meta("summary") or {}).get("best_id"))
    finally:
        store.close()
    if not trace:
        raise ReuseError(f"--reuse {run_dir}: that run recorded no optimization trace (its best kernel is its start)")
    if not _usable(trace, target, isa, family, dims):
        what = trace.get("problem", {})
        raise ReuseError(f"--reuse {run_dir}: its trace is for {what.get('name')} on {trace.get('target')} "
                         f"(isa {trace.get('isa') or 'default'}); this run needs a {family} problem on {target} "
                         f"(isa {isa or 'default'})")
    return trace
