"""How every offline heuristic turns a menu into one plan, and a plan into one schedule: the steps that
do not depend on the target (its schedules, scores and mutations are passed in)."""
from __future__ import annotations

import random
from typing import Callable

from autocomp_zmq.hw_runners.toolkit.errors import NO_CHANGE, HeuristicError


def choose_option(menu, seed: int, mutation_of: Callable, candidates_for: Callable, score: Callable,
                  current: str) -> tuple:
    """(option, mutation, candidates): among the menu options that survived dropout and change the current
    schedule, the best by score times seeded noise (so sibling plans of one parent differ), with its
    candidate schedules shuffled by the same draw."""
    rng = random.Random(seed)
    options = []
    for opt in menu:
        mutation = mutation_of(opt.id)
        cands = candidates_for(mutation) if mutation else []
        if cands:
            options.append((score(mutation) * rng.uniform(0.6, 1.4), opt, mutation, cands))
    if not options:
        raise HeuristicError(f"{NO_CHANGE} ("
                             + ", ".join(o.id for o in menu) + f") changes the current schedule ({current})")
    _, opt, mutation, cands = max(options, key=lambda o: o[0])
    rng.shuffle(cands)
    return opt, mutation, cands


def variants_text(descriptions: list[str]) -> str:
    """The sentence a plan ends with when its coders may take alternatives (variant_of): the plan names every
    schedule its code can be, so a kernel never carries a plan that describes another one."""
    if len(descriptions) < 2:
        return ""
    return (" Coders with odd seeds take one of its variants instead: "
            + "; ".join(descriptions[1:]) + ".")


def variant_of(params: dict, seed: int) -> dict | None:
    """The schedule (as a dict) a coder takes from a heuristic plan: the plan's choice on even seeds, one of
    its alternatives on odd ones, so that coders of one plan try different variants. None for a plan
    written by another model (it carries no schedules)."""
    variants = params.get("variants") or ([params["schedule"]] if "schedule" in params else [])
    if not variants:
        return None
    return variants[0] if seed % 2 == 0 or len(variants) == 1 else variants[1 + seed % (len(variants) - 1)]
