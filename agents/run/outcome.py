"""The end of a run: its summary, a loud verdict when the models produced nothing, and its results on
disk (the best kernel and best.json written atomically, or everything rescued when the run directory vanished)."""
from __future__ import annotations

import json
from pathlib import Path

from autocomp_zmq.agents.console import duration_text
from autocomp_zmq.agents.engine.coordinator import Coordinator
from autocomp_zmq.agents.engine.failures import KIND_WORDS, is_noop, reason_of
from autocomp_zmq.agents.engine.policy import SearchPolicy
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.rundir import fallback_dir, rescue_store, write_atomic
from autocomp_zmq.agents.store import RunStore, call_billing, model_job_outcomes, plan_choices
from autocomp_zmq.agents.store import failed_jobs as failed_job_rows


def summarize(cfg: RunConfig, search: SearchPolicy, coord: Coordinator, run_dir: Path, interrupted: bool) -> dict:
    s = search.summary()
    summary = {"run_dir": str(run_dir), "problem": cfg.task.problem, "target": cfg.task.target,
               "models": cfg.models.model, "code_models": cfg.models.code_model or cfg.models.model,
               "seed": cfg.search.seed,
               "stop_reason": "interrupted" if interrupted else s.stop_reason,
               "iterations": s.iteration, "evaluations": s.evaluations,
               "replayed_results": s.replayed_results, "requeued_jobs": coord.stats.requeued,
               "lost_jobs": coord.stats.lost, "duplicate_results": coord.stats.duplicates,
               "failed_jobs": failed_jobs(coord), "failures": coord.failures.as_dict(),
               # from the store: a resumed run counts its earlier sessions' too, as `show` does
               "noop_proposals": sum(is_noop(error) for _, error in failed_job_rows(coord.store.db)),
               "duration_s": duration_s(coord),
               "cost_usd": round(coord.spent, 6), "cost_by_model": cost_by_model(coord.spent_by),
               "plan_choices": plan_choices(coord.store.db),
               "model_calls": {billing: {"calls": n, "usd": round(usd, 6)}
                               for billing, (n, usd) in sorted(call_billing(coord.store.db).items())},
               "latency_unit": s.latency_unit, "isa": cfg.task.isa,
               "full_checks": s.full_checks, "full_check_failures": s.full_check_failures,
               "full_check_s": round(s.full_check_s, 3)}
    if s.baseline and s.best:
        summary.update(baseline_latency=s.baseline.latency, best_latency=s.best.latency, speedup=s.speedup,
                       best_id=s.best.id, best_utilization=s.best.utilization,
                       best_roofline=s.best.roofline_fraction, beam=[[k.id, k.latency] for k in s.frontier])
        if s.best.upper_bound:
            summary["best_upper_bound"] = s.best.upper_bound
    verdict = model_verdict(coord.store, produced=s.produced)
    summary.update(verdict)
    return summary


def end_line(summary: dict) -> str:
    """How the run ended, in one line: a normal finish is not a "stop", and an interrupted run can go on."""
    reason, evals = summary["stop_reason"], summary["evaluations"]
    done = f"{evals} evaluation{'' if evals == 1 else 's'} in {duration_text(summary.get('duration_s'))}"
    iterations = summary.get("iterations", 0)
    if reason.startswith("finished"):
        return f"Finished: {iterations} iteration{'' if iterations == 1 else 's'}, {done}."
    if reason == "interrupted":
        return f"Interrupted in iteration {iterations} after {done}; continue with --resume {summary['run_dir']}"
    return f"Stopped: {reason}; {iterations} iteration{'' if iterations == 1 else 's'}, {done}."


def failed_jobs(coord: Coordinator) -> dict[str, int]:
    """Jobs answered with a failure, per kind; proposals of nothing are not failures (agents/engine/failures.py)."""
    counts = {kind: n - coord.failures.noops.get(kind, 0) for kind, n in coord.stats.failed.items()}
    return {kind: n for kind, n in counts.items() if n}


def duration_s(coord: Coordinator) -> float:
    """Wall time of the run: this session's, plus what a resumed run's earlier sessions took."""
    before = (coord.store.meta("summary") or {}).get("duration_s") or 0.0
    return round(before + coord.clock() - coord.stats.started, 1)


def cost_by_model(spent_by: dict[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    """{model: {role: USD}} of the calls a run paid for (offline models, which cost nothing, left out)."""
    out: dict[str, dict[str, float]] = {}
    for (model, role), usd in sorted(spent_by.items()):
        if usd:
            out.setdefault(model, {})[role] = round(usd, 6)
    return out


def model_verdict(store: RunStore, produced: int) -> dict:
    """{"error": ...} when the models produced no candidate at all because their calls failed;
    {"warning": ...} when most of their calls failed; {} otherwise."""
    rows = model_job_outcomes(store.db)
    # jobs never run (cost cap) are not failures of the models, and nor are proposals of nothing
    rows = [r for r in rows if r[2] or not ((r[3] or "").startswith("not run:") or is_noop(r[3]))]
    failed = [(kind, model, reason_of(error, model)) for kind, model, ok, error in rows if not ok]
    if not failed:
        return {}
    totals: dict[tuple, int] = {}
    for kind, model, _, _ in rows:
        totals[(kind, model)] = totals.get((kind, model), 0) + 1
    groups: dict[tuple, int] = {}
    for key in failed:
        groups[key] = groups.get(key, 0) + 1
    parts = []
    for (kind, model, reason), n in sorted(groups.items(), key=lambda kv: -kv[1])[:3]:
        every = "all " if n == totals[(kind, model)] else ""
        parts.append(f"{every}{n} {KIND_WORDS[kind]} calls to {model} failed: {reason}")
    text = "; ".join(parts)
    if produced == 0:
        return {"error": f"the models produced no candidate: {text}"}
    if len(failed) * 2 > len(rows):
        return {"warning": f"{len(failed)} of {len(rows)} model jobs failed: {text}"}
    return {}


def save_results(run_dir: Path, store: RunStore, summary: dict, best_code: str | None,
                 best_name: str = "best.c") -> dict:
    """Store the summary and write the best kernel (best_name: best.c, best.py, ...) and best.json atomically; if the run directory is gone or
    unwritable, rescue everything (the store included) to a fallback directory and say where."""
    if best_code is not None:
        summary["best_file"] = best_name
    store.set_meta("summary", summary)
    best_json = json.dumps({k: v for k, v in summary.items() if k != "beam"}, indent=1)
    try:
        if not (run_dir / "run.db").exists():
            raise FileNotFoundError(f"{run_dir / 'run.db'} was removed during the run")
        write_atomic(run_dir / "best.json", best_json)
        if best_code is not None:
            write_atomic(run_dir / best_name, best_code)
    except OSError as exc:
        rescue = fallback_dir(run_dir)
        summary["rescued_to"] = str(rescue)
        summary["rescue_reason"] = str(exc)
        best_json = json.dumps({k: v for k, v in summary.items() if k != "beam"}, indent=1)
        (rescue / "best.json").write_text(best_json)
        if best_code is not None:
            (rescue / best_name).write_text(best_code)
        store.set_meta("summary", summary)
        rescue_store(store.db, rescue / "run.db")
    finally:
        try:
            store.checkpoint()      # run.db alone then holds the whole run (a copy of it is complete)
        finally:
            store.close()
    return summary
