"""KernelBench as it is published, through the cuda target: every problem file of each level imported unchanged
(`problems --kernelbench`), then its starting kernel (the reference itself as ModelNew: an honest kernel that must be
judged correct) evaluated by the judge. Per level: files, imported, evaluated correct, wrong, crashed, refused.

    git clone https://github.com/ScalingIntelligence/KernelBench
    python bench/bench_kernelbench.py --kernelbench KernelBench/KernelBench [--levels 1,2,3] [--device cpu]
                                      [--limit N] [--workers 2] [--markdown FILE]

On the CPU check (--device cpu, the default without a GPU) the problems run at the small sizes the import derived;
on a GPU at KernelBench's own sizes. Each failure is listed with its first line; exits 1 if any imported problem's
starting kernel was not judged correct.
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402
from autocomp_zmq.hw_runners.cuda import environment, kernelbench as kb  # noqa: E402
from autocomp_zmq.hw_runners.cuda.gpu import host_gpus  # noqa: E402
from autocomp_zmq.hw_runners.definition_files import read  # noqa: E402

OUTCOMES = ("correct", "wrong", "crashed", "refused", "setup")


def outcome(result) -> str:
    if result.correct:
        return "correct"
    return {"wrong_result": "wrong", "policy": "refused", "setup": "setup"}.get(result.error_kind, "crashed")


def evaluate(target, path: Path, time_limit_s: float):
    problem = target.problem_from_definition(read(path))
    started = time.monotonic()
    result = target.evaluate(problem, problem.kernel_source("start"), time_limit_s=time_limit_s)
    return problem.name, result, time.monotonic() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, required=True, help="KernelBench's problem folder (holds level1...)")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if host_gpus() else "cpu")
    ap.add_argument("--limit", type=int, help="at most this many problems per level (the first ones)")
    ap.add_argument("--workers", type=int, default=2, help="evaluations at a time (CPU check)")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per evaluation")
    ap.add_argument("--markdown", type=Path, help="also write the table to this Markdown file")
    args = ap.parse_args()
    target = get_target("cuda", device=args.device)
    missing = target.unmet_requirements()
    if missing:
        print("error: the cuda target cannot run here: " + "; ".join(missing))
        return 2
    workers = 1 if args.device == "cuda" else max(1, args.workers)    # one evaluator per GPU
    rows, failures, started = [], [], time.monotonic()
    out = Path(tempfile.mkdtemp(prefix="kernelbench-problems-"))
    for level in args.levels.split(","):
        files = kb.kernelbench_files([args.kernelbench / f"level{level}"])[:args.limit]
        imported = kb.import_files(files, target=target)
        paths = [kb.write_problem(imp, out / f"level{level}") for imp in imported if imp.ok]
        failures += [(imp.name, "not imported", imp.error) for imp in imported if not imp.ok]
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda p: evaluate(target, p, args.time_limit), paths))
        counts = Counter(outcome(r) for _, r, _ in results)
        for name, r, _ in results:
            if not r.correct:
                failures.append((name, outcome(r), (r.error or "").splitlines()[0][:220]))
        walls = sorted(w for _, _, w in results)
        rows.append([f"level {level}", str(len(files)), str(len(paths)), *(str(counts[o]) for o in OUTCOMES),
                     f"{walls[len(walls) // 2]:.1f}" if walls else "-"])
        print(f"level {level}: {counts['correct']} of {len(files)} correct ({time.monotonic() - started:.0f} s)",
              file=sys.stderr)
    cols = ("level", "files", "imported", *("evaluated " + o if o == "correct" else o for o in OUTCOMES),
            "median eval s")
    table = Table(title=f"KernelBench through the cuda judge ({args.device}): the reference as ModelNew")
    for col in cols:
        table.add_column(col, justify="left" if col == "level" else "right")
    for r in rows:
        table.add_row(*r)
    Console(width=max(140, Console().width)).print(table)
    for name, what, why in failures:
        print(f"{name}: {what}: {why}")
    facts = environment.probe(target._python())
    header = (f"device: {args.device}; torch {facts.get('torch')}, triton {facts.get('triton')}, python "
              f"{platform.python_version()}; {time.monotonic() - started:.0f} s")
    print(header)
    if args.markdown:
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + ["| " + " | ".join(r) + " |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n\n" + header + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
