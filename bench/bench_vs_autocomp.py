"""This project against Autocomp itself: the end-to-end wall time of one short search run by each, against the same
local model provider, at the same search settings, with evaluations that take the same E seconds on both sides.

    python bench/bench_vs_autocomp.py [--runs 3] [--eval-s 1.0] [--shapes small paper] [--evaluators 4]
        [--autocomp-src DIR] [--autocomp-python PYTHON]

This project's side is `python launch.py run --problem gemm-256x256x256 --model openai-compat@URL/v1:bench` with
`--evaluators 0` and W synthetic evaluators (`launch.py worker --role evaluator --impl synthetic --latency E`,
agents/workers/synthetic.py) connected to it. Autocomp's side is its own beam search (autocomp/search/search.py:
BeamSearchStrategy, built as autocomp/search/run_search.py main() builds it, with its defaults for everything the
shape does not set) run by a small driver in a subprocess from a copy extracted to a temporary directory from
--autocomp-src (a git mirror; default /work/.mirror/ucb-bar+autocomp/repo), with its Gemmini agent on its
256x256x256 GEMM (prob_type gemm, prob_id 2) and its LLM client pointed at the same provider through its own
configuration: provider `vllm::bench` and VLLM_API_BASE (autocomp/common/llm_utils.py: LLMClient; run_search's
"vllm@URL::MODEL" form is not used because main() rewrites every "/" of a model spec to "_"). Both start from the
same kernel, Autocomp's sols/gemm/sol2_exo_baseline.c (this project takes it as --kernel).

Substituted on Autocomp's side, and why: its Gemmini backend needs Chipyard and Spike (Trainium's, Neuron), none of
which is here. The driver replaces GemminiEvalBackend with a stand-in through Autocomp's backend interface
(autocomp/backend/eval_backend.py: evaluate_code), so that its search loop, prompts, LLM calls and bookkeeping run
as written: each candidate takes E seconds on W slots at once (W = --evaluators, this project's evaluator count; a
batch is evaluated at once, as Autocomp's backends do) and is correct, with the cycles agents/workers/synthetic.py gives.
Its wandb logging is off (WANDB_MODE=disabled, as Autocomp's README runs its tests). Nothing extracted is edited.

The provider is tests/llm/fake_servers.py's FakeLLM answering after bench_llm_orchestration.py's delays (plans 2-4 s,
code 3-6 s; the i-th plan or code request of either side waits the same) and in each system's format: Autocomp's
prompts are told apart by their text, its plans are prose and its code a ```c block (autocomp/agents/llm_agent.py:
extract). Every kernel it answers is one the synthetic evaluator scores below the starting kernel, so every
candidate improves and both beams fill to B: both sides make the same calls, B*N plans and B*N*K codes per
iteration. Equal on both sides besides: menu dropout (0.75 left out), temperature 1, no repairs, no early stop.
Each system's own: calls at once (this project's --llm-concurrency 64; Autocomp's 9 per batch, a constant in
llm_utils.py), its schedule (streaming; stage after stage) and its processes (a coordinator, model agents and W
evaluator processes; one process with threads). Printed per side and shape: model calls (counted by the provider),
evaluations, seconds from launch to the provider's first model request, wall seconds to exit, CPU seconds of all
processes (RUSAGE_CHILDREN), medians of --runs, and Autocomp's over ours. --work-dir DIR keeps the runs and logs.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
    from .bench_llm_orchestration import Provider, delay_of
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)
    from bench_llm_orchestration import Provider, delay_of

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/ucb-bar+autocomp/repo")
SHAPES = {"small": {"T": 1, "B": 1, "N": 2, "K": 1}, "paper": {"T": 2, "B": 6, "N": 6, "K": 2}}
START = "sols/gemm/sol2_exo_baseline.c"       # Autocomp's 256x256x256 GEMM, prob_type gemm, prob_id 2
DROPOUT = 0.75      # this project's --dropout leaves an option out with P; Autocomp's dropout_menu_options (its
                    # run_search default 0.25) keeps one with P: the same draw
# text only Autocomp's Gemmini planner prompts hold (autocomp/agents/gemmini/gemmini_agent.py); its other prompts
# in these runs are its coder's
AUTOCOMP_PLAN = "Come up with a plan to apply exactly one of the <optimizations>"

# Autocomp's side: run_search.main() with the shape's settings and its own defaults for the rest, the evaluation
# backend replaced by the stand-in before create_backend_and_agents makes it (so its agents hold it too)
DRIVER = r'''
import hashlib, json, pathlib, random, sys, time
from concurrent.futures import ThreadPoolExecutor
cfg = json.loads(sys.argv[1])
import autocomp.common.my_logging
import autocomp.search.search as S
from autocomp.backend.eval_backend import EvalBackend
from autocomp.hw_config import GemminiHardwareConfig
from autocomp.search.prob import Prob

def cycles(code):  # what agents/workers/synthetic.py's SyntheticEvaluator reports for this code
    return 1_000_000 - (int(hashlib.sha256(code.encode()).hexdigest()[:8], 16) % 900_000)

class StandIn(EvalBackend):
    """E seconds a candidate on W slots, correct; Autocomp's backends evaluate an iteration's batch at once too."""
    evaluated = 0
    def __init__(self, hw_config):
        super().__init__()
    def evaluate_code(self, prob, code_strs, simulator):
        StandIn.evaluated += len(code_strs)
        with ThreadPoolExecutor(cfg["slots"]) as pool:
            list(pool.map(lambda _: time.sleep(cfg["eval_s"]), code_strs))
        return [{"correct": True, "latency": cycles(c)} for c in code_strs]

# create_backend_and_agents makes the backend by this name: its agents and the search then hold the stand-in
S.GemminiEvalBackend = StandIn
random.seed(1111)   # as run_search.main()
out = pathlib.Path(cfg["out"])
out.mkdir(parents=True, exist_ok=True)
autocomp.common.my_logging.move_log(out, tag="search")   # as main(): its log costs belong to its run
prob = Prob("gemm", 2)
initial = S.load_initial_code("gemmini", prob)
backend, agent, code_agent = S.create_backend_and_agents(
    "gemmini", "gemmini", GemminiHardwareConfig(pe_dim=16, spad_size_kb=256, acc_size_kb=64), prob, ["vllm::bench"],
    None, menu_strategy=None, fine_grained_isa=False, example_rate=0.0, cache_dir=out)
search = S.BeamSearchStrategy(
    output_dir=out, eval_backend=backend, agent=agent, orig_code=initial, prob=prob, metric="latency",
    simulator=None, give_score_feedback=1, give_util_feedback=0, give_hw_feedback=0, include_ancestors=False,
    plan_icl_examples=False, code_icl_examples=False, dropout_menu_options=cfg["keep"], prevent_duplicate_level=0,
    translate_iters=0, translate_perf_threshold=15, translate_drop_original=True, translate_score=True,
    code_agent=code_agent, early_stop_iters=0, early_stop_threshold=1.0, continue_from="", use_edits=False,
    num_analyses=0, num_plan_candidates=cfg["N"], num_code_candidates=cfg["K"], beam_size=cfg["B"],
    num_pairs_to_combine=0, num_gen_per_combine=0, trigger_exhaustive_threshold=1, trigger_exhaustive_iters=20,
    start_exhaustive_iters=0, reimplement_failed=False, skip_planning=False)
search.optimize(cfg["T"])
pathlib.Path(cfg["result"]).write_text(json.dumps({"evals": StandIn.evaluated}))
'''


def cycles(code: str) -> int:
    """The latency agents/workers/synthetic.py's SyntheticEvaluator reports for a kernel (the driver's stand-in copies it)."""
    return 1_000_000 - (int(hashlib.sha256(code.encode()).hexdigest()[:8], 16) % 900_000)


def improving_kernels(start_cycles: int):
    """Kernels the synthetic evaluator scores below the starting kernel: a model that always improves. Both parsers
    take a kernel from its fenced block with the final newline; the form without it is held to the same, should
    either strip it."""
    for i in itertools.count():
        code = f"void solution(int8_t A[256][256], int8_t B[256][256], int8_t C[256][256]) {{ /* variant {i} */ }}"
        if cycles(code) < start_cycles and cycles(code + "\n") < start_cycles:
            yield code


class TwoSided(Provider):
    """bench_llm_orchestration's provider, answering Autocomp's prompts in its format too and every kernel from
    improving_kernels. The i-th plan (code) request waits the same delay on both sides, drawn as delay_of draws it
    from "plan i" ("code i") rather than from the prompt, so that both sides wait on the same delays per
    iteration, not on draws from their different prompts. It notes the first model request, and counts."""

    def __init__(self, start_cycles: int) -> None:
        self.first: float | None = None
        self.kinds: Counter = Counter()
        self.lock = threading.Lock()
        self.kernels = improving_kernels(start_cycles)
        self.delays = {"plan": (2.0, 4.0), "code": (3.0, 6.0)}
        super().__init__((0.0, 0.0), (0.0, 0.0))      # its own delays off: this class waits before answering

    def answer(self, prompt: str, n: int):
        body = self.fake.current.body["messages"][-1]["content"]
        kind = "plan" if AUTOCOMP_PLAN in body or body.startswith("# Your role: planner") else "code"
        with self.lock:
            self.first = self.first or time.monotonic()
            self.kinds[kind] += 1
            delay = delay_of(f"{kind} {self.kinds[kind]}", *self.delays[kind])
            kernel = next(self.kernels) if kind == "code" else None
        time.sleep(delay)
        if kind == "code":
            return 200, {}, f"```c\n{kernel}\n```\n"
        if AUTOCOMP_PLAN in body:                      # Autocomp keeps a plan whole (llm_agent.extract_plan)
            return 200, {}, f"Optimization 1, modify loop tiling: tile the loops for more reuse (variant {n})."
        return super().answer(prompt, n)               # this project's planner: an OPTION line and a plan


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(provider: TwoSided, start_procs, log_path: Path) -> dict:
    """Start a side's processes (the main one writing to log_path), wait for all of them, and measure: wall to the
    main process's exit, the first model request, CPU of every process waited for."""
    with open(log_path, "w") as log:
        try:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            main, others = start_procs(log)
            try:
                main.wait(timeout=900)
            except subprocess.TimeoutExpired:
                main.kill()
                raise SystemExit(f"a side ran past 900 s: {log_path}") from None
            wall = time.monotonic() - started
            for p in others:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        finally:
            provider.fake.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    first = provider.first - started if provider.first else float("nan")
    return {"rc": main.returncode, "wall": wall, "first": first, "cpu": cpu, "plans": provider.kinds["plan"],
            "codes": provider.kinds["code"]}


def ours(shape: dict, args, start: Path, start_cycles: int, tmp: Path) -> dict:
    provider = TwoSided(start_cycles)
    run_dir, endpoint = tmp / "run", f"tcp://127.0.0.1:{free_port()}"
    model = f"openai-compat@{provider.fake.url}/v1:bench"
    (tmp / "prices.toml").write_text(f'["{model}"]\ninput = 0\noutput = 0\n')     # a local server: priced at 0
    subprocess.run([sys.executable, str(ROOT / "launch.py"), "secret", str(run_dir), "--no-curve"], cwd=ROOT,
                   check=True, capture_output=True)    # the workers' secret, before the clock starts

    def start_procs(log):
        # the evaluators start with the run, as its local ones would; they exit when it ends
        workers = [subprocess.Popen(
            [sys.executable, str(ROOT / "launch.py"), "worker", "--role", "evaluator", "--impl", "synthetic",
             "--latency", str(args.eval_s), "--connect", endpoint, "--secret-file", str(run_dir / "secret")],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(args.evaluators)]
        run = subprocess.Popen(
            [sys.executable, str(ROOT / "launch.py"), "run", "--problem", "gemm-256x256x256", "--kernel", str(start),
             "-T", str(shape["T"]), "-B", str(shape["B"]), "-N", str(shape["N"]), "-K", str(shape["K"]),
             "--dropout", str(DROPOUT), "--max-repairs", "0", "--patience", "100", "--temperature", "1",
             "--model", model, "--prices", str(tmp / "prices.toml"), "--no-live", "--out", str(run_dir),
             "--evaluators", "0", "--bind", endpoint],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OPENAI_COMPAT_API_KEY": "none"})
        return run, workers

    r = timed(provider, start_procs, tmp / "run.log")
    text = (tmp / "run.log").read_text()
    if r["rc"] != 0:
        raise SystemExit(f"this project's run failed (exit {r['rc']}):\n{text[-3000:]}")
    m = re.search(r"(\d+) evaluations", text)
    return {**r, "evals": int(m.group(1)) if m else -1}


def autocomp(shape: dict, args, src: Path, start_cycles: int, tmp: Path) -> dict:
    provider = TwoSided(start_cycles)
    driver = tmp / "driver.py"
    driver.write_text(DRIVER)
    cfg = {**shape, "keep": 1 - DROPOUT, "eval_s": args.eval_s, "slots": args.evaluators, "out": str(tmp / "out"),
           "result": str(tmp / "result.json")}
    env = {**os.environ, "PYTHONPATH": str(src), "VLLM_API_BASE": f"{provider.fake.url}/v1", "WANDB_MODE": "disabled"}

    def start_procs(log):
        return subprocess.Popen([args.autocomp_python, str(driver), json.dumps(cfg)], cwd=tmp, env=env, stdout=log,
                                stderr=subprocess.STDOUT), []

    r = timed(provider, start_procs, tmp / "autocomp.log")
    if r["rc"] != 0:
        raise SystemExit(f"Autocomp's search failed (exit {r['rc']}):\n{(tmp / 'autocomp.log').read_text()[-3000:]}")
    return {**r, "evals": json.loads((tmp / "result.json").read_text())["evals"]}


def extract(source: Path | None, into: Path) -> Path | None:
    """Autocomp's source in a temporary directory: `git archive` of a git (mirror) directory, or a copy of a tree."""
    source = source or (MIRROR if MIRROR.exists() else None)
    if source is None or not source.exists():
        return None
    dest = into / "autocomp"
    dest.mkdir()
    if (source / "autocomp" / "search" / "search.py").exists():
        shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
    else:
        archive = subprocess.run(["git", "--git-dir", str(source), "archive", "HEAD"], capture_output=True,
                                 check=False)
        if archive.returncode != 0:
            return None
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest if (dest / START).exists() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1, help="runs per side and shape (medians reported)")
    ap.add_argument("--eval-s", type=float, default=1.0, help="seconds per evaluation, both sides")
    ap.add_argument("--evaluators", type=int, default=4, help="evaluations at once, both sides")
    ap.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=["small"])
    ap.add_argument("--autocomp-src", type=Path, help=f"Autocomp's git mirror or source tree (default: {MIRROR})")
    ap.add_argument("--autocomp-python", default=os.environ.get("AUTOCOMP_PYTHON", sys.executable),
                    help="a Python with Autocomp's dependencies (default: $AUTOCOMP_PYTHON, else this one)")
    ap.add_argument("--work-dir", type=Path, help="keep the runs' directories and logs here (default: a temporary "
                                                  "directory, removed)")
    args = ap.parse_args()
    if args.work_dir:
        args.work_dir.mkdir(parents=True)               # a new one: the runs' directories must not exist yet
    with tempfile.TemporaryDirectory(prefix="bench-vs-autocomp-") as tmp_s:
        tmp = args.work_dir or Path(tmp_s)
        src = extract(args.autocomp_src, tmp)
        if src is None:
            print(f"no Autocomp source: give --autocomp-src DIR (a git mirror or a checkout of ucb-bar/autocomp); "
                  f"{args.autocomp_src or MIRROR} is not one")
            return 2
        env = {**os.environ, "PYTHONPATH": str(src), "WANDB_MODE": "disabled"}
        check = subprocess.run([args.autocomp_python, "-c", "import autocomp.search.search"], cwd=tmp, env=env,
                               capture_output=True, text=True, check=False)
        if check.returncode != 0:
            last = (check.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{args.autocomp_python} cannot import Autocomp ({last}): give --autocomp-python, a virtualenv with "
                  "`pip install openai google-genai anthropic boto3 numpy wandb together pyyaml`")
            return 2
        start = src / START
        start_cycles = cycles(start.read_text())
        results: dict[tuple[str, str], list[dict]] = {}
        for i in range(args.runs):
            for shape_name in args.shapes:
                for side, fn, arg in (("this project", ours, start), ("Autocomp", autocomp, src)):
                    work = tmp / f"{shape_name}-{side.split()[-1]}-{i}"
                    work.mkdir()
                    r = fn(SHAPES[shape_name], args, arg, start_cycles, work)
                    results.setdefault((shape_name, side), []).append(r)
                    print(f"run {i + 1}/{args.runs} {shape_name} {side}: {r['plans']}+{r['codes']} calls, "
                          f"{r['evals']} evaluations, first request {r['first']:.2f} s, wall {r['wall']:.2f} s, "
                          f"CPU {r['cpu']:.2f} s", flush=True)
    table = Table(title=f"One search, this project vs Autocomp: the same local provider (plans 2-4 s, code 3-6 s), "
                        f"evaluations of {args.eval_s:g} s, {args.evaluators} at once; medians of {args.runs} run(s)")
    for col in ("shape", "side", "model calls (plan+code)", "evaluations", "launch to first request s", "wall s",
                "CPU s (all processes)"):
        table.add_column(col, justify="left" if col in ("shape", "side") else "right")
    for shape_name in args.shapes:
        s = SHAPES[shape_name]
        label = f"{shape_name} (T={s['T']} B={s['B']} N={s['N']} K={s['K']})"
        med = {}
        for side in ("this project", "Autocomp"):
            runs = results[(shape_name, side)]
            calls = sorted({f"{r['plans'] + r['codes']} ({r['plans']}+{r['codes']})" for r in runs})
            med[side] = {k: statistics.median(r[k] for r in runs) for k in ("first", "wall", "cpu")}
            table.add_row(label, side, " / ".join(calls), " / ".join(sorted({str(r["evals"]) for r in runs})),
                          *(f"{med[side][k]:.2f}" for k in ("first", "wall", "cpu")))
        table.add_row(label, "Autocomp / this project", "", "",
                      *(f"{med['Autocomp'][k] / med['this project'][k]:.2f}x" for k in ("first", "wall", "cpu")),
                      end_section=True)
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
