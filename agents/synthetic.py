"""Synthetic implementations of every role, for measuring the orchestration
itself (bench/bench_orchestration.py): each job sleeps for a fixed latency
and returns a well-formed, deterministic answer. Not a model and not a
target: nothing here pretends to optimize anything."""
from __future__ import annotations

import hashlib
import time


class _Sleeper:
    name = "synthetic"
    models = ["synthetic"]

    def __init__(self, latency_s: float = 0.0, **options) -> None:
        self.latency_s = latency_s

    def _digest(self, payload: dict) -> str:
        return hashlib.sha256(repr(sorted(payload.items())).encode()).hexdigest()


class SyntheticPlanner(_Sleeper):
    def handle(self, kind: str, payload: dict) -> dict:
        time.sleep(self.latency_s)
        return {"plan": {"text": f"synthetic plan {payload['seed']}", "option_id": payload["menu"][0]["id"]},
                "model": "synthetic"}


class SyntheticCoder(_Sleeper):
    def handle(self, kind: str, payload: dict) -> dict:
        time.sleep(self.latency_s)
        return {"code": f"// synthetic candidate {self._digest(payload)}\n", "model": "synthetic"}


class SyntheticEvaluator(_Sleeper):
    """Correct; cycles a deterministic function of the code, mostly below the parent's."""
    models: list[str] = []

    def handle(self, kind: str, payload: dict) -> dict:
        time.sleep(self.latency_s)
        h = int(hashlib.sha256(payload["code"].encode()).hexdigest()[:8], 16)
        return {"correct": True, "cycles": 1_000_000 - (h % 900_000), "utilization": 0.5, "roofline_fraction": 0.5}
