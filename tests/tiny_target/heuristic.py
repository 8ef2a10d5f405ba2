"""The tiny target's offline planner/coder/repairer: one menu option, one parameter change."""
from __future__ import annotations

import random

from autocomp_zmq.sdk import CodeRequest, HeuristicError, Plan, PlanRequest, RepairRequest
from tests.tiny_target import TILES, parse, render

STEPS = {
    "bigger-tiles": lambda t, u, v: (TILES[min(TILES.index(t) + 1, len(TILES) - 1)], u, v),
    "unroll": lambda t, u, v: (t, min(u * 2, 8), v),
    "vectorize": lambda t, u, v: (t, u, 1),
}


class TinyHeuristic:
    def plan(self, req: PlanRequest) -> Plan:
        current = parse(req.parent.code)
        if current is None:
            raise HeuristicError("the parent is not a tiny kernel")
        options = [o for o in req.menu if o.id in STEPS and STEPS[o.id](*current) != current]
        if not options:
            raise HeuristicError("no menu option changes this kernel")
        opt = random.Random(req.seed).choice(options)
        new = STEPS[opt.id](*current)
        return Plan(text=f"{opt.title}: go from {current} to {new}", option_id=opt.id, params={"schedule": list(new)})

    def code(self, req: CodeRequest) -> str:
        schedule = req.plan.params.get("schedule")
        if not schedule:
            raise HeuristicError("the plan carries no schedule")
        return render(*schedule)

    def repair(self, req: RepairRequest) -> str:
        tile, unroll, vectorize = parse(req.code) or (1, 1, 0)
        return render(tile, min(unroll, tile), vectorize)
