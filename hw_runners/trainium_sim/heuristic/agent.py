"""Offline planner/coder/repairer for trainium-sim: an auto-tuner in the shape of the two-phase flow.

The planner recovers the parent's schedule (from the comment the coder writes into every kernel, or the
family's starting schedule for a kernel written by someone else, such as the problem's naive.py), reads
the evaluator's feedback (engine busy shares, DMA traffic and row sizes, stalls), scores every menu option
that survived dropout and changes the schedule, picks ONE with seeded noise so the plans of one parent
differ, and states the concrete schedule change. The coder renders the chosen schedule as a complete NKI
kernel; the repairer falls back to a safer schedule. Families: every paper problem of trainium-sim
(codegen.FAMILIES), and a problem file of no family whose reference is a row-wise form (rowwise_kind.py);
anything else needs an LLM. Kernels are written in the NKI dialect of the problem's ISA
profile (its `dialect` setting in target.toml): NKI v2 for the families of codegen.BODIES_V2 only.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, replace

from autocomp_zmq.hw_runners.toolkit.choice import choose_option, variant_of, variants_text
from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.hw_runners.base import DescriptorError, UnknownIsaError, UnknownTargetError, target_info
from autocomp_zmq.hw_runners.trainium_sim.heuristic import rowwise
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import BODIES_V2, FAMILIES, from_dict, parse_schedule, render
from autocomp_zmq.hw_runners.trainium_sim.heuristic.rowwise_kind import recognise
from autocomp_zmq.protocols.jobs import CodeRequest, Plan, PlanRequest, ProblemRef, RepairRequest

COMPUTE = ("Vector", "Scalar", "GpSimd")
DMA_SETUP_US = 0.8


def _features(m: dict) -> dict[str, float]:
    """What the trainium-sim feedback says, as numbers in [0, ~3]."""
    busy = m.get("engine_busy") or {}
    latency = max(float(m.get("latency_us") or 0.0), 1e-9)
    dma_count = max(1, int((m.get("instructions") or {}).get("DMA", 1)))
    stalls = m.get("stalls") or []
    dma_wait = sum(float(s.get("us", 0)) for s in stalls if isinstance(s, dict) and s.get("waited_for") == "DMA")
    compute = [float(busy.get(e, 0.0)) for e in COMPUTE]
    # every transfer spends ~0.8 us of setup in its in-order queue (the ISA reference): many small
    # transfers make the queue, not the bytes, the limit
    setup_us = DMA_SETUP_US * int((m.get("instructions") or {}).get("DMA", 0))
    return {
        "traffic": math.log2(max(1.0, m.get("dma_bytes", 0) / max(1, m.get("compulsory_bytes", 1)))),
        "small_dma": min(1.0, m.get("dma_small_rows", 0) / dma_count),
        "dma_wait": min(1.0, dma_wait / latency),
        "imbalance": max(compute) - min(compute[:2]) if compute else 0.0,
        "vector": float(busy.get("Vector", 0.0)),
        "gap": 1.0 - float(m.get("roofline_fraction") or 0.0),
        "dma_bound": float(m.get("binding_engine") == "DMA"),
        "dma_setup": min(1.0, setup_us / latency),
    }


# how strongly the feedback points at each kind of change (higher: try first)
SCORES = {
    "max_tiles": lambda f: 0.4 + 0.5 * f["gap"],
    "tile": lambda f: 0.2,
    "hoist": lambda f: 0.4 + 0.4 * f["traffic"],
    "block": lambda f: 0.3 + 0.4 * f["traffic"],
    "order": lambda f: 0.2 + 0.1 * f["traffic"],
    "multibuf": lambda f: 0.2 + 1.5 * f["dma_wait"],
    "bufs": lambda f: 0.2 + 1.0 * f["dma_wait"],
    "prefetch": lambda f: 0.3 + 1.5 * f["dma_wait"],
    "chunk": lambda f: 0.2 + 0.8 * f["dma_wait"],
    "evict": lambda f: 0.2 + f["imbalance"],
    "engine": lambda f: 0.3 + 1.5 * f["imbalance"],
    "large_dma": lambda f: 0.2 + 1.2 * f["small_dma"] + 0.3 * f["dma_bound"] + 1.2 * f["dma_setup"],
    "fuse": lambda f: 0.5 + f["vector"],
    "norm": lambda f: 0.3 + f["vector"],
    "bcast": lambda f: 0.2,
    "method": lambda f: 0.5 + f["gap"] + f["small_dma"],
    "batch": lambda f: 0.3 + 0.5 * f["gap"],
    "merge": lambda f: 0.2 + 1.2 * f["small_dma"] + 0.3 * f["dma_bound"] + 1.2 * f["dma_setup"],
    "precision": lambda f: 0.3 + 0.8 * f["gap"],
    "skip": lambda f: 0.5 + f["gap"],
    "qt": lambda f: 0.3 + 0.3 * f["gap"],
    "pipeline": lambda f: 0.3 + 0.6 * f["gap"],
}


def _unsupported(problem: ProblemRef) -> HeuristicError:
    known = ", ".join(sorted(set(FAMILIES) - {"rowwise"}))
    return HeuristicError(f"the heuristic cannot optimize {problem.name} (family {problem.family!r}; it knows "
                          f"{known}, and problem files whose reference is a row softmax or act(x * scale + bias)); "
                          f"use an LLM model (--model ...)")


class TrainiumHeuristic:
    """Planner, coder and repairer for the trainium-sim families listed in codegen.FAMILIES."""

    def supports(self, problem: ProblemRef) -> str | None:
        """None if the heuristic can optimize the problem, else why not (in a few words)."""
        try:
            self._start(self._family(problem), problem)
        except HeuristicError as exc:
            return str(exc).split("; use an LLM")[0]
        return None

    @staticmethod
    def _dialect(problem: ProblemRef) -> str:
        """The NKI dialect the problem's ISA profile judges kernels in (v1 where the profile says none)."""
        try:
            return target_info(problem.target).isa_profile(problem.isa).setting("dialect") or "v1"
        except (UnknownTargetError, DescriptorError, UnknownIsaError) as exc:
            raise HeuristicError(f"the heuristic cannot read the ISA profile of {problem.name}: {exc}") from None

    @staticmethod
    def _key(problem: ProblemRef) -> str:
        """The schedule family of the problem: its own, or "rowwise" for a problem file of no family whose
        reference computes one of the row-wise forms (rowwise_kind.py)."""
        if problem.family in FAMILIES or problem.definition is None:
            return problem.family
        return "rowwise" if recognise(problem.definition) is not None else problem.family

    def _family(self, problem: ProblemRef):
        key = self._key(problem)
        fam = FAMILIES.get(key)
        if fam is None or (key == "rowwise" and problem.family == key):   # "rowwise" is no problem's own family
            raise _unsupported(problem)
        if key == "rowwise":
            fam = rowwise.bound(recognise(problem.definition))
        if self._dialect(problem) == "v2" and key not in BODIES_V2:
            raise HeuristicError(f"the heuristic writes family {key!r} in NKI v1 only, and --isa "
                                 f"{problem.isa} judges NKI v2 kernels (it writes NKI v2 for "
                                 f"{', '.join(sorted(BODIES_V2))}); use an LLM model (--model ...) or --isa nki1")
        missing = [k for k in fam.DIMS if not isinstance(problem.dims.get(k), int)]
        if missing:
            raise HeuristicError(f"problem {problem.name} does not declare the dims {', '.join(missing)} that the "
                                 f"heuristic's {problem.family} schedules need (problem.toml `dims`); use an LLM "
                                 f"model (--model ...)")
        return fam

    def _start(self, fam, problem: ProblemRef):
        s = fam.default(problem.dims)
        if not fam.fits(s, problem.dims):
            raise HeuristicError(f"the heuristic's {problem.family} schedules do not fit the sizes of "
                                 f"{problem.name} ({problem.dims}); use an LLM model (--model ...)")
        return s

    def _schedule_of(self, code: str, problem: ProblemRef) -> tuple[object, bool]:
        fam = self._family(problem)
        parsed = parse_schedule(code, self._key(problem))
        if parsed is not None and fam.fits(parsed, problem.dims):
            return parsed, True
        guess = getattr(fam, "guess", None)
        if guess is not None and code:
            s = guess(code, problem.dims)
            if fam.fits(s, problem.dims):
                return s, False
        return self._start(fam, problem), False

    def _candidates(self, fam, mutation: str, s, dims: dict) -> list:
        out = []
        for c in fam.candidates(mutation, s, dims):
            if c != s and c not in out and fam.fits(c, dims):
                out.append(c)
        return out

    @staticmethod
    def _extra_steps(stale: int, rng: random.Random) -> int:
        """How many changes to add to the chosen one: none while the search improves; once it stalls, a
        growing share of plans take two-step moves (three-step ones after ten stale steps), so the budget is
        not left unspent when every single change around the best kernels has been evaluated."""
        if stale <= 0 or rng.random() >= min(0.8, 0.2 * stale):
            return 0
        return 1 if stale < 10 else rng.choice((1, 2))

    def _walk(self, fam, cands: list, current, dims: dict, mutations: list[str], steps: int,
              rng: random.Random) -> list:
        """Schedules `steps` further random changes (from `mutations`) away from the candidates: new ones only."""
        out: list = []
        for c in cands[:4]:
            frontier = [c]
            for _ in range(steps):
                nxt = [x for f in frontier for mu in mutations for x in self._candidates(fam, mu, f, dims)
                       if x != current]
                if not nxt:
                    break
                rng.shuffle(nxt)
                frontier = nxt[:6]
            out += [x for x in frontier if x not in out and x not in cands and x != current]
        rng.shuffle(out)
        return out[:12]

    def plan(self, req: PlanRequest) -> Plan:
        problem, parent = req.problem, req.parent
        fam = self._family(problem)
        current, own = self._schedule_of(parent.code, problem)
        feats = _features(parent.metrics or {})
        opt, mutation, cands = choose_option(
            req.menu, req.seed, fam.OPTIONS.get, lambda m: self._candidates(fam, m, current, problem.dims),
            lambda m: SCORES[m](feats), fam.describe(current))
        steps = self._extra_steps(req.stale, random.Random(f"explore-{req.seed}"))
        further = ""
        if steps:
            mutations = sorted({m for m in map(fam.OPTIONS.get, (o.id for o in req.menu)) if m}) \
                or sorted(set(fam.OPTIONS.values()))
            walked = self._walk(fam, cands, current, problem.dims, mutations, steps,
                                random.Random(f"walk-{req.seed}"))
            if walked:
                cands = walked
                further = (f", combined with {steps} further change(s) (the best kernel has not improved for "
                           f"{req.stale} step(s), so single changes around it have been tried)")
        chosen = cands[0]
        origin = "" if own else " (the parent was not written by this agent: taken as the starting schedule)"
        m = parent.metrics or {}
        text = (f"Apply '{opt.title}'{further}. Change the schedule from {fam.describe(current)}{origin} to "
                f"{fam.describe(chosen)}. Feedback: binding engine {m.get('binding_engine', '?')}, "
                f"{float(m.get('roofline_fraction') or 0):.1%} of roofline, DMA traffic "
                f"{2 ** feats['traffic']:.2f}x compulsory." + variants_text([fam.describe(c) for c in cands]))
        return Plan(text=text, option_id=opt.id,
                    params={"mutation": mutation, "schedule": asdict(chosen), "variants": [asdict(c) for c in cands]})

    def code(self, req: CodeRequest) -> str:
        problem, plan = req.problem, req.plan
        fam = self._family(problem)
        params = plan.params or {}
        pick = variant_of(params, req.seed)
        if pick is not None:
            try:
                schedule = from_dict(fam, pick)
            except (TypeError, ValueError, AttributeError) as exc:
                raise HeuristicError(f"the plan carries an invalid {problem.family} schedule: {exc}") from None
        else:  # a plan written by another model: apply its menu option ourselves
            mutation = fam.OPTIONS.get(plan.option_id)
            current, _ = self._schedule_of(req.parent.code, problem)
            cands = self._candidates(fam, mutation, current, problem.dims) if mutation else []
            if not cands:
                raise HeuristicError(f"the heuristic cannot implement option {plan.option_id!r} on "
                                     f"{fam.describe(current)}")
            schedule = random.Random(req.seed).choice(cands)
        if schedule.family != self._key(problem) or not fam.fits(schedule, problem.dims):
            raise HeuristicError(f"schedule {fam.describe(schedule)} does not fit problem {problem.name}")
        return render(schedule, problem.dims, self._dialect(problem))

    def repair(self, req: RepairRequest) -> str:
        problem = req.problem
        fam = self._family(problem)
        schedule = parse_schedule(req.code, self._key(problem))
        if schedule is None:
            raise HeuristicError("the heuristic repairer only repairs kernels rendered from its own schedules "
                                 "(this kernel has no autocomp-schedule line)")
        for reset in fam.SAFER:          # undo the riskiest features first, one at a time
            safer = replace(schedule, **reset)
            if safer != schedule and fam.fits(safer, problem.dims):
                return render(safer, problem.dims, self._dialect(problem))
        start = self._start(fam, problem)
        if start != schedule:
            return render(start, problem.dims, self._dialect(problem))
        raise HeuristicError(f"no safer variant of {fam.describe(schedule)} is left to try")
