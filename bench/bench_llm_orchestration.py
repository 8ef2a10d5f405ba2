"""The search's wall time against its critical-path bound with the real LLM agent: planner and coder processes of
the `llm` implementation calling a local server that speaks the OpenAI wire format (tests/llm/fake_servers.py),
which answers each prompt after a delay drawn from the prompt (plans 2-4 s, code 3-6 s by default), and
synthetic evaluators (1 s each). The paper's search shape (T=2 here, B=6 N=6 K=2) with 4 evaluators, once per
--llm-concurrency given: how many calls an LLM agent makes to one model at once decides whether code jobs wait
for a slot while the provider could take them.

    python bench/bench_llm_orchestration.py [--concurrency 8 64] [--iterations 2] [--evaluators 4]

Goal: the window within 1.1x of its bound. bench_orchestration.py's synthetic agents have no such limit.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
    from .bench_orchestration import PROBLEM, MENU, Agents, critical_path_bound
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)
    from bench_orchestration import PROBLEM, MENU, Agents, critical_path_bound

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.agents.run import logsetup  # noqa: E402
from autocomp_zmq.agents.engine.coordinator import Coordinator  # noqa: E402
from autocomp_zmq.agents.workers.llm.prompts import render  # noqa: E402
from autocomp_zmq.agents.store import RunStore  # noqa: E402
from autocomp_zmq.agents.engine.search import BeamConfig, BeamSearch  # noqa: E402
from tests.llm.fake_servers import FakeLLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def delay_of(body: str, low: float, high: float) -> float:
    """The provider's time to answer a prompt: uniform in [low, high], drawn from the prompt itself, so that the
    bound can recompute it for every job."""
    u = (int(hashlib.sha256(body.encode()).hexdigest()[:8], 16) + 0.5) / 2**32
    return low + (high - low) * u


class Provider:
    """The fake provider: plans naming a menu option, kernels defining the entry point, each after its delay."""

    def __init__(self, plan_s: tuple[float, float], code_s: tuple[float, float]) -> None:
        self.plan_s, self.code_s = plan_s, code_s
        self.fake = FakeLLM(script=self.answer)

    def answer(self, prompt: str, n: int):
        body = self.fake.current.body["messages"][-1]["content"]
        planner = body.startswith("# Your role: planner")
        time.sleep(delay_of(body, *(self.plan_s if planner else self.code_s)))
        if planner:
            option = re.search(r"^\d+\. ([\w.-]+): ", body, re.M).group(1)
            return 200, {}, f"OPTION: {option}\nPLAN:\nApply {option} to the loop nest, variant {n}."
        return 200, {}, f"```c\nvoid solution(void) {{ /* variant {n} */ }}\n```\n"


def run(concurrency: int, capacity: int, shape: dict, evaluators: int, provider: Provider) -> dict:
    model = f"openai-compat@{provider.fake.url}/v1:bench"
    cfg = BeamConfig(**shape, plan_models=(model,), code_models=(model,))
    with tempfile.TemporaryDirectory() as tmp:
        agents = Agents(Path(tmp))
        for role in ("planner", "coder"):
            agents.procs.append(subprocess.Popen(
                [sys.executable, str(ROOT / "launch.py"), "worker", "--role", role, "--impl", "llm", "--model", model,
                 "--connect", agents.router.endpoints[0], "--secret-file", str(agents.key_file),
                 "--capacity", str(capacity), "--llm-concurrency", str(concurrency), "--heartbeat-s", "0.5"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                env={"PATH": "/usr/bin:/bin", "OPENAI_COMPAT_API_KEY": "none"}))
        agents.spawn("evaluator", evaluators, (1.0, 0.0, "uniform"))
        agents.wait_joined()
        store = RunStore(Path(tmp) / "run.db")
        search = BeamSearch(cfg, PROBLEM, "void solution(void) {}\n", MENU, store)
        coord = Coordinator(agents.router, store, search)
        t0 = time.perf_counter()
        coord.run()
        wall = time.perf_counter() - t0
        agents.close()

    def latency(job) -> float:
        if job.kind == "eval":
            return 1.0
        body = render(job.kind, job.payload).body
        return delay_of(body, *(provider.plan_s if job.kind == "plan" else provider.code_s))

    return {"wall": wall, "bound": critical_path_bound(search, evaluators, latency=latency),
            "evals": search.evals_done, "calls": len(provider.fake.requests)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[8, 64],
                    help="--llm-concurrency values to compare (8 with 16 jobs per agent: the earlier fixed setting)")
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--evaluators", type=int, default=4)
    args = ap.parse_args()
    logsetup.configure("ERROR")
    shape = dict(iterations=args.iterations, beam=6, plans=6, codes=2, dropout=0.0, patience=100)
    t = Table(title=f"Beam search with the llm agent against a local provider (T={args.iterations} B=6 N=6 K=2, "
                    f"{args.evaluators} evaluators of 1 s; plans 2-4 s, code 3-6 s)")
    for col in ("llm concurrency", "jobs per agent", "wall s", "critical-path bound s", "wall / bound", "evaluations",
                "model calls"):
        t.add_column(col, justify="right")
    for concurrency in args.concurrency:
        provider = Provider((2.0, 4.0), (3.0, 6.0))
        try:
            # the earlier agents took 16 jobs at once with 8 calls per model; now jobs = calls per model x models
            capacity = 16 if concurrency == 8 else concurrency
            r = run(concurrency, capacity, shape, args.evaluators, provider)
        finally:
            provider.fake.close()
        t.add_row(str(concurrency), str(capacity), f"{r['wall']:.1f}", f"{r['bound']:.1f}",
                  f"{r['wall'] / r['bound']:.2f}", str(r["evals"]), str(r["calls"]))
    Console(width=140).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
