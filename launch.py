"""Command-line entry point: `python launch.py --help`."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from hw_runners import get_target, target_names
from hw_runners.base import UnknownProblemError, UnknownTargetError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="LLM-driven optimizer for tensor-accelerator kernels.")
console = Console()
err = Console(stderr=True)

TargetOpt = Annotated[str, typer.Option("--target", "-t", help="Hardware target.")]


def _target(name: str, **options):
    try:
        return get_target(name, **options)
    except UnknownTargetError as exc:
        err.print(f"[red]error:[/red] {exc.args[0]}")
        raise typer.Exit(2) from None


@app.command()
def problems(target: TargetOpt = "gemmini-sim",
             as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False) -> None:
    """List the problems of a target."""
    tgt = _target(target)
    rows = tgt.problems()
    if as_json:
        for p in rows:
            print(json.dumps({"name": p.name, "family": p.family, "dims": p.dims, "tags": list(p.tags),
                              "kernels": {k: str(v) for k, v in p.kernels.items()}}))
        return
    table = Table(title=f"{target} problems")
    for col in ("name", "family", "sizes", "tags"):
        table.add_column(col)
    for p in rows:
        table.add_row(p.name, p.family, " ".join(f"{k}={v}" for k, v in p.dims.items()), ",".join(p.tags))
    console.print(table)


@app.command("eval")
def evaluate(kernel: Annotated[str, typer.Argument(help="Kernel source file, '-' for stdin, or "
                                                        "builtin:ROLE (naive, tuned, hwloop).")],
             problem: Annotated[str, typer.Option("--problem", "-p", help="Problem name.")],
             target: TargetOpt = "gemmini-sim",
             as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
             seed: Annotated[int, typer.Option(help="Seed of the input sets.")] = 0,
             trace: Annotated[Optional[Path], typer.Option(help="Write the per-instruction timing trace here.")] = None,
             ) -> None:
    """Evaluate one kernel: compile, check against the reference, measure.
    Exit status: 0 correct, 1 incorrect or failed, 2 usage error."""
    tgt = _target(target)
    try:
        prob = tgt.problem(problem)
    except UnknownProblemError as exc:
        err.print(f"[red]error:[/red] {exc.args[0]}")
        raise typer.Exit(2) from None
    if kernel.startswith("builtin:"):
        role = kernel.split(":", 1)[1]
        if role not in prob.kernels:
            err.print(f"[red]error:[/red] no built-in kernel {role!r}; choose from {', '.join(prob.kernels)}")
            raise typer.Exit(2)
        code = prob.kernel_source(role)
    elif kernel == "-":
        code = sys.stdin.read()
    else:
        try:
            code = Path(kernel).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            err.print(f"[red]error:[/red] cannot read kernel {kernel}: {exc}")
            raise typer.Exit(2) from None
    result = tgt.evaluate(prob, code, seed=seed, trace_path=trace)
    if as_json:
        print(json.dumps(result.to_dict()))
    else:
        _print_result(prob.name, result)
    raise typer.Exit(0 if result.correct else 1)


def _print_result(name: str, r) -> None:
    if r.correct:
        console.print(f"[green]correct[/green] {name}: {r.cycles:,} {r.latency_unit}, "
                      f"utilization {r.utilization:.1%}, {r.roofline_fraction:.1%} of roofline "
                      f"({r.bound}-bound), evaluated in {r.wall_s:.2f} s")
        console.print(r.feedback_text, highlight=False)
    else:
        console.print(f"[red]failed[/red] {name} ({r.error_kind}): {r.error}", highlight=False)
    if r.stdout:
        console.print("[dim]kernel stdout:[/dim]\n" + r.stdout, highlight=False, markup=False)


@app.command()
def targets() -> None:
    """List the available targets."""
    for name in target_names():
        console.print(name)


if __name__ == "__main__":
    app()
