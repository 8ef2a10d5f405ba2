"""One evaluation of the cuda target, from the evaluator's side (target.py calls `judge`):

  1. seeds drawn fresh: the models' weights, the hidden input sets (besides the public ones; one of them with
     torch.rand's draws signed, where the problem allows it), and every timed run's inputs;
  2. the reference child (trusted code only) computes every set's outputs and stays up to compare and to time;
  3. the candidate child imports kernel.py, runs every set and hands the outputs over as sealed memory; each set is
     compared in full by the reference child before the next runs;
  4. the timed runs, one window of the evaluator's clock each, the reference's run k then the candidate's run k on
     the same inputs: a run's seed is told when its window opens, its outputs are received sealed when it closes, and
     the candidate's are compared in full with the reference's same run before the next run opens;
  5. the verdict: latency the median of the runs' event-timed brackets, accepted only if the runs' steps agree with
     their windows and with the reference's same runs, and (on a known GPU) with its peaks (clock.py). Runs whose
     steps disagree are timed once more, on fresh inputs, before anything is concluded: a busy machine can slow a
     kernel's every run now and then, hidden work slows them every time (the second set's verdict stands).

What remains trusted, and why: this process, its clock and the sandbox; the reference child (the problem's own code,
never the candidate's); the kernel's guarantee that sealed memory cannot change. Within the candidate's process nothing
is: its reported times are believed only as far as the windows bound them. Hidden work smaller than the slack of
those checks (clock.SLACK) is what a candidate could still move out of its bracket."""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from autocomp_zmq.hw_runners.base import EvalResult
from autocomp_zmq.hw_runners.cuda import clock
from autocomp_zmq.hw_runners.cuda.session import Child, Conversation, Failed, Hangup, close_all, start


class Wrong(Exception):
    """The reference child found the candidate's outputs wrong: the message says where and how."""


@dataclass
class Plan:
    """What one evaluation draws and asks of its children."""
    job: dict
    seeds: list[int]
    warmup: int
    iters: int
    draw: Callable[[], int]            # more seeds, for a second set of timed runs


def plan(spec, opts) -> Plan:
    rng = np.random.default_rng(opts.input_seed if opts.input_seed is not None else secrets.randbits(63))
    draw = lambda: int(rng.integers(1 << 30, 1 << 31))  # noqa: E731  (apart from the public seeds)
    sets = {f"public{i}": {"seed": s} for i, s in enumerate(opts.public_seeds)}
    sets.update({f"hidden{i}": {"seed": draw()} for i in range(opts.hidden_sets)})
    for variant in opts.variants:
        sets[f"hidden-{variant}"] = {"seed": draw(), "variant": variant}
    job = {"device": opts.device, "init_seed": draw(), "sets": sets, "require_graph": opts.require_graph,
           "chunk_bytes": opts.chunk_bytes, "atol": spec.atol, "rtol": spec.rtol,
           "l2_flush_bytes": int(opts.l2_flush_bytes or 256 << 20)}
    return Plan(job, [draw() for _ in range(opts.warmup + opts.iters)], opts.warmup, opts.iters, draw)


def one_run(child: Conversation, k: int, seed: int, keep: bool) -> tuple[clock.TimedRun, dict, list[int]]:
    """Open run k of `child` (telling it the seed), and close it when its report arrives: (the run on the evaluator's
    clock and as the child reports it, the report, the outputs' descriptors)."""
    opened = child.send({"run": k, "seed": seed, "keep": keep})
    report, fds = child.expect("done")
    steps = clock.parse_steps(report.get("regions"))
    if report.get("done") != k or steps is None or bool(fds) != (keep and bool(report.get("outputs"))):
        close_all(fds)
        raise Hangup(f"answered timed run {k} with a report the protocol does not allow")
    return clock.TimedRun((child.arrived - opened) * 1e3, steps), report, fds


def ask(reference: Conversation, message: dict, fds: list[int]) -> dict:
    """Have the reference child compare handed-over outputs (descriptors passed on, then closed here)."""
    try:
        reference.send(message, fds)
    finally:
        close_all(fds)
    answer, _ = reference.expect("compared")
    return answer


class Evaluation:
    """One evaluation's children and what they reported (see the module docstring)."""

    def __init__(self, spec, opts, make_child: Callable[[Path], Child], work: Path, code: str) -> None:
        self.spec, self.opts, self.make_child, self.work, self.code = spec, opts, make_child, work, code
        self.plan = plan(spec, opts)
        # the CPU check runs the problem at its `small` sizes, written into the reference's source
        self.reference_source = spec.reference_source(small=opts.device == "cpu")
        self.worst = 0.0
        self.reference: Conversation | None = None
        self.candidate: Conversation | None = None

    # -- the children -------------------------------------------------------------------------------------------
    def start_reference(self) -> dict:
        """Start the reference child and have it compute the input sets. Returns what it said."""
        ref = self.reference = start(self.make_child(self.work / "reference"), self.reference_source,
                                     "reference_run.py", self.plan.job)
        sets, _ = ref.expect("sets")
        ready, _ = ref.expect("ready")
        runs_bytes = sum(int((sets.get("bytes") or {}).get(k) or 0) for k in ("inputs", "outputs"))
        iters = max(5, min(self.plan.iters, self.opts.timed_output_budget // max(runs_bytes, 1)))
        self.plan.seeds = self.plan.seeds[:self.plan.warmup + iters]
        return {"sets": sets, "ready": ready}

    def run_candidate(self, used: dict) -> dict:
        """Start the candidate child, take it through the input sets, then through the timed runs, each right after the
        reference's same run (Wrong, Failed or Hangup when it does not get through)."""
        cand = self.candidate = start(self.make_child(self.work / "candidate"), self.reference_source,
                                      "candidate_run.py", {**self.plan.job, "sets": used}, {"kernel.py": self.code})
        for name, s in used.items():
            message, fds = cand.expect("set")
            if message.get("set") != name:
                close_all(fds)
                raise Hangup(f"handed over set {message.get('set')!r} where the protocol expects {name!r}")
            self.check(ask(self.reference, {"op": "compare_set", "set": name, "outputs": message.get("outputs")}, fds),
                       f"wrong result on input set {name} ({'public' if name.startswith('public') else 'drawn fresh'}"
                       + (f", {s['variant']} inputs" if s.get("variant") else "") + ")")
            cand.send({"next": True})
        ready, _ = cand.expect("ready")
        ours, theirs = self.timed_runs(list(enumerate(self.plan.seeds)), self.plan.warmup)
        first, _ = clock.doubt(ours, theirs, clock.slack_of(self.opts))
        if first:                      # the machine's load, or work moved out of the bracket: time a second set
            n = len(self.plan.seeds)
            ours, theirs = self.timed_runs([(n + i, self.plan.draw()) for i in range(n - self.plan.warmup)], 0)
        cand.send({"stop": True})
        finished, _ = cand.expect("finished", timeout=60)
        return {"ready": ready, "runs": ours, "reference_runs": theirs, "finished": finished, "retimed": first}

    def timed_runs(self, seeds: list[tuple[int, int]], warmup: int) -> tuple[list, list]:
        """The candidate's and the reference's timed runs (k, seed), each compared; the first `warmup` not kept."""
        ours, theirs = [], []
        for i, (k, seed) in enumerate(seeds):
            keep = i >= warmup
            ref_run, _, ref_fds = one_run(self.reference, k, seed, keep)
            close_all(ref_fds)
            run, report, fds = one_run(self.candidate, k, seed, keep)
            if keep:
                theirs.append(ref_run)
                ours.append(run)
                self.check(ask(self.reference, {"op": "compare_run", "outputs": report.get("outputs")}, fds),
                           f"wrong result in timed run {i - warmup} (its inputs were made only when the run began)")
        return ours, theirs

    def check(self, answer: dict, where: str) -> None:
        self.worst = max(self.worst, float(answer.get("max_abs_err") or 0.0))
        if not answer.get("compared"):
            raise Wrong(f"{where}: {answer.get('error')}")

    def common(self) -> dict:
        """The candidate's output and sandbox notes, which every result carries (after it was stopped)."""
        c = self.candidate
        return dict(stdout=c.stdout if c else "", stderr=c.stderr if c else "",
                    sandbox=c.outcome.notes if c and c.outcome else [], latency_unit="us")

    def close(self) -> None:
        for child in (self.candidate, self.reference):
            if child is not None:
                child.stop()


def judge(spec, opts, make_child: Callable[[Path], Child], work: Path, code: str,
          verdict: Callable[[Evaluation, dict, dict], EvalResult]) -> EvalResult:
    """Run one evaluation; `verdict(evaluation, reference's report, candidate's report)` turns a candidate that got
    through into the result."""
    ev = Evaluation(spec, opts, make_child, work, code)
    try:
        try:
            ref = ev.start_reference()
        except (Hangup, Failed) as exc:
            ref = ev.reference
            why = exc.report.get("error") if isinstance(exc, Failed) else \
                f"it {ref.wait(1.0).describe(ref.child.limits)}: {ref.stderr[-1500:]}"
            return EvalResult.failure("setup", f"the reference of problem {spec.name} failed: {why}",
                                      latency_unit="us")
        dropped = ref["sets"].get("dropped") or {}
        used = {k: v for k, v in ev.plan.job["sets"].items() if k not in dropped}
        try:
            cand = ev.run_candidate(used)
        except Wrong as exc:
            ev.candidate.stop()
            return EvalResult.failure("wrong_result", str(exc), **ev.common())
        except Failed as exc:
            ev.candidate.stop()
            return exc.result(ev.candidate.child.dir, ev.common())
        except Hangup as exc:
            ev.candidate.wait(1.0)          # a child that hung up because it is ending: let it end, then say how
            if not ev.reference.alive():
                ref = ev.reference
                how = ref.stop().describe(ref.child.limits)
                return EvalResult.failure("setup", f"the reference of problem {spec.name} {how} during the evaluation"
                                          + (f":\n{ref.stderr[-1500:]}" if ref.stderr.strip() else ""),
                                          latency_unit="us")
            return ev.candidate.ended(str(exc), ev.common())
        ev.candidate.stop()
        return verdict(ev, ref, {**cand, "used": used, "dropped": dropped})
    finally:
        ev.close()
