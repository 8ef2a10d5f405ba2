"""Failed jobs counted by reason: a small, bounded tally for the live display, the summary and the
loud end-of-run check (a run whose every model call failed must not look like a success). Proposals of
nothing (the offline heuristic's plans when no offered option changes the schedule) are counted apart: a
plan that proposes nothing is the search working as designed, not a failure."""
from __future__ import annotations

import re
from collections import Counter

from autocomp_zmq.hw_runners.toolkit.errors import NO_CHANGE

KIND_WORDS = {"plan": "planning", "code": "coding", "repair": "repair", "eval": "evaluation"}
MAX_REASONS = 32     # distinct reasons kept; the rest are counted as "other"


def reason_of(error: str | None, model: str | None = None) -> str:
    """The first line of an error, without the model's name (the tally keeps it apart), at most 160 chars."""
    text = (error or "unknown failure").strip().splitlines()[0] if (error or "").strip() else "unknown failure"
    if model:
        text = text.replace(f"model {model} failed: ", "").replace(f"unusable answer from {model}: ",
                                                                     "unusable answer: ")
    text = re.sub(r"0x[0-9a-f]+", "0x..", text)
    text = re.sub(r"\([^()]*,[^()]*\)", "(...)", text)   # listed values vary; alike failures count together
    return text[:160]


def is_noop(error: str | None) -> bool:
    """A job that ended with a proposal of nothing (hw_runners/toolkit/errors.py NO_CHANGE), not a failure."""
    return NO_CHANGE in (error or "")


class FailureTally:
    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()   # (kind, model or "", reason) -> jobs
        self.noops: Counter[str] = Counter()                      # kind -> proposals of nothing

    def add(self, kind: str, model: str | None, reason: str) -> None:
        if is_noop(reason):
            self.noops[kind] += 1
            return
        key = (kind, model or "", reason)
        if key not in self.counts and len(self.counts) >= MAX_REASONS:
            key = (kind, model or "", "other")
        self.counts[key] += 1

    def top(self, n: int = 3) -> list[str]:
        return [f"{kind}{'/' + model if model else ''}: {reason} x{count}"
                for (kind, model, reason), count in self.counts.most_common(n)]

    def as_dict(self) -> dict[str, int]:
        return {f"{kind}{' ' + model if model else ''}: {reason}": count
                for (kind, model, reason), count in self.counts.most_common()}
