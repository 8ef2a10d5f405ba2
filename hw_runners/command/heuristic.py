"""The offline planner/coder/repairer of command targets: a library of schedule variants, as data.

A command target's problem.toml may list `[[variant]]`s: complete kernels, each with the menu options it
applies. The planner picks, with the seeded draw every heuristic uses, one offered option and a variant
that applies it and differs from the parent; the coder writes that variant; the search keeps it only if
it is correct and faster. It writes no new code of its own: a problem without variants has no offline
moves, and supports() says so before a run starts."""
from __future__ import annotations

import random

from autocomp_zmq.hw_runners.toolkit.errors import NO_CHANGE, HeuristicError
from autocomp_zmq.hw_runners.base import get_target
from autocomp_zmq.protocols.jobs import CodeRequest, Plan, PlanRequest, ProblemRef, RepairRequest


def _folder_and_spec(problem: ProblemRef):
    target = get_target(problem.target)
    folder, spec = target.problem_spec(target.problem(problem.name))
    return folder, spec


class VariantHeuristic:
    def supports(self, problem: ProblemRef) -> str | None:
        _, spec = _folder_and_spec(problem)
        return None if spec.variant else (f"{problem.name} lists no schedule variants in its problem.toml "
                                          "(the offline heuristic of command targets only replays those)")

    def plan(self, req: PlanRequest) -> Plan:
        folder, spec = _folder_and_spec(req.problem)
        offered = {o.id: o for o in req.menu}
        current = req.parent.code.strip()
        moves = [(o, v) for v in spec.variant for o in v.options
                 if o in offered and (folder / v.file).read_text().strip() != current]
        if not moves:
            raise HeuristicError(f"{NO_CHANGE} ({', '.join(offered)}) changes the current kernel "
                                 "(no listed schedule variant applies it)")
        option, variant = random.Random(req.seed).choice(moves)
        return Plan(text=f"{offered[option].title}: rewrite the kernel as the schedule variant {variant.file}"
                         f" ({variant.description or 'as listed in problem.toml'}).",
                    option_id=option, params={"variant": variant.file})

    def code(self, req: CodeRequest) -> str:
        name = req.plan.params.get("variant")
        folder, spec = _folder_and_spec(req.problem)
        if name not in {v.file for v in spec.variant}:
            raise HeuristicError("the plan names no schedule variant of this problem (it was written by another "
                                 "model); use an LLM coder")
        return (folder / name).read_text()

    def repair(self, req: RepairRequest) -> str:
        # the variants are verified kernels: a failing one failed for the host's reasons, so fall back to the start
        folder, spec = _folder_and_spec(req.problem)
        return (folder / spec.start).read_text()
