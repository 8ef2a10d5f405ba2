"""How often the cuda judge refuses an honest kernel for timing noise: many evaluations of kernels that do their work
in forward (each built-in problem's reference offered as its own ModelNew, and the hand-tuned Triton kernels), each
judged as usual; every refusal counted, and for every clock check the largest share of its allowance an honest kernel
used (clock.py: extra time over the reference's same step / what the slack allows; a refusal is > 1).

    python bench/bench_judge_noise.py [--evaluations 120] [--device cpu] [--load 2] [--problems a,b] [--tuned]

--load N keeps N busy processes spinning on the CPU meanwhile (a loaded machine). On the CPU check (--device cpu,
the default without a GPU) the problems run at their `small` sizes. Prints a table per kernel and the false-refusal
rate with its 95% upper bound; exits 1 if any honest evaluation was refused.
"""
from __future__ import annotations

import argparse
import itertools
import multiprocessing
import platform
import sys
import time

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402
from autocomp_zmq.hw_runners.cuda import environment  # noqa: E402
from autocomp_zmq.hw_runners.cuda.gpu import host_gpus  # noqa: E402
from autocomp_zmq.hw_runners.cuda.problems import load_specs  # noqa: E402

CHECKS = ("gen", "flush", "handover", "outside")


def reference_as_kernel(target, name: str) -> str:
    """The problem's reference offered as ModelNew: an honest kernel that does exactly the reference's work."""
    return load_specs(target._problems_dir())[name].reference.read_text() + "\n\nModelNew = Model\n"


def spin() -> None:
    while True:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluations", type=int, default=120)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if host_gpus() else "cpu")
    ap.add_argument("--load", type=int, default=0, help="busy processes spinning meanwhile")
    ap.add_argument("--problems", help="comma-separated problem names (default: all)")
    ap.add_argument("--tuned", action="store_true", help="also the hand-tuned kernels (Triton's interpreter on the CPU)")
    args = ap.parse_args()
    target = get_target("cuda", device=args.device)
    missing = target.unmet_requirements()
    if missing:
        print("error: the cuda target cannot run here: " + "; ".join(missing))
        return 2
    names = args.problems.split(",") if args.problems else [p.name for p in target.problems()]
    kernels = []
    for name in names:
        problem = target.problem(name)
        kernels.append((name, "reference", problem, reference_as_kernel(target, name)))
        tuned = problem.kernel_source("tuned") if "tuned" in problem.kernels else ""
        spec = load_specs(target._problems_dir())[name]
        # Triton's interpreter computes bf16 tl.dot wrongly (tests/cuda/test_problems.py leaves these out too)
        interpretable = "triton" in tuned and not (spec.dtype == "bfloat16" and spec.family in ("gemm", "attention"))
        if args.tuned and (args.device == "cuda" or interpretable):
            kernels.append((name, "tuned", problem, tuned))
    hogs = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.load)]
    for hog in hogs:
        hog.start()
    stats = {(name, role): {"evals": 0, "refused": 0, "failed": 0, "worst": dict.fromkeys(CHECKS, 0.0), "why": ""}
             for name, role, _, _ in kernels}
    started = time.monotonic()
    try:
        for name, role, problem, code in itertools.islice(itertools.cycle(kernels), args.evaluations):
            r = target.evaluate(problem, code)
            s = stats[(name, role)]
            s["evals"] += 1
            for check, row in (r.feedback.get("clock_checks") or {}).items():
                if row["allowed_ms"] > 0:
                    s["worst"][check] = max(s["worst"][check], row["extra_ms"] / row["allowed_ms"])
            if r.error_kind == "policy" and r.feedback.get("clock_checks") is not None:
                s["refused"] += 1
                s["why"] = r.error.splitlines()[0][:160]
            elif not r.correct:
                s["failed"] += 1
                s["why"] = f"{r.error_kind}: {(r.error or '').splitlines()[0][:150]}"
    finally:
        for hog in hogs:
            hog.kill()
    table = Table(title=f"cuda judge: honest kernels refused for timing ({args.device}, {args.load} busy processes)")
    for col in ("problem", "kernel", "evals", "refused", "other failures", *(f"max {c} / allowed" for c in CHECKS)):
        table.add_column(col, justify="left" if col in ("problem", "kernel") else "right")
    for (name, role), s in stats.items():
        table.add_row(name, role, str(s["evals"]), str(s["refused"]), str(s["failed"]),
                      *(f"{s['worst'][c]:.2f}" for c in CHECKS))
    console = Console(width=max(150, Console().width))
    console.print(table)
    for (name, role), s in stats.items():
        if s["why"]:
            print(f"{name} {role}: {s['why']}")
    judged = sum(s["evals"] - s["failed"] for s in stats.values())
    refused = sum(s["refused"] for s in stats.values())
    bound = 3 / judged if refused == 0 and judged else None      # the rule of three: 95% upper bound for 0 of n
    facts = environment.probe(target._python())
    print(f"false refusals: {refused} of {judged} honest evaluations ({refused / max(judged, 1):.1%}"
          + (f"; 95% upper bound {bound:.1%}" if bound is not None else "") + f") in {time.monotonic() - started:.0f} s; "
          f"torch {facts.get('torch')}, triton {facts.get('triton')}, python {platform.python_version()}")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
