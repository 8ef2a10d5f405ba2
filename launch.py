"""Command-line entry point: `python launch.py --help`."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from agents import logsetup
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
def run(
    target: Annotated[Optional[str], typer.Option("--target", "-t", help="Hardware target [gemmini-sim].")] = None,
    problem: Annotated[Optional[str], typer.Option("--problem", "-p", help="Problem to optimize.")] = None,
    kernel: Annotated[Optional[Path], typer.Option(help="Starting kernel (default: the problem's naive kernel).")] = None,
    iterations: Annotated[Optional[int], typer.Option("--iterations", "-T", help="Beam-search iterations.")] = None,
    beam: Annotated[Optional[int], typer.Option("--beam", "-B", help="Beam width.")] = None,
    plans: Annotated[Optional[int], typer.Option("--plans", "-N", help="Plans per beam candidate.")] = None,
    codes: Annotated[Optional[int], typer.Option("--codes", "-K", help="Code candidates per plan.")] = None,
    dropout: Annotated[Optional[float], typer.Option(help="Menu dropout as the keep-probability of each option.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of every random choice of the search.")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Planning model (repeatable: ensembling).")] = None,
    code_model: Annotated[Optional[list[str]], typer.Option("--code-model", help="Coding model (repeatable).")] = None,
    evaluators: Annotated[Optional[int], typer.Option(help="Local evaluator processes (default: one per core).")] = None,
    planners: Annotated[Optional[int], typer.Option(help="Local planner processes.")] = None,
    coders: Annotated[Optional[int], typer.Option(help="Local coder processes.")] = None,
    repairers: Annotated[Optional[int], typer.Option(help="Local repairer processes.")] = None,
    max_evals: Annotated[Optional[int], typer.Option(help="Stop after this many evaluations.")] = None,
    patience: Annotated[Optional[int], typer.Option(help="Stop after this many iterations without improvement.")] = None,
    bind: Annotated[Optional[str], typer.Option(help="Coordinator endpoint, e.g. tcp://0.0.0.0:5555 for remote workers.")] = None,
    curve: Annotated[Optional[bool], typer.Option("--curve/--no-curve", help="Encrypt links with CurveZMQ.")] = None,
    max_cost: Annotated[Optional[float], typer.Option(help="Hard cap in USD on model calls (in-flight calls count).")] = None,
    replay: Annotated[Optional[Path], typer.Option(help="Answer model jobs only from this recorded run (no network).")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="Sampling temperature for the models.")] = None,
    reasoning_effort: Annotated[Optional[str], typer.Option(help="low, medium or high (OpenAI reasoning models).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run directory to create.")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML file with any of these options.")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue the run in this directory.")] = None,
    live: Annotated[Optional[bool], typer.Option("--live/--no-live", help="Live table (default: on a terminal).")] = None,
) -> None:
    """Optimize a kernel: beam search over plans and code from the agents."""
    from agents.run import RunConfig, RunError, execute
    logsetup.configure()
    given = {"target": target, "problem": problem, "kernel": str(kernel) if kernel else None,
             "iterations": iterations, "beam": beam, "plans": plans, "codes": codes, "dropout": dropout,
             "seed": seed, "models": model, "code_models": code_model, "evaluators": evaluators,
             "planners": planners, "coders": coders, "repairers": repairers, "max_evals": max_evals,
             "patience": patience, "bind": bind, "curve": curve, "max_cost": max_cost,
             "replay": str(replay) if replay else None, "temperature": temperature,
             "reasoning_effort": reasoning_effort}
    try:
        base = RunConfig.from_toml(config) if config else {}
        cfg = RunConfig(**{**base, **{k: v for k, v in given.items() if v is not None}})
        summary = execute(cfg, out=out, resume=resume, live=live)
    except RunError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    if "speedup" not in summary:
        err.print(f"[red]no result:[/red] {summary['stop_reason']}")
        raise typer.Exit(1)
    console.print(f"Stopped: {summary['stop_reason']} after {summary['evaluations']} evaluations.")
    console.print(f"Best kernel: {summary['best_cycles']:,.0f} cycles vs {summary['baseline_cycles']:,.0f} "
                  f"for the starting kernel; {summary['best_roofline']:.1%} of roofline. "
                  f"Written to {summary['run_dir']}/best.c")
    if summary.get("cost_usd"):
        console.print(f"Model calls cost ${summary['cost_usd']:.2f}.")
    console.print(f"Speedup: {summary['speedup']:.2f}x")


@app.command()
def worker(
    role: Annotated[str, typer.Option(help="planner, coder, repairer or evaluator.")],
    connect: Annotated[str, typer.Option(help="Coordinator endpoint, e.g. tcp://head:5555.")],
    secret_file: Annotated[Path, typer.Option(help="The run's secret file (copy RUN_DIR/secret, mode 0600).")],
    impl: Annotated[Optional[str], typer.Option(help="Implementation (default: heuristic; target for evaluators).")] = None,
    target: Annotated[str, typer.Option(help="Target an evaluator runs.")] = "gemmini-sim",
    capacity: Annotated[int, typer.Option(help="Jobs this worker runs at once.")] = 1,
    heartbeat: Annotated[float, typer.Option(help="Heartbeat interval until the coordinator sets its own.")] = 1.0,
    curve_server_key: Annotated[Optional[Path], typer.Option(help="Coordinator's CurveZMQ public key file.")] = None,
    parent_pid: Annotated[Optional[int], typer.Option(help="Exit when this process is gone.")] = None,
    latency: Annotated[float, typer.Option(help="Mean seconds per job of the synthetic implementation.")] = 0.0,
    jitter: Annotated[float, typer.Option(help="Synthetic latency spread (uniform: +-fraction; lognormal: log-sd).")] = 0.0,
    latency_dist: Annotated[str, typer.Option(help="Synthetic latency distribution: uniform or lognormal.")] = "uniform",
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Model spec an llm worker serves (repeatable).")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="Sampling temperature for llm workers.")] = None,
    reasoning_effort: Annotated[Optional[str], typer.Option(help="low, medium or high (OpenAI reasoning models).")] = None,
    call_timeout: Annotated[float, typer.Option(help="Seconds per model call.")] = 600.0,
    call_retries: Annotated[int, typer.Option(help="Retries on 429/5xx/timeouts (with backoff, Retry-After).")] = 4,
) -> None:
    """Serve jobs of one role for a running coordinator (this host or another)."""
    import importlib

    from agents.worker import serve
    from bus.auth import SecretError, load_secret
    from bus.curve import load_public_key
    from bus.timing import BusTiming
    logsetup.configure()
    roles = ("planner", "coder", "repairer", "evaluator")
    if role not in roles:
        err.print(f"[red]error:[/red] unknown role {role!r}; choose from {', '.join(roles)}")
        raise typer.Exit(2)
    impls = importlib.import_module(f"agents.{role}").IMPLEMENTATIONS   # only this role's dependencies
    name = impl or next(iter(impls))
    if name not in impls:
        err.print(f"[red]error:[/red] role {role} has no implementation {name!r}; choose from {', '.join(impls)}")
        raise typer.Exit(2)
    try:
        key = load_secret(secret_file)
        server_key = load_public_key(curve_server_key) if curve_server_key else None
        from agents.llm.providers import CallOptions
        if reasoning_effort not in (None, "low", "medium", "high"):
            raise ValueError(f"--reasoning-effort must be low, medium or high, not {reasoning_effort!r}")
        implementation = impls[name](target=target, latency_s=latency, jitter=jitter, latency_dist=latency_dist,
                                     models=model or [],
                                     call_options=CallOptions(timeout_s=call_timeout, max_retries=call_retries,
                                                              temperature=temperature,
                                                              reasoning_effort=reasoning_effort))
    except (SecretError, OSError, ValueError, UnknownTargetError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    raise typer.Exit(serve(role, implementation, connect, key, capacity=capacity,
                           target=target if role == "evaluator" else None, timing=BusTiming(heartbeat_s=heartbeat),
                           curve_server_key=server_key, parent_pid=parent_pid))


@app.command()
def targets() -> None:
    """List the available targets."""
    for name in target_names():
        console.print(name)


if __name__ == "__main__":
    app()
