"""What a paper-sized LLM run costs, and how much of its prompts the providers' caches serve.

A whole run (default: the paper's T=15, B=6, N=6, K=2 with two models ensembled for planning and coding) through
the real CLI, SDKs and bus, against a local server that speaks the OpenAI and Anthropic wire formats and answers
like models do: plans name an option they were offered, kernels are real gemmini-sim kernels (a pool found by
an offline search beforehand, each answer faster than the code it was shown, some broken so that repairs
happen), reasoning tokens as configured. The server counts prompt tokens (about 4 characters each) and caches
prompt prefixes the way each provider does (tests/llm/fake_servers.py). Costs come from the run store, priced
by the product (genai-prices), and again with nothing cached, from the same token counts.

    python bench/bench_llm_cost.py                       # the paper's settings (a few minutes on 2 cores)
    python bench/bench_llm_cost.py -T 3 -B 2 -N 2        # smaller
    python bench/bench_llm_cost.py --product /path/to/other/checkout   # the same models against another version
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console   # noqa: E402
from rich.table import Table   # noqa: E402

from autocomp_zmq.agents.workers.llm.pricing import PriceBook, Usage   # noqa: E402
from autocomp_zmq.agents.workers.llm.specs import parse_spec   # noqa: E402
from autocomp_zmq.agents.store import candidate_rows   # noqa: E402
from tests.llm.fake_servers import FakeLLM, Reply, tokens   # noqa: E402

PLAN_TEXT = ("Restructure the loop nest around {option}: keep the operand that is reused most resident in the "
             "scratchpad, give it its own bank, and move the loads of the next block ahead of the computes of the "
             "current one so the DMA latency hides behind them. Concretely, the outer loop walks blocks of output "
             "tiles, the middle loop the K chunks, and inside each chunk the mvins of chunk k+1 are issued between "
             "the preload/compute pairs of chunk k; the accumulator rows of a block are double-buffered so the "
             "mvouts of the previous block overlap the computes of this one. Keep every config outside the loops. ")


def kernel_pool(work: Path, problem: str, isa: str) -> list[tuple[float, str]]:
    """Correct kernels of the problem, slowest first, from an offline search."""
    out = work / "pool"
    subprocess.run([sys.executable, "launch.py", "run", "--problem", problem, "--isa", isa, "-T", "8", "-B", "6",
                    "-N", "6", "-K", "2", "--patience", "8", "--out", str(out), "--no-live"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = sqlite3.connect(out / "run.db")
    rows = {(r[8], r[6]) for r in candidate_rows(db) if r[7] == 1}     # (latency, code) of correct candidates
    return sorted(rows, key=lambda r: -r[0])


class PoolModel:
    """Answers plan, code and repair prompts as a capable model would, with kernels from the pool."""

    def __init__(self, pool: list[tuple[float, str]], reasoning: dict[str, int], broken: float, seed: int = 0):
        self.pool = pool
        self.rank = {code: i for i, (_, code) in enumerate(pool)}
        self.reasoning = reasoning
        self.broken = broken
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.fixes: dict[str, str] = {}   # broken kernel -> the kernel it was meant to be

    def __call__(self, prompt: str, n: int, model: str) -> Reply:
        think = self.reasoning.get(model, 0)
        if "OPTION: <id" in prompt:   # a planning prompt (this version's layout or an earlier one's)
            menu = re.split(r"## Options offered in this step|# Optimization menu\n", prompt)[-1]
            menu = re.split(r"\n#+ ", menu)[0]
            offered = re.findall(r"^- ([\w.-]+): ", menu, re.M)
            with self.lock:
                option = self.rng.choice(offered)
            return Reply(f"OPTION: {option}\nPLAN:\n" + PLAN_TEXT.format(option=option) * 2, reasoning_tokens=think)
        code = re.search(r"(?:Current code|The failing kernel)[^\n]*\n```c\n(.*?)```", prompt, re.S).group(1)
        repair = "# Your role: repairer" in prompt or "failed. Fix it." in prompt
        with self.lock:
            if repair:
                kernel = self.fixes.get(code, self.pool[-1][1])
            else:
                here = self.rank.get(code, 0)
                kernel = self.pool[min(len(self.pool) - 1, here + self.rng.randint(1, 6))][1]
                if self.rng.random() < self.broken:   # an implementation that does not compile: repaired later
                    broken = kernel.replace("fence();", "fence()", 1) + f"\n// attempt {n}\n"
                    self.fixes[broken] = kernel
                    kernel = broken
        return Reply(f"Here is the kernel with the plan applied.\n```c\n{kernel}```\nThe loads now overlap the "
                     "computes and the configs are issued once.", reasoning_tokens=think)


def run_search(args, fake: FakeLLM, work: Path) -> Path:
    run = work / "run"
    env = {**os.environ, "OPENAI_API_KEY": "bench", "ANTHROPIC_API_KEY": "bench", "OPENAI_BASE_URL": fake.url + "/v1",
           "ANTHROPIC_BASE_URL": fake.url, "AUTOCOMP_LOG_LEVEL": "WARNING"}
    cmd = [sys.executable, "launch.py", "run", "--problem", args.problem, "--isa", args.isa, "-T", str(args.T),
           "-B", str(args.B), "-N", str(args.N), "-K", str(args.K), "--patience", str(args.T), "--out", str(run),
           "--no-live", "--evaluators", str(args.evaluators), "--no-preflight"]
    for m in args.model:
        cmd += ["--model", m, "--code-model", m]
    done = subprocess.run(cmd, cwd=args.product, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return run


def report(args, run: Path, fake: FakeLLM, seconds: float) -> None:
    console = Console(width=150)
    book = PriceBook()
    specs = {parse_spec(m).model: parse_spec(m) for m in args.model}
    t = Table(title="What the server billed, per model (priced with the product's price book)")
    for col in ("model", "calls", "prompt tokens", "cached", "cache writes", "output", "cached share", "cost",
                "cost, nothing cached"):
        t.add_column(col, justify="right" if col != "model" else "left")
    totals = [0.0, 0.0]
    for name, spec in specs.items():
        rows = [b[2:] for b in fake.billed if b[1] == name]
        tin, tout, cached, written = (sum(r[i] for r in rows) for i in range(4))
        cost = sum(book.cost(spec, Usage(*r)) or 0.0 for r in rows)
        uncached = sum(book.cost(spec, Usage(r[0], r[1])) or 0.0 for r in rows)
        totals[0] += cost
        totals[1] += uncached
        t.add_row(spec.text, str(len(rows)), f"{tin:,}", f"{cached:,}", f"{written:,}", f"{tout:,}",
                  f"{cached / tin:.1%}" if tin else "-", f"${cost:,.2f}", f"${uncached:,.2f}")
    t.add_row("all", str(len(fake.billed)), "", "", "", "", "", f"${totals[0]:,.2f}", f"${totals[1]:,.2f}")
    console.print(f"{args.problem} --isa {args.isa}, T={args.T} B={args.B} N={args.N} K={args.K}, "
                  f"{seconds:.0f} s, product {args.product}")
    console.print(t)
    try:   # the product's own accounting, where the product records it
        db = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
        roles = db.execute("SELECT role, COUNT(*), SUM(cost), SUM(tokens_cached), SUM(tokens_in) FROM model_calls "
                           "GROUP BY role ORDER BY role").fetchall()
        evals = db.execute("SELECT COUNT(*) FROM jobs WHERE kind = 'eval'").fetchone()[0]
    except sqlite3.Error as exc:
        console.print(f"(the product's run store has no full accounting: {exc})")
        return
    t = Table(title="The product's own accounting (run store)")
    for col in ("role", "calls", "cost", "cached share"):
        t.add_column(col, justify="right" if col != "role" else "left")
    for role, n, cost, cached, tin in roles:
        t.add_row(role, str(n), f"${cost or 0:,.2f}", f"{(cached or 0) / tin:.1%}" if tin else "-")
    t.add_row("all", str(sum(r[1] for r in roles)), f"${sum(r[2] or 0 for r in roles):,.2f}", "")
    console.print(t)
    console.print(f"{evals} evaluations")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="gemm-256x256x256")
    ap.add_argument("--isa", default="fine")
    ap.add_argument("-T", type=int, default=15)
    ap.add_argument("-B", type=int, default=6)
    ap.add_argument("-N", type=int, default=6)
    ap.add_argument("-K", type=int, default=2)
    ap.add_argument("--model", action="append", help="model spec (repeatable; default: two frontier models)")
    ap.add_argument("--reasoning", type=int, default=3000, help="reasoning tokens per OpenAI answer (default 3000)")
    ap.add_argument("--broken", type=float, default=0.15, help="share of kernels that do not compile (repairs)")
    ap.add_argument("--evaluators", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--product", type=Path, default=ROOT, help="checkout whose launch.py runs the search")
    args = ap.parse_args()
    args.model = args.model or ["openai:gpt-6.1-sol", "anthropic:claude-opus-5-5"]
    with tempfile.TemporaryDirectory(prefix="bench-llm-cost-") as tmp:
        work = Path(tmp)
        pool = kernel_pool(work, args.problem, args.isa)
        reasoning = {parse_spec(m).model: args.reasoning for m in args.model if m.startswith("openai:")}
        answer = PoolModel(pool, reasoning, args.broken)
        fake = FakeLLM(usage=None, script=lambda prompt, n: (200, {}, answer(prompt, n, fake.request_model())))
        try:
            t0 = time.monotonic()
            run = run_search(args, fake, work)
            report(args, run, fake, time.monotonic() - t0)
        finally:
            fake.close()


if __name__ == "__main__":
    main()
