"""Which model serves each plan and code sample when several are ensembled.

even (the paper's, the default): models take turns by position, so every model gets the same share.
bandit: Thompson sampling over the models of each role. A model's candidates of an iteration are its
trials; those that entered the beam are its wins. Each sample of the next iteration goes to the model
whose win rate, drawn from Beta(1 + wins, 1 + losses), is highest, so samples shift toward the models
that win while every model keeps at least one sample per iteration (one unlucky early can recover). Draws are seeded by (run seed, role, iteration): a resumed run
that replays its results deals the samples exactly as before.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

ALLOCATIONS = ("even", "bandit")


@dataclass
class Record:
    trials: int = 0
    wins: int = 0


@dataclass
class ModelAllocation:
    policy: str
    seed: int
    plan_models: tuple[str, ...]
    code_models: tuple[str, ...]
    records: dict[tuple[str, str], Record] = field(default_factory=dict)   # (role, model) -> record
    shares: dict[str, dict[str, float]] = field(default_factory=dict)      # role -> model -> share (last deal)

    def __post_init__(self) -> None:
        if self.policy not in ALLOCATIONS:
            raise ValueError(f"model allocation must be one of {', '.join(ALLOCATIONS)}, not {self.policy!r}")

    def learn(self, role: str, model: str | None, won: bool) -> None:
        """One candidate of `model` (in `role`: plan or code) that did or did not enter the beam."""
        if model is None:
            return
        rec = self.records.setdefault((role, model), Record())
        rec.trials += 1
        rec.wins += int(won)

    def deal(self, role: str, slots: int, iteration: int, offset: int) -> list[str]:
        """The model of each of `slots` samples of this role in this iteration; `offset` continues the
        even split's rotation across iterations."""
        models = self.plan_models if role == "plan" else self.code_models
        if self.policy == "even" or len(models) == 1:
            return [models[(offset + i) % len(models)] for i in range(slots)]
        rng = random.Random(f"{self.seed}:{role}:{iteration}")
        records = {m: self.records.get((role, m), Record()) for m in models}
        # one Thompson draw per sample: a sample goes to the model with the highest drawn win rate
        order = [max(models, key=lambda m: rng.betavariate(1 + records[m].wins,
                                                           1 + records[m].trials - records[m].wins))
                 for _ in range(slots)]
        if slots >= len(models):   # every model keeps at least one sample: a model unlucky early can recover
            for m in models:
                if m not in order:
                    most = max(models, key=order.count)
                    order[len(order) - 1 - order[::-1].index(most)] = m
        self.shares[role] = {m: order.count(m) / slots for m in models} if slots else {}
        return order
