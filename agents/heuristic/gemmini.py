"""Offline planner/coder/repairer for gemmini-sim GEMMs and convolutions.

An auto-tuner in the shape of the two-phase flow: the planner reads the
evaluator's feedback, scores every menu option that survived dropout by how
much the feedback says it should help, picks ONE (seeded noise keeps the N
plans of a parent diverse) and states the concrete schedule change; the coder
renders that schedule as C; the repairer falls back to a safer schedule.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, replace
from typing import Callable

from agents.heuristic.choice import choose_option, variant_of
from agents.heuristic.errors import HeuristicError
from agents.heuristic.gemmini_codegen import (DIM, ConvSchedule, GemmSchedule, Schedule, SCHEDULES, parse_schedule,
                                              reference_schedule, render)
from protocols.jobs import CodeRequest, Plan, PlanRequest, RepairRequest


# menu option id -> mutation name, per problem family (options not listed are not applicable)
OPTION_MUTATIONS = {
    "gemm": {"tile-sizes": "tile", "loop-reorder": "loop_order", "double-buffer-spad": "double_buffer",
             "double-buffer-acc": "double_buffer", "panel-reuse": "k_resident", "acc-k-reduction": "k_resident",
             "hoist-invariants": "k_resident", "software-pipeline": "prefetch", "wide-mvin": "wide_mvin",
             "cut-intrinsics": "wide_mvin", "bank-separation": "split_banks", "loop-ws": "hardware_loop",
             "loop-ws-blocks": "fsm_block"},
    "conv3x3": {"tile-sizes": "tile", "panel-reuse": "weight_resident", "hoist-invariants": "weight_resident",
                "double-buffer-spad": "double_buffer", "double-buffer-acc": "double_buffer",
                "conv-input-reuse": "input_reuse", "wide-mvin": "wide_mvin", "cut-intrinsics": "wide_mvin",
                "loop-conv-ws": "hardware_loop"},
}


def _stall(m: dict, key: str) -> float:
    return sum(share for k, share in m.get("stalls", []) if k == key)


# -- mutations: schedule -> candidate schedules, and a feedback-based score -----------------
def _gemm_candidates(name: str, s: GemmSchedule, d: dict) -> list[GemmSchedule]:
    tiles = {"ti": d["I"] // DIM, "tj": d["J"] // DIM, "tk": d["K"] // DIM}
    if name == "hardware_loop":
        return [_best_fsm_block(d)] if s.mode == "cpu" else []
    if name == "fsm_block" or (name == "tile" and s.mode == "fsm"):
        if s.mode != "fsm":
            return []
        return [replace(s, **{k: v}) for k in ("ti", "tj", "tk") for v in (getattr(s, k) * 2, getattr(s, k) // 2)
                if 1 <= v <= tiles[k]]
    if s.mode != "cpu":
        return []
    if name == "tile":
        return [replace(s, **{k: v}) for k in ("ti", "tj", "tk") for v in (getattr(s, k) * 2, getattr(s, k) // 2)
                if 1 <= v <= tiles[k]]
    if name == "k_resident":
        return [replace(s, tk=tk) for tk in _divisors(tiles["tk"]) if tk > s.tk]
    if name == "loop_order":
        return [replace(s, order="ji" if s.order == "ij" else "ij")]
    if name == "double_buffer" and not s.double_buffer:
        return [replace(s, double_buffer=True, **shrink) for shrink in ({}, {"tk": max(1, s.tk // 2)},
                                                                        {"ti": max(1, s.ti // 2)})]
    if name == "prefetch" and not s.prefetch:
        return [replace(s, prefetch=True, double_buffer=True)]
    if name == "wide_mvin" and not s.wide_mvin:
        return [replace(s, wide_mvin=True)]
    if name == "split_banks" and not s.split_banks:
        return [replace(s, split_banks=True), replace(s, split_banks=True, tk=max(1, s.tk // 2))]
    return []


def _conv_candidates(name: str, s: ConvSchedule, d: dict) -> list[ConvSchedule]:
    if name == "hardware_loop":
        return [ConvSchedule(mode="fsm", weight_resident=True)] if s.mode == "cpu" else []
    if s.mode != "cpu":
        return []
    if name == "weight_resident" and not s.weight_resident:
        return [replace(s, weight_resident=True)]
    if not s.weight_resident:
        return []
    if name == "tile":
        return [replace(s, kt=k) for k in (s.kt * 2, s.kt // 2) if k >= 1]
    if name == "input_reuse" and not s.input_reuse:
        return [replace(s, input_reuse=True)]
    if name == "double_buffer" and not s.double_buffer:
        return [replace(s, double_buffer=True), replace(s, double_buffer=True, input_reuse=True)]
    if name == "wide_mvin" and not s.wide_mvin:
        return [replace(s, wide_mvin=True)]
    return []


def _score(name: str, m: dict) -> float:
    """How strongly the feedback points at this kind of change (higher: try first)."""
    traffic = math.log2(max(1.0, m.get("traffic_ratio", 1.0)))
    cpu = m.get("cpu_issue_busy", 0.0)
    waits = _stall(m, "wait_ex_ld") + _stall(m, "wait_ld_ex")
    computes = max(1, m.get("instructions", {}).get("compute", 1))
    scores: dict[str, Callable[[], float]] = {
        "hardware_loop": lambda: 1.0 + 2.0 * cpu,
        "fsm_block": lambda: 0.5 + 3.0 * (1.0 - m.get("roofline_fraction", 0.0)),
        "tile": lambda: 0.3 + 0.25 * traffic,
        "k_resident": lambda: 0.3 + 0.25 * traffic,
        "weight_resident": lambda: 0.5 + 0.3 * traffic,
        "input_reuse": lambda: 0.4 + 0.2 * traffic,
        "loop_order": lambda: 0.25,
        "double_buffer": lambda: 0.2 + 2.0 * waits,
        "prefetch": lambda: 0.2 + 2.0 * _stall(m, "wait_ex_ld"),
        "wide_mvin": lambda: 0.2 + cpu * m.get("instructions", {}).get("mvin", 0) / computes,
        "split_banks": lambda: 0.1 + 2.0 * m.get("bank_conflicts", 0) / computes,
    }
    return scores[name]()


def _best_fsm_block(d: dict) -> GemmSchedule:
    """Block that balances loads against computes within the loop FSM's half of the memories."""
    ni, nj, nk = d["I"] // DIM, d["J"] // DIM, d["K"] // DIM
    best, best_cost = GemmSchedule(mode="fsm"), float("inf")
    for ti in _divisors(ni):
        for tj in _divisors(nj):
            for tk in _divisors(nk):
                s = GemmSchedule(mode="fsm", ti=ti, tj=tj, tk=tk)
                if not s.fits(d):
                    continue
                # in tile times (a tile computed, or loaded at full DMA rate): each call adds some pipeline
                # time, and among equally fast blocks the one that moves less data wins
                calls = (ni // ti) * (nj // tj) * (nk // tk)
                cost = calls * (max(ti * tj * tk, tk * (ti + tj)) + 4) * 16 + calls * tk * (ti + tj)
                if cost < best_cost or cost == best_cost and tk > best.tk:
                    best, best_cost = s, cost
    return best


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _describe(s: Schedule) -> str:
    if isinstance(s, GemmSchedule):
        if s.mode == "fsm":
            return f"gemmini_loop_ws blocks of {s.ti}x{s.tj}x{s.tk} tiles (I x J x K)"
        flags = [f for f in ("double_buffer", "prefetch", "wide_mvin", "split_banks") if getattr(s, f)]
        return (f"CPU-issued blocks of {s.ti}x{s.tj}x{s.tk} tiles, {s.order} block order"
                + (", " + ", ".join(flags) if flags else ""))
    if s.mode == "fsm":
        return "Gemmini's tiled_conv_auto on the gemmini_loop_conv_ws hardware loop"
    if not s.weight_resident:
        return "per-tap reloads of input and weight tiles (naive)"
    flags = [f for f in ("input_reuse", "double_buffer", "wide_mvin") if getattr(s, f)]
    return f"resident weights for {s.kt * DIM} output channels" + (", " + ", ".join(flags) if flags else "")


class GemminiHeuristic:
    """Planner, coder and repairer for the gemmini-sim GEMM and conv3x3 families."""

    def _schedule_of(self, code: str, family: str) -> tuple[Schedule, bool]:
        if family not in SCHEDULES:
            raise HeuristicError(f"the heuristic agent handles gemmini-sim GEMM and conv3x3 problems, "
                                 f"not the {family!r} family")
        parsed = parse_schedule(code, family)
        return (parsed, True) if parsed else (reference_schedule(code, family), False)

    def _candidates(self, mutation: str, s: Schedule, dims: dict) -> list[Schedule]:
        gen = _gemm_candidates if isinstance(s, GemmSchedule) else _conv_candidates
        return [c for c in gen(mutation, s, dims) if c != s and c.fits(dims)]

    def plan(self, req: PlanRequest) -> Plan:
        problem, parent = req.problem, req.parent
        family, dims = problem.family, problem.dims
        current, own = self._schedule_of(parent.code, family)
        metrics = parent.metrics
        opt, mutation, cands = choose_option(
            req.menu, req.seed, OPTION_MUTATIONS[family].get, lambda m: self._candidates(m, current, dims),
            lambda m: _score(m, metrics), _describe(current))
        chosen = cands[0]
        origin = "" if own else " (the parent was not generated by this agent; treating it as its reference schedule)"
        text = (f"Apply '{opt.title}'. Change the schedule from {_describe(current)} to {_describe(chosen)}"
                f"{origin}. Feedback: {metrics.get('utilization', 0):.1%} utilization, "
                f"{metrics.get('roofline_fraction', 0):.1%} of roofline.")
        return Plan(text=text, option_id=opt.id,
                    params={"mutation": mutation, "schedule": asdict(chosen), "variants": [asdict(c) for c in cands]})

    def code(self, req: CodeRequest) -> str:
        problem, plan = req.problem, req.plan
        family, dims = problem.family, problem.dims
        params = plan.params
        cls = SCHEDULES.get(family)
        if cls is None:
            raise HeuristicError(f"the heuristic agent cannot write {family!r} kernels")
        pick = variant_of(params, req.seed)
        if pick is not None:
            try:
                schedule = cls(**pick)
            except TypeError as exc:
                raise HeuristicError(f"plan carries an invalid schedule: {exc}") from None
        else:  # a plan written by another model: apply its menu option ourselves
            mutation = OPTION_MUTATIONS[family].get(plan.option_id)
            current, _ = self._schedule_of(req.parent.code, family)
            cands = self._candidates(mutation, current, dims) if mutation else []
            if not cands:
                raise HeuristicError(f"cannot implement a plan for option {plan.option_id!r} on "
                                     f"{_describe(current)}")
            schedule = random.Random(req.seed).choice(cands)
        if not schedule.fits(dims):
            raise HeuristicError(f"schedule {_describe(schedule)} does not fit problem {problem.name}")
        return render(schedule, dims)

    def repair(self, req: RepairRequest) -> str:
        family, dims = req.problem.family, req.problem.dims
        schedule = parse_schedule(req.code, family)
        if schedule is None:
            raise HeuristicError("the heuristic repairer only repairs kernels generated from its own schedules "
                                 "(no autocomp-schedule header in this kernel)")
        for flag in ("prefetch", "double_buffer", "split_banks", "wide_mvin", "input_reuse"):
            if getattr(schedule, flag, False):
                safer = replace(schedule, **{flag: False})
                if safer.fits(dims):
                    return render(safer, dims)
        raise HeuristicError(f"no safer variant of {_describe(schedule)} left to try")
