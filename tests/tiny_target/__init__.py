"""tiny: a plug-in target that lives entirely outside the product, to prove that adding a target
takes new files only. It registers through the `autocomp_zmq.targets` entry point group (the test
writes a dist-info naming tests.tiny_target:TinyTarget) and imports only autocomp_zmq.sdk and brings its own descriptor, prompt pack, problems and
offline heuristic (heuristic.py).

Its kernels are one line, `solution(tile=T, unroll=U, vectorize=V)`: parameters that are parsed,
never executed, so there is nothing to sandbox. Latency, in microseconds, follows a small cost
model of a vector machine; an unroll deeper than the tile drops elements (a wrong result), which
gives the repairer something to repair."""
from __future__ import annotations

import re
import time
from pathlib import Path

from autocomp_zmq.sdk import EvalResult, Problem, Target

HERE = Path(__file__).resolve().parent
TILES = (1, 2, 4, 8, 16, 32, 64)
KERNEL = re.compile(r"^\s*solution\(\s*tile\s*=\s*(\d+)\s*,\s*unroll\s*=\s*(\d+)\s*,\s*vectorize\s*=\s*([01])\s*\)\s*$",
                    re.M)


def parse(code: str) -> tuple[int, int, int] | None:
    m = KERNEL.search(code)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def render(tile: int, unroll: int, vectorize: int) -> str:
    return f"# tiny kernel\nsolution(tile={tile}, unroll={unroll}, vectorize={vectorize})\n"


def latency_us(n: int, tile: int, unroll: int, vectorize: int) -> float:
    lanes = min(tile, 16) * (2 if vectorize and tile % 4 == 0 else 1)
    loop_overhead = n / (tile * unroll) * 0.004
    return round(n * 0.01 / lanes + loop_overhead + 0.5, 4)


class TinyTarget(Target):
    home = HERE

    def __init__(self, **options) -> None:
        pass

    def problems(self) -> list[Problem]:
        naive = self.info().problems / "sum_naive.txt"
        return [Problem(name=f"sum-{n}", target=self.name, family="sum", dims={"N": n},
                        description=f"Sum a vector of N={n} floats. Entry point: solution(tile, unroll, vectorize).",
                        kernels={"naive": naive}) for n in (4096, 65536)]

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        started = time.monotonic()
        params = parse(code)
        if params is None:
            return EvalResult.failure("compile", "no line `solution(tile=T, unroll=U, vectorize=V)` in the kernel")
        tile, unroll, vectorize = params
        if tile not in TILES or not 1 <= unroll <= 8:
            return EvalResult.failure("compile", f"tile must be one of {TILES} and unroll 1..8, not {tile}, {unroll}")
        if unroll > tile:
            return EvalResult.failure("wrong_result", f"unroll {unroll} > tile {tile}: the remainder loop drops "
                                                      f"{problem.dims['N'] % (tile * unroll) or tile} elements")
        n = problem.dims["N"]
        latency = latency_us(n, tile, unroll, vectorize)
        best = latency_us(n, 64, 8, 1)
        return EvalResult(correct=True, latency=latency, latency_unit="us", roofline_fraction=best / latency,
                          feedback={"lanes": min(tile, 16), "loop_overhead_us": round(n / (tile * unroll) * 0.004, 4)},
                          feedback_text=f"Latency: {latency} us; {best / latency:.0%} of the best this machine allows.",
                          wall_s=time.monotonic() - started)
