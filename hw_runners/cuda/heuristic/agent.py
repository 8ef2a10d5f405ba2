"""Offline planner/coder/repairer for the cuda target: an auto-tuner of Triton templates in the shape of the
two-phase flow.

The planner recovers the parent's schedule (from the comment line the coder writes into every kernel; for a kernel
written by someone else, such as the problem's naive.py CUDA, the family's starting schedule or the closest one its
constants state), reads the evaluator's feedback (latency, achieved TFLOP/s and GB/s against the GPU's peaks,
roofline fraction and bound, Nsight Compute metrics where present), scores every menu option that survived dropout
and changes the schedule, picks ONE with seeded noise so the plans of one parent differ, and states the concrete
schedule change. The coder renders the chosen schedule as a complete ModelNew module (Triton); the repairer falls
back to a safer schedule. Families: gemm (matmul, bmm, nn.Linear with its epilogue), softmax and norm (LayerNorm,
RMSNorm), read from each problem's reference (workload.py); anything else needs an LLM.
"""
from __future__ import annotations

import functools
import random
import re
from dataclasses import asdict, replace

from autocomp_zmq.hw_runners.toolkit.choice import choose_option, variant_of, variants_text
from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.hw_runners.cuda.heuristic.codegen import FAMILIES, from_dict, parse_schedule, render
from autocomp_zmq.hw_runners.cuda.heuristic.workload import Workload, recognize
from autocomp_zmq.protocols.jobs import CodeRequest, Plan, PlanRequest, ProblemRef, RepairRequest

# Nsight Compute metrics (by name fragment) -> feature; values may come as numbers or strings such as "85.3 %"
NCU = {"sm__throughput": "sm_pct", "warps_active": "occupancy_pct", "achieved_occupancy": "occupancy_pct",
       "lts__t_sector_hit_rate": "l2_hit_pct", "dram__throughput": "dram_pct"}


def _number(value) -> float | None:
    m = re.search(r"-?\d+(\.\d+)?", str(value))
    return float(m.group(0)) if m else None


def features(m: dict, w: Workload) -> dict[str, float]:
    """What the cuda feedback says, as numbers in [0, 1]: the gap to the roofline (from the measured latency against
    the GPU's peaks; on a host without them, from the speed against PyTorch's reference), whether the problem is
    compute-bound, and from Nsight Compute, where the evaluator ran it, how idle the SMs, the warp slots and L2 are."""
    rf = m.get("roofline_fraction")
    if isinstance(rf, (int, float)):
        gap = 1.0 - min(1.0, max(0.0, float(rf)))
    elif m.get("reference_us") and m.get("latency_us"):
        gap = min(1.0, max(0.0, 1.0 - 0.5 * float(m["reference_us"]) / max(float(m["latency_us"]), 1e-9)))
    else:
        gap = 0.5
    bound = m.get("bound") or ("compute" if w.family == "gemm" else "memory")
    ncu = {}
    for key, value in (m.get("ncu") or {}).items():
        for frag, name in NCU.items():
            if frag in key and _number(value) is not None:
                ncu[name] = min(100.0, max(0.0, _number(value)))
    return {"gap": gap, "compute": float(bound == "compute"),
            "low_sm": 1.0 - ncu["sm_pct"] / 100 if "sm_pct" in ncu else 0.3,
            "low_occupancy": 1.0 - ncu["occupancy_pct"] / 100 if "occupancy_pct" in ncu else 0.3,
            "l2_miss": 1.0 - ncu["l2_hit_pct"] / 100 if "l2_hit_pct" in ncu else 0.3}


def _error_kind(error: str) -> str:
    text = (error or "").lower()
    if any(k in text for k in ("out of resource", "outofresources", "shared memory", "registers", "too many")):
        return "resources"
    if any(k in text for k in ("tolerance", "nan/inf", "elements of", "wrong")):
        return "wrong_result"
    return ""


@functools.lru_cache(maxsize=64)
def _workload(target: str, name: str, family: str, description: str, dims: tuple) -> Workload:
    return recognize(ProblemRef(target=target, name=name, family=family, dims=dict(dims), description=description))


class CudaHeuristic:
    """Planner, coder and repairer for the cuda gemm, softmax and norm families (codegen.FAMILIES)."""

    def supports(self, problem: ProblemRef) -> str | None:
        """None if the heuristic can optimize the problem, else why not (in a sentence)."""
        try:
            self._start(problem)
        except HeuristicError as exc:
            return str(exc).split("; use an LLM")[0]
        return None

    @staticmethod
    def _workload(problem: ProblemRef) -> Workload:
        return _workload(problem.target, problem.name, problem.family, problem.description,
                         tuple(sorted(problem.dims.items())))

    def _start(self, problem: ProblemRef):
        w = self._workload(problem)
        fam = FAMILIES[w.family]
        s = fam.default(w)
        if not fam.fits(s, w):
            raise HeuristicError(f"the heuristic's {w.family} schedules do not fit the sizes of {problem.name} "
                                 f"({problem.dims}); use an LLM model (--model ...)")
        return fam, w, s

    def _schedule_of(self, code: str, problem: ProblemRef):
        fam, w, start = self._start(problem)
        parsed = parse_schedule(code, w.family)
        if parsed is not None and fam.fits(parsed, w):
            return parsed, True
        guessed = fam.guess(code, w) if code else None
        if guessed is not None and fam.fits(guessed, w):
            return guessed, False
        return start, False

    @staticmethod
    def _candidates(fam, mutation: str, s, w) -> list:
        out = []
        for c in map(lambda c: fam.normalize(c, w), fam.candidates(mutation, s, w)):
            if c != s and c not in out and fam.fits(c, w):
                out.append(c)
        return out

    @staticmethod
    def _extra_steps(stale: int, rng: random.Random) -> int:
        """How many changes to add to the chosen one: none while the search improves; once it stalls, a growing
        share of plans take two-step moves (three-step ones after ten stale steps)."""
        if stale <= 0 or rng.random() >= min(0.8, 0.2 * stale):
            return 0
        return 1 if stale < 10 else rng.choice((1, 2))

    def _walk(self, fam, cands: list, current, w, mutations: list[str], steps: int, rng: random.Random) -> list:
        """Schedules `steps` further random changes (from `mutations`) away from the candidates: new ones only."""
        out: list = []
        for c in cands[:4]:
            frontier = [c]
            for _ in range(steps):
                nxt = [x for f in frontier for mu in mutations for x in self._candidates(fam, mu, f, w) if x != current]
                if not nxt:
                    break
                rng.shuffle(nxt)
                frontier = nxt[:6]
            out += [x for x in frontier if x not in out and x not in cands and x != current]
        rng.shuffle(out)
        return out[:12]

    def plan(self, req: PlanRequest) -> Plan:
        problem, parent = req.problem, req.parent
        fam, w, _ = self._start(problem)
        current, own = self._schedule_of(parent.code, problem)
        m = parent.metrics or {}
        feats = features(m, w)
        opt, mutation, cands = choose_option(
            req.menu, req.seed, fam.OPTIONS.get, lambda mu: self._candidates(fam, mu, current, w),
            lambda mu: fam.SCORES[mu](feats, current, w), fam.describe(current, w))
        steps = self._extra_steps(req.stale, random.Random(f"explore-{req.seed}"))
        further = ""
        if steps:
            mutations = sorted({mu for mu in map(fam.OPTIONS.get, (o.id for o in req.menu)) if mu})
            walked = self._walk(fam, cands, current, w, mutations, steps, random.Random(f"walk-{req.seed}"))
            if walked:
                cands = walked
                further = (f", combined with {steps} further change(s) (the best kernel has not improved for "
                           f"{req.stale} step(s), so single changes around it have been tried)")
        chosen = cands[0]
        origin = "" if own else " (the parent was not written by this agent: taken as the starting schedule)"
        text = (f"Apply '{opt.title}'{further}. Change the schedule from {fam.describe(current, w)}{origin} to "
                f"{fam.describe(chosen, w)}. " + _feedback_words(m)
                + variants_text([fam.describe(c, w) for c in cands]))
        return Plan(text=text, option_id=opt.id,
                    params={"mutation": mutation, "schedule": asdict(chosen), "variants": [asdict(c) for c in cands]})

    def code(self, req: CodeRequest) -> str:
        problem, plan = req.problem, req.plan
        fam, w, _ = self._start(problem)
        pick = variant_of(plan.params or {}, req.seed)
        if pick is not None:
            try:
                schedule = from_dict(fam, pick)
            except (TypeError, ValueError, AttributeError) as exc:
                raise HeuristicError(f"the plan carries an invalid {w.family} schedule: {exc}") from None
        else:  # a plan written by another model: apply its menu option ourselves
            mutation = fam.OPTIONS.get(plan.option_id)
            current, _ = self._schedule_of(req.parent.code, problem)
            cands = self._candidates(fam, mutation, current, w) if mutation else []
            if not cands:
                raise HeuristicError(f"the heuristic cannot implement option {plan.option_id!r} on "
                                     f"{fam.describe(current, w)}")
            schedule = random.Random(req.seed).choice(cands)
        if schedule.family != w.family or not fam.fits(schedule, w):
            raise HeuristicError(f"schedule {fam.describe(schedule, w)} does not fit problem {problem.name}")
        return render(schedule, w)

    def repair(self, req: RepairRequest) -> str:
        problem = req.problem
        fam, w, start = self._start(problem)
        schedule = parse_schedule(req.code, w.family)
        if schedule is None:
            raise HeuristicError("the heuristic repairer only repairs kernels rendered from its own schedules "
                                 "(this kernel has no autocomp-schedule line)")
        # undo what the error points at first, then the riskiest features, one at a time
        for reset in fam.ERROR_FIRST.get(_error_kind(req.error), ()) + tuple(fam.SAFER):
            try:
                safer = replace(schedule, **reset)
            except TypeError:
                continue
            safer = fam.normalize(safer, w)
            if safer != schedule and fam.fits(safer, w):
                return render(safer, w)
        if start != schedule:
            return render(start, w)
        raise HeuristicError(f"no safer variant of {fam.describe(schedule, w)} is left to try")


def _feedback_words(m: dict) -> str:
    """The feedback the plan read, in a sentence (what is missing is left out)."""
    if not m:
        return "No feedback on the parent (the schedule's defaults decide)."
    parts = []
    if m.get("latency_us") is not None:
        parts.append(f"{float(m['latency_us']):.1f} us")
    if m.get("tflops") is not None and m.get("gbs") is not None:
        parts.append(f"{float(m['tflops']):.2f} TFLOP/s and {float(m['gbs']):.0f} GB/s")
    if m.get("roofline_fraction") is not None:
        parts.append(f"{float(m['roofline_fraction']):.1%} of roofline ({m.get('bound', '?')}-bound)")
    if m.get("reference_us") and m.get("latency_us"):
        parts.append(f"{float(m['reference_us']) / max(float(m['latency_us']), 1e-9):.2f}x PyTorch's speed")
    return "Feedback: " + ", ".join(parts) + "." if parts else "Feedback without rates."
