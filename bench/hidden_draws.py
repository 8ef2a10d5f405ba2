"""Every shipped trainium-sim kernel against many fresh hidden input sets: a starting or hand-tuned kernel that
fails an unlucky draw would end a user's run (or mark a correct candidate wrong), so each problem's tolerance must
hold on every draw, not on the public set alone.

    python bench/hidden_draws.py [--problems a,b] [--rounds N] [--sets N]

Each round is a new evaluator (TrainiumSim), so its hidden sets are drawn afresh from a secret seed; every kernel
(naive, tuned, naive_nki2, tuned_nki2) is judged on the public set and --sets hidden ones per round. The table
gives per problem and kernel how many evaluations were correct, and the first failure's message. The default
problems are those that evaluate in seconds (about 100 s a round on 2 cores). Exit status 1 when any failed.
"""
from __future__ import annotations

import argparse
from collections import defaultdict

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402

FAST = ("attention", "conv1d", "conv2d-small", "csa-2048", "cumsum", "gemm-1024", "layernorm", "mamba", "maxpool",
        "mha", "rmsnorm", "rope", "sd-attention", "transpose-small")
KERNELS = (("nki1", "naive"), ("nki1", "tuned"), ("nki2", "naive_nki2"), ("nki2", "tuned_nki2"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default=",".join(FAST), help="comma-separated trainium-sim problems")
    ap.add_argument("--rounds", type=int, default=3, help="evaluators, each drawing its own hidden sets")
    ap.add_argument("--sets", type=int, default=8, help="hidden input sets per round")
    args = ap.parse_args()
    target_class = type(get_target("trainium-sim"))
    correct, total, first_error = defaultdict(int), defaultdict(int), {}
    for _ in range(args.rounds):
        sim = target_class(hidden_sets=args.sets)
        for name in args.problems.split(","):
            for isa, role in KERNELS:
                problem = sim.problem(name, isa)
                result = sim.judge(problem, problem.kernel_source(role))
                total[name, role] += 1
                correct[name, role] += bool(result.correct)
                if not result.correct:
                    first_error.setdefault((name, role), result.error.splitlines()[0][:120])
    table = Table(title=f"trainium-sim kernels: {args.rounds} rounds x (1 public + {args.sets} fresh hidden sets)")
    for column in ("problem", "kernel", "correct", "first failure"):
        table.add_column(column)
    for (name, role), n in total.items():
        table.add_row(name, role, f"{correct[name, role]}/{n}", first_error.get((name, role), ""))
    Console(width=160).print(table)
    return 1 if first_error else 0


if __name__ == "__main__":
    raise SystemExit(main())
