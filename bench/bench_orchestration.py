"""Orchestration benchmark with synthetic agents (sleep-based LLM and
evaluation latencies, real processes, real sockets):

  1. wall time of a beam search vs its critical-path bound and vs the same
     search run stage-serially like the original (goals: <= 1.2x the bound,
     >= 1.5x faster than stage-serial);
  2. evaluator scaling from 1 to 16 processes (goal: >= 90% efficiency);
  3. coordinator overhead per candidate (goal: < 2 ms);
  4. bus round trip and messages per second.

    python bench/bench_orchestration.py [--quick]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.agents.run import logsetup  # noqa: E402
from autocomp_zmq.agents.engine.coordinator import Coordinator  # noqa: E402
from autocomp_zmq.agents.workers.llm.specs import answers_from_seed  # noqa: E402
from autocomp_zmq.agents.store import RunStore  # noqa: E402
from autocomp_zmq.agents.engine.search import BeamSearch, BeamConfig  # noqa: E402
from autocomp_zmq.agents.workers.synthetic import synthetic_latency  # noqa: E402
from autocomp_zmq.bus.auth import create_secret  # noqa: E402
from autocomp_zmq.bus.router import Router  # noqa: E402
from autocomp_zmq.bus.timing import BusTiming  # noqa: E402
from autocomp_zmq.protocols.control import Ack, Job  # noqa: E402
from autocomp_zmq.protocols.envelope import MessageType  # noqa: E402
from autocomp_zmq.protocols.jobs import EvalRequest, MenuOption, ProblemRef, raw  # noqa: E402

PROBLEM = ProblemRef(target="gemmini-sim", name="synthetic", family="gemm", description="synthetic")
MENU = [MenuOption(id=f"opt-{i}", title=f"option {i}", description="synthetic") for i in range(10)]


class Agents:
    """Synthetic agent processes connected to a router in this process."""

    def __init__(self, tmp: Path) -> None:
        self.key_file = tmp / "secret"
        self.key = create_secret(self.key_file)
        self.router = Router(["tcp://127.0.0.1:*"], self.key, "bench", BusTiming(heartbeat_s=0.5))
        self.procs: list[subprocess.Popen] = []

    def spawn(self, role: str, n: int, latency: tuple, capacity: int = 1) -> None:
        mean, jitter, dist = latency
        for _ in range(n):
            self.procs.append(subprocess.Popen(
                [sys.executable, str(ROOT / "launch.py"), "worker", "--role", role, "--impl", "synthetic",
                 "--connect", self.router.endpoints[0], "--secret-file", str(self.key_file), "--capacity",
                 str(capacity), "--latency", str(mean), "--jitter", str(jitter), "--latency-dist", dist,
                 "--heartbeat-s", "0.5"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT))

    def wait_joined(self) -> None:
        deadline = time.monotonic() + 120
        while len(self.router.alive()) < len(self.procs):
            if time.monotonic() > deadline:
                raise RuntimeError("synthetic agents did not join")
            self.router.poll(0.05)

    def close(self) -> None:
        self.router.close()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


def search_run(cfg: BeamConfig, evaluators: int, lat: dict[str, tuple]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        agents = Agents(Path(tmp))
        agents.spawn("planner", 1, lat["plan"], capacity=256)
        agents.spawn("coder", 1, lat["code"], capacity=256)
        agents.spawn("evaluator", evaluators, lat["eval"])
        agents.wait_joined()
        store = RunStore(Path(tmp) / "run.db")
        search = BeamSearch(cfg, PROBLEM, "// synthetic starting kernel\n", MENU, store, seeded=answers_from_seed)
        coord = Coordinator(agents.router, store, search, seeded=answers_from_seed)
        t0 = time.perf_counter()
        coord.run()
        wall = time.perf_counter() - t0
        agents.close()
        bound = critical_path_bound(search, evaluators, lat)
        n = max(1, search.evals_done)
        return {"wall": wall, "bound": bound, "evals": search.evals_done,
                "overhead_ms": 1e3 * coord.stats.cpu_s / n, "handler_ms": 1e3 * coord.stats.handler_s / n}


def critical_path_bound(search: BeamSearch, evaluators: int, lat: dict[str, tuple] | None = None,
                        latency=None) -> float:
    """Lower bound on the wall time of the jobs this search ran, given their (recomputable) latencies (the
    synthetic agents' `lat`, or a function of the job): per iteration, the longest plan -> code -> eval chain,
    and the evaluation work spread over all evaluators after the first code exists."""
    def synthetic(job) -> float:
        mean, jitter, dist = lat[{"repair": "code"}.get(job.kind, job.kind)]
        return synthetic_latency(mean, jitter, job.payload, dist)

    latency = latency or synthetic

    L = {j.id: latency(j) for j in search.jobs.values()}
    evals_by_code = {j.payload.code: j for j in search.jobs.values() if j.kind == "eval"}
    total = sum(L[j.id] for j in search.jobs.values() if j.kind == "eval" and j.iteration == 0)
    for it in range(1, search.iteration + 1):
        chains, work = [], 0.0
        for code_job in (j for j in search.jobs.values() if j.kind == "code" and j.iteration == it):
            head = L[code_job.ctx["plan_job"]] + L[code_job.id]
            cand = next((c for c in search.candidates.values() if c.plan_job == code_job.ctx["plan_job"]
                         and c.iteration == it and c.code in evals_by_code), None)
            tail = L[evals_by_code[cand.code].id] if cand else 0.0
            chains.append((head, head + tail))
        work = sum(L[j.id] for j in search.jobs.values() if j.kind == "eval" and j.iteration == it)
        if chains:
            total += max(max(c for _, c in chains), min(h for h, _ in chains) + work / evaluators)
    return total


def bus_numbers(n_rtt: int, n_flood: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        agents = Agents(Path(tmp))
        agents.spawn("evaluator", 1, (0.0, 0.0, "uniform"), capacity=64)
        agents.wait_joined()
        router = agents.router
        peer = router.alive()[0]
        payload = raw(EvalRequest(problem=PROBLEM, code="x", seed=0))

        def send(i: int) -> None:
            router.send(peer, Job(job_id=f"j{i}", kind="eval", attempt=1, lease_s=60, payload=payload))

        def collect(n: int) -> int:
            got = 0
            for ev in router.poll(1.0):
                if ev.kind == "message" and ev.message.type is MessageType.RESULT:
                    router.send(ev.peer, Ack(job_id=ev.message.body.job_id))
                    got += 1
            return got

        rtts = []
        for i in range(n_rtt):
            t0 = time.perf_counter()
            send(i)
            while not collect(1):
                pass
            rtts.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sent = done = 0
        while done < n_flood:
            while sent < n_flood and sent - done < 64:
                send(n_rtt + sent)
                sent += 1
            done += collect(64)
        flood = time.perf_counter() - t0
        agents.close()
    return {"rtt_ms": 1e3 * statistics.median(rtts), "rtt_p99_ms": 1e3 * sorted(rtts)[int(0.99 * len(rtts))],
            "jobs_per_s": n_flood / flood, "msgs_per_s": 3 * n_flood / flood}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller runs (for a smoke test)")
    args = ap.parse_args()
    logsetup.configure("ERROR")
    console = Console(width=max(120, Console().width))
    q = args.quick

    # 1. streaming vs bound vs stage-serial: the paper's search shape, LLM-like latencies with a long
    #    right tail (lognormal), simulator evaluations with little spread
    lat = {"plan": (0.6, 0.6, "lognormal"), "code": (0.6, 0.6, "lognormal"), "eval": (0.15, 0.2, "uniform")}
    shape = dict(iterations=2 if q else 3, beam=6, plans=6, codes=2, dropout=0.0, plan_models=("synthetic",),
                 code_models=("synthetic",), patience=100)
    t = Table(title=f"Beam search with synthetic agents (T={shape['iterations']} B=6 N=6 K=2, 8 evaluators; plan and "
                    "code 0.6 s mean lognormal sigma 0.6; eval 0.15 s +-20%)")
    for col in ("schedule", "wall s", "critical-path bound s", "wall / bound", "evaluations", "coord CPU ms/cand"):
        t.add_column(col, justify="right" if col != "schedule" else "left")
    stream = search_run(BeamConfig(**shape), 8, lat)
    serial = search_run(BeamConfig(**shape, stage_barriers=True), 8, lat)
    for name, r in (("streaming (this system)", stream), ("stage-serial (original)", serial)):
        t.add_row(name, f"{r['wall']:.2f}", f"{r['bound']:.2f}", f"{r['wall'] / r['bound']:.2f}", str(r["evals"]),
                  f"{r['overhead_ms']:.2f}")
    console.print(t)
    console.print(f"streaming is {serial['wall'] / stream['wall']:.2f}x faster than stage-serial (goal >= 1.5x); "
                  f"{stream['wall'] / stream['bound']:.2f}x the critical-path bound (goal <= 1.2x)")

    # 2. evaluator scaling: an evaluation-bound search with fixed latencies
    lat2 = {"plan": (0.01, 0.0, "uniform"), "code": (0.01, 0.0, "uniform"), "eval": (0.2, 0.0, "uniform")}
    shape2 = dict(iterations=2, beam=8, plans=8, codes=4, dropout=0.0, plan_models=("synthetic",),
                  code_models=("synthetic",), patience=100)
    t2 = Table(title="Evaluator scaling (eval 0.2 s, plan/code 0.01 s, T=2 B=8 N=8 K=4: 289 evaluations). "
                     "Efficiency = speedup / evaluators; vs bound = the search's own critical-path bound / wall")
    for col in ("evaluators", "wall s", "speedup", "efficiency", "bound s", "efficiency vs bound",
                "coord CPU ms/cand"):
        t2.add_column(col, justify="right")
    base = None
    overheads = []
    for e in ((1, 4, 16) if q else (1, 2, 4, 8, 16)):
        r = search_run(BeamConfig(**shape2), e, lat2)
        base = base or r["wall"]
        overheads.append(r["overhead_ms"])
        t2.add_row(str(e), f"{r['wall']:.2f}", f"{base / r['wall']:.2f}x", f"{base / r['wall'] / e:.0%}",
                   f"{r['bound']:.2f}", f"{r['bound'] / r['wall']:.0%}", f"{r['overhead_ms']:.2f}")
    console.print(t2)

    # 3/4. coordinator overhead and the bus
    b = bus_numbers(300 if q else 2000, 2000 if q else 20000)
    console.print(f"Coordinator overhead per candidate (CPU time of the coordinator process, incl. its ZeroMQ "
                  f"threads): {max(overheads + [stream['overhead_ms']]):.2f} ms worst case (goal < 2 ms)")
    console.print(f"Bus: job round trip median {b['rtt_ms']:.3f} ms (p99 {b['rtt_p99_ms']:.3f} ms) to a worker "
                  f"process; {b['jobs_per_s']:,.0f} jobs/s = {b['msgs_per_s']:,.0f} messages/s "
                  f"(job + result + ack), 64 in flight")
    return 0


if __name__ == "__main__":
    sys.exit(main())
