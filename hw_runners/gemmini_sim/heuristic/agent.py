"""Offline planner/coder/repairer for gemmini-sim GEMMs and convolutions.

An auto-tuner in the shape of the two-phase flow: the planner reads the evaluator's feedback, scores
every menu option that survived dropout by the speedup its cost model predicts for the option's best
schedule and by how much the feedback points at it (the binding stall), picks ONE (seeded noise keeps the
N plans of a parent diverse) and states the concrete schedule change; the coder renders that schedule as
C; the repairer falls back to a safer schedule. Schedules issue fine-grained instructions from the CPU
(gemm.py, conv.py); the loop FSMs only when the menu offers them.
"""
from __future__ import annotations

import random
from dataclasses import asdict, replace

from autocomp_zmq.hw_runners.toolkit.choice import choose_option, variant_of, variants_text
from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.codegen import (DIM, GemmSchedule, Schedule, SCHEDULES, parse_schedule,
                                              reference_schedule, render)
from autocomp_zmq.hw_runners.gemmini_sim.heuristic.moves import OPTION_MUTATIONS, adapt, candidates, predict, score
from autocomp_zmq.protocols.jobs import CodeRequest, Plan, PlanRequest, ProblemRef, RepairRequest

__all__ = ["GemminiHeuristic", "OPTION_MUTATIONS"]

_FLAGS = {"double_buffer": "double-buffered scratchpad", "double_acc": "double-buffered accumulator",
          "prefetch": "next block's mvins spread over the computes", "spread_stores": "mvouts spread over the "
          "next block", "wide_mvin": "64-column mvins", "wide_mvout": "64-column mvouts",
          "split_banks": "operands in separate banks", "weight_reuse": "weights reused with compute_accumulated",
          "weight_resident": "resident weights", "input_reuse": "input rows loaded once per block"}


def _describe(s: Schedule) -> str:
    flags = [text for flag, text in _FLAGS.items() if getattr(s, flag, False)]
    extra = (", " + ", ".join(flags)) if flags else ""
    if isinstance(s, GemmSchedule):
        if s.mode == "fsm":
            return f"gemmini_loop_ws blocks of {s.ti}x{s.tj}x{s.tk} tiles (I x J x K)"
        return f"CPU-issued blocks of {s.ti}x{s.tj}x{s.tk} tiles, {s.order} block order" + extra
    if s.mode == "fsm":
        return "Gemmini's tiled_conv_auto on the gemmini_loop_conv_ws hardware loop"
    return (f"CPU-issued blocks of {s.rows} output row(s) x {s.kt * DIM} output channels" + extra)


_NEEDS_DIMS = {"gemm": ("I", "J", "K"), "conv3x3": ("P", "C")}
_NEEDS = {"gemm": "none of its GEMM schedules fits",
          "conv3x3": "its CPU-issued conv schedules need C to be a multiple of 16 (under --isa full it calls "
                     "tiled_conv_auto for any C)"}


class GemminiHeuristic:
    """Planner, coder and repairer for the gemmini-sim GEMM and conv3x3 families."""

    @staticmethod
    def supports(problem: ProblemRef) -> str | None:
        """None if the heuristic can optimize the problem, else why not (a family it does not know, sizes its
        schedules do not fit)."""
        cls = SCHEDULES.get(problem.family)
        if problem.family.startswith("tinympc_"):
            return (f"{problem.name} is one of TinyMPC's ADMM workloads (fp32-4x4); the heuristic has schedules "
                    f"only for the int8 {' and '.join(SCHEDULES)} families")
        if cls is None:
            return (f"the heuristic knows the gemmini-sim {' and '.join(SCHEDULES)} families; {problem.name} "
                    f"declares {'no family' if problem.family.startswith('own:') else repr(problem.family)}")
        if not set(_NEEDS_DIMS[problem.family]) <= set(problem.dims):
            return f"{problem.name} does not give the {problem.family} family's sizes"
        library = problem.isa != "fine" and cls(mode="fsm").fits(problem.dims)   # the loop FSMs, the library
        if not cls().fits(problem.dims) and not library:
            return _NEEDS[problem.family] + f"; {problem.name} has " + \
                ", ".join(f"{k}={v}" for k, v in problem.dims.items())
        return None

    def _schedule_of(self, code: str, family: str) -> tuple[Schedule, bool]:
        if family not in SCHEDULES:
            raise HeuristicError(f"the heuristic agent handles gemmini-sim GEMM and conv3x3 problems, "
                                 f"not the {family!r} family")
        parsed = parse_schedule(code, family)
        return (parsed, True) if parsed else (reference_schedule(code, family), False)

    def plan(self, req: PlanRequest) -> Plan:
        problem, parent = req.problem, req.parent
        family, dims = problem.family, problem.dims
        current, own = self._schedule_of(parent.code, family)
        metrics = parent.metrics
        if req.prior is not None:
            reused = self._reuse(req, current, own)
            if reused is not None:
                return reused
        found: dict[str, list[Schedule]] = {}

        def cands_for(mutation: str) -> list[Schedule]:
            if mutation not in found:
                found[mutation] = candidates(mutation, current, dims, own)
            return list(found[mutation])

        opt, mutation, cands = choose_option(
            req.menu, req.seed, OPTION_MUTATIONS[family].get, cands_for,
            lambda m: score(m, current, found[m], dims, metrics), _describe(current))
        cands = sorted(cands, key=lambda c: predict(c, dims))   # the model's best first, the rest variants
        return self._plan(opt.id, opt.title, mutation, current, own, cands, dims, metrics)

    def _plan(self, option_id: str, title: str, mutation: str, current: Schedule, own: bool,
              cands: list[Schedule], dims: dict, metrics: dict, note: str = "") -> Plan:
        chosen = cands[0]
        origin = "" if own else " (the parent was not generated by this agent; treating it as its reference schedule)"
        gain = predict(current, dims) / max(1.0, predict(chosen, dims))
        stalls = metrics.get("stalls") or []
        binding = f"; main stall {stalls[0][0]} ({stalls[0][1]:.0%} of cycles)" if stalls else ""
        text = (f"{note}Apply '{title}'. Change the schedule from {_describe(current)} to {_describe(chosen)}"
                f"{origin}. Feedback: {metrics.get('utilization', 0):.1%} utilization, "
                f"{metrics.get('roofline_fraction', 0):.1%} of roofline, CPU issuing "
                f"{metrics.get('cpu_issue_busy', 0):.0%} of the time{binding}; the cost model expects {gain:.2f}x."
                + variants_text([_describe(c) for c in cands]))
        return Plan(text=text, option_id=option_id,
                    params={"mutation": mutation, "schedule": asdict(chosen), "variants": [asdict(c) for c in cands]})

    def _reuse(self, req: PlanRequest, current: Schedule, own: bool) -> Plan | None:
        """Adapt a plan recorded on a similar workload: its schedule (and its variants) fitted to this shape,
        else its option's mutation applied to the current schedule. None when neither changes anything."""
        prior, family, dims = req.prior, req.problem.family, req.problem.dims
        option = next((o for o in req.menu if o.id == prior.option_id), None)
        if option is None:
            return None
        mutation = prior.params.get("mutation") or OPTION_MUTATIONS[family].get(prior.option_id)
        where = req.prior_problem.name if req.prior_problem is not None else "a similar workload"
        note = f"Reusing the plan recorded on {where} (option {prior.option_id}). "
        applied = sorted(candidates(mutation, current, dims, own), key=lambda c: predict(c, dims)) if mutation else []
        recorded = [prior.params.get("schedule")] + list(prior.params.get("variants") or [])
        fitted = [f for f in (self._fit(r, family, dims, req.problem.isa) for r in recorded if isinstance(r, dict))
                  if f is not None and f != current]
        if fitted and fitted[0] == self._fit(recorded[0], family, dims, req.problem.isa):
            cands = list(dict.fromkeys(fitted + applied))[:4]
            return self._plan(option.id, option.title, mutation or "reuse", current, own, cands, dims,
                              req.parent.metrics, note + "Its schedule, fitted to this shape: ")
        if not applied:
            return None
        return self._plan(option.id, option.title, mutation, current, own, applied, dims, req.parent.metrics,
                          note + "Its change, applied to this kernel: ")

    @staticmethod
    def _fit(recorded, family: str, dims: dict, isa: str) -> Schedule | None:
        """A recorded schedule (a dict) fitted to these dims, or None if it cannot be used here."""
        if not isinstance(recorded, dict):
            return None
        cls = SCHEDULES[family]
        try:
            fitted = adapt(cls(**{k: v for k, v in recorded.items() if k in cls.__dataclass_fields__}), dims)
        except (TypeError, ValueError, KeyError):
            return None
        if fitted.mode == "fsm" and isa == "fine":   # recorded where the loop FSMs were allowed
            return None
        return fitted if fitted.fits(dims) else None

    def code(self, req: CodeRequest) -> str:
        problem, plan = req.problem, req.plan
        family, dims = problem.family, problem.dims
        cls = SCHEDULES.get(family)
        if cls is None:
            raise HeuristicError(f"the heuristic agent cannot write {family!r} kernels")
        pick = variant_of(plan.params, req.seed)
        if pick is not None:
            try:
                schedule = cls(**pick)
            except TypeError as exc:
                raise HeuristicError(f"plan carries an invalid schedule: {exc}") from None
        else:  # a plan written by another model: apply its menu option ourselves
            mutation = OPTION_MUTATIONS[family].get(plan.option_id)
            current, own = self._schedule_of(req.parent.code, family)
            cands = candidates(mutation, current, dims, own) if mutation else []
            if not cands:
                raise HeuristicError(f"cannot implement a plan for option {plan.option_id!r} on "
                                     f"{_describe(current)}")
            schedule = cands[0] if req.seed % 2 == 0 else random.Random(req.seed).choice(cands)
        if not schedule.fits(dims):
            raise HeuristicError(f"schedule {_describe(schedule)} does not fit problem {problem.name}")
        return render(schedule, dims)

    def repair(self, req: RepairRequest) -> str:
        family, dims = req.problem.family, req.problem.dims
        schedule = parse_schedule(req.code, family)
        if schedule is None:
            raise HeuristicError("the heuristic repairer only repairs kernels generated from its own schedules "
                                 "(no autocomp-schedule header in this kernel)")
        for flag in ("prefetch", "spread_stores", "double_buffer", "double_acc", "split_banks", "weight_reuse",
                     "wide_mvout", "wide_mvin", "input_reuse"):
            if getattr(schedule, flag, False):
                safer = replace(schedule, **{flag: False})
                if safer.fits(dims):
                    return render(safer, dims)
        raise HeuristicError(f"no safer variant of {_describe(schedule)} left to try")
