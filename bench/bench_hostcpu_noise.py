"""How noisy hostcpu's latencies are on this machine: each listed kernel evaluated N times (default 10), the
spread of the N reported latencies (the CPU-time medians) beside that of the wall-clock medians of the same runs.

    python bench/bench_hostcpu_noise.py [--times 10]
"""
from __future__ import annotations

import statistics

if __package__:
    from . import _checkout  # noqa: F401  (bench.<script>: imported as such, or run with python -m)
else:
    import _checkout  # noqa: F401  (python bench/<script>.py: bench/ is sys.path[0]; binds autocomp_zmq)

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from autocomp_zmq.hw_runners import get_target  # noqa: E402

KERNELS = [("gemm-256x256x256", "naive.c"), ("gemm-256x256x256", "variants/ikj_avx2.c"),
           ("softmax-1024x1024", "naive.c"), ("softmax-1024x1024", "variants/avx2_exp.c"),
           ("sum-16m", "naive.c"), ("sum-16m", "variants/avx2_accumulators.c")]


def spread(values: list[float]) -> str:
    median = statistics.median(values)
    return f"{median:,.1f} ({100 * (max(values) - min(values)) / median:.1f} % / {100 * statistics.pstdev(values) / median:.1f} %)"


def main(times: int = 10) -> None:
    target = get_target("hostcpu")
    table = Table(title=f"hostcpu: {times} evaluations of each kernel; median us (range / std, % of the median)")
    for column in ("problem", "kernel", "latency (CPU time)", "wall clock", "runs per eval", "CPU share"):
        table.add_column(column)
    for name, file in KERNELS:
        problem = target.problem(name)
        folder, _ = target.problem_spec(problem)
        results = [target.evaluate(problem, (folder / file).read_text()) for _ in range(times)]
        bad = [r.error for r in results if not r.correct]
        if bad:
            raise SystemExit(f"{name} {file}: {bad[0]}")
        noise = [r.feedback["noise"] for r in results]
        table.add_row(name, file, spread([r.latency for r in results]),
                      spread([n["wall_median_ns"] / 1000 for n in noise]),
                      f"{min(n['reps'] for n in noise)}-{max(n['reps'] for n in noise)}",
                      f"{min(n['cpu_share'] for n in noise):.2f}-{max(n['cpu_share'] for n in noise):.2f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    typer.run(main)
