"""Synthetic implementations of every role, for measuring the orchestration
itself (bench/bench_orchestration.py): each job sleeps and returns a
well-formed, deterministic answer. Not a model and not a target: nothing here
pretends to optimize anything.

Sleep times vary like real latencies, drawn from the job's content so the
benchmark can recompute every job's latency and the critical-path bound:
"uniform" is uniform in [L(1-j), L(1+j)]; "lognormal" has mean L and log-sd j,
the long right tail of LLM response times.
"""
from __future__ import annotations

import hashlib
import math
import statistics
import time

from autocomp_zmq.protocols.envelope import encode
from autocomp_zmq.protocols.jobs import CodeResult, EvalReport, Plan, PlanResult, Request


def digest(request: Request) -> str:
    return hashlib.sha256(encode(request)).hexdigest()


def synthetic_latency(mean_s: float, jitter: float, payload: Request, dist: str = "uniform") -> float:
    u = (int(digest(payload)[:8], 16) + 0.5) / 2**32
    if dist == "lognormal":
        return mean_s * math.exp(jitter * statistics.NormalDist().inv_cdf(u) - jitter * jitter / 2)
    return mean_s * (1 - jitter + 2 * jitter * u)


class _Sleeper:
    name = "synthetic"
    models = ["synthetic"]

    def __init__(self, latency_s: float = 0.0, jitter: float = 0.0, latency_dist: str = "uniform") -> None:
        if latency_dist not in ("uniform", "lognormal"):
            raise ValueError(f"latency distribution must be uniform or lognormal, not {latency_dist!r}")
        self.latency_s = latency_s
        self.jitter = jitter
        self.dist = latency_dist

    def _sleep(self, payload: Request) -> None:
        time.sleep(synthetic_latency(self.latency_s, self.jitter, payload, self.dist))


class SyntheticPlanner(_Sleeper):
    def handle(self, kind: str, req: Request) -> PlanResult:
        self._sleep(req)
        return PlanResult(plan=Plan(text=f"synthetic plan {req.seed}", option_id=req.menu[0].id), model="synthetic")


class SyntheticCoder(_Sleeper):
    def handle(self, kind: str, req: Request) -> CodeResult:
        self._sleep(req)
        return CodeResult(code=f"// synthetic candidate {digest(req)}\n", model="synthetic")


class SyntheticEvaluator(_Sleeper):
    """Always correct; the latency (cycles) is a deterministic function of the code."""
    models: list[str] = []

    def handle(self, kind: str, req: Request) -> EvalReport:
        self._sleep(req)
        h = int(hashlib.sha256(req.code.encode()).hexdigest()[:8], 16)
        return EvalReport(correct=True, latency=1_000_000 - (h % 900_000), utilization=0.5, roofline_fraction=0.5)
