"""--continue-from: a run that starts where another run ended. The other run's final beam, read from its store
(read-only), becomes this run's first parents, each evaluated again by this run's evaluators: nothing the other run
measured is trusted. Only a run of the same target, problem (and problem file) and ISA profile can be continued.
What was taken is stored with the new run (meta continued_from), so that resuming it never reads the other run."""
from __future__ import annotations

import inspect
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.runstart import RunError
from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.agents.store.reading import damage_of, final_frontier, meta_of, open_read
from autocomp_zmq.protocols.envelope import convert
from autocomp_zmq.protocols.jobs import ProblemRef


def locate(spec: str, runs_dir: Path) -> Path:
    """RUN_DIR, or a run's id: the folder of that name under runs_dir, or the one whose store has that run id."""
    for path in (Path(spec), runs_dir / spec):
        if (path / "run.db").is_file():
            return path.absolute()
    for folder in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else ():
        if (folder / "run.db").is_file() and _read(folder, lambda db: meta_of(db, "run_id")) == spec:
            return folder.absolute()
    raise RunError(f"--continue-from {spec}: not a run directory (no run.db there) nor the name or id of a run "
                   f"under {runs_dir}/")


def _read(run_dir: Path, query) -> Any:
    try:
        db = open_read(run_dir / "run.db")
    except sqlite3.Error:
        return None
    try:
        return query(db)
    finally:
        db.close()


def _what(p: ProblemRef) -> str:
    return f"{p.name} on {p.target} (ISA profile {p.isa or 'default'}" + \
        (f", problem file {p.definition.path})" if p.definition else ")")


def _same(theirs: ProblemRef, ours: ProblemRef) -> bool:
    digest = lambda p: p.definition.digest if p.definition else None   # noqa: E731
    return (theirs.target, theirs.name, theirs.isa, digest(theirs)) == (ours.target, ours.name, ours.isa, digest(ours))


def load(spec: str, runs_dir: Path, problem: ProblemRef) -> dict[str, Any]:
    """What this run takes from the run `spec` names: its directory and id, its starting kernel and the kernels of its
    final beam (best first). A damaged store, a run of another problem, target or ISA profile, or one that kept no
    beam yet is a RunError that says so."""
    run_dir = locate(spec, runs_dir)
    damage = damage_of(run_dir / "run.db")
    if damage:
        raise RunError(f"--continue-from {run_dir}: its store is damaged ({damage})")
    stored, frontier, initial, run_id = _read(run_dir, lambda db: (
        meta_of(db, "problem"), final_frontier(db), meta_of(db, "initial_code"), meta_of(db, "run_id")))
    try:
        theirs = convert(stored, ProblemRef)
    except (msgspec.ValidationError, TypeError):
        raise RunError(f"--continue-from {run_dir}: its store records no problem (a run of an older version)") \
            from None
    if not _same(theirs, problem):
        raise RunError(f"--continue-from {run_dir}: that run optimized {_what(theirs)}, this one {_what(problem)}; "
                       "a run continues only a run of the same problem, target and ISA profile")
    if not frontier:
        raise RunError(f"--continue-from {run_dir}: that run kept no beam yet (its first iteration never finished)")
    return {"run_dir": str(run_dir), "run_id": run_id, "initial_code": initial,
            "kernels": [code for _, code in frontier], "ids": [cid for cid, _ in frontier]}


def of(cfg: RunConfig, policy: type, problem: ProblemRef, resumed: RunStore | None, runs_dir: Path) -> dict | None:
    """What the run takes from the run --continue-from names (None without it); a resumed run, what it took then."""
    if not cfg.task.continue_from:
        return None
    if "continued" not in inspect.signature(policy).parameters:
        raise RunError(f"--continue-from: the search policy {cfg.search.policy} cannot start from another run's beam")
    if resumed is not None:
        return resumed.meta("continued_from")
    return load(cfg.task.continue_from, runs_dir, problem)
