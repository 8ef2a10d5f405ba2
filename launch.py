"""Command-line entry point: `python launch.py --help`."""
from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
import zmq
from rich.table import Table

from agents import logsetup
from agents.console import make_console
from hw_runners import get_target, target_names
from hw_runners.base import UnknownProblemError, UnknownTargetError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="LLM-driven optimizer for tensor-accelerator kernels.")
console = make_console()
err = make_console(stderr=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, never interpreted as markup (messages quote code and paths), then exit."""
    err.print(f"error: {message}", markup=False, highlight=False, style="red")
    raise typer.Exit(code)

TargetOpt = Annotated[str, typer.Option("--target", "-t", help="Hardware target.")]


def _target(name: str, **options):
    try:
        return get_target(name, **options)
    except UnknownTargetError as exc:
        _fail(exc.args[0])


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
             trace: Annotated[Optional[Path], typer.Option(help="Write the per-instruction timing trace here.",
                                                           show_default="none")] = None,
             timeout: Annotated[Optional[float], typer.Option(help="Seconds the kernel may run per evaluation "
                                                              "(none: the target's limit).", metavar="S",
                                                              show_default="none")] = None,
             ) -> None:
    """Evaluate one kernel: compile, check against the reference, measure.
    Exit status: 0 correct, 1 incorrect or failed, 2 usage error."""
    if timeout is not None and not timeout > 0:
        _fail(f"--timeout must be > 0 seconds, not {timeout}")
    tgt = _target(target)
    try:
        prob = tgt.problem(problem)
    except UnknownProblemError as exc:
        _fail(exc.args[0])
    if kernel.startswith("builtin:"):
        role = kernel.split(":", 1)[1]
        if role not in prob.kernels:
            _fail(f"no built-in kernel {role!r}; choose from {', '.join(prob.kernels)}")
        code = prob.kernel_source(role)
    elif kernel == "-":
        code = sys.stdin.read()
    else:
        try:
            code = Path(kernel).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"cannot read kernel {kernel}: {exc}")
    result = tgt.evaluate(prob, code, seed=seed, trace_path=trace, time_limit_s=timeout)
    if as_json:
        print(json.dumps(result.to_dict()))
    else:
        _print_result(prob.name, result)
    raise typer.Exit(0 if result.correct else 1)


def _print_result(name: str, r) -> None:
    # markup off throughout: errors and feedback quote kernel code, e.g. mvin(&A[i][k], ...)
    if r.correct:
        console.print(f"correct {name}: {r.cycles:,} {r.latency_unit}, utilization {r.utilization:.1%}, "
                      f"{r.roofline_fraction:.1%} of roofline ({r.bound}-bound), evaluated in {r.wall_s:.2f} s",
                      style="green", markup=False, highlight=False)
        console.print(r.feedback_text, markup=False, highlight=False)
    else:
        console.print(f"failed {name} ({r.error_kind}): {r.error}", style="red", markup=False, highlight=False)
    if r.stdout:
        console.print("kernel stdout:\n" + r.stdout, highlight=False, markup=False)


def _opt(name: str, *decls: str, help: str, metavar: str | None = None):
    """A `run` option named like its RunConfig field (and TOML key), with the field's default in --help."""
    from agents.runconfig import RunConfig
    default = {f.name: f for f in dataclasses.fields(RunConfig)}[name]
    value = default.default_factory() if default.default_factory is not dataclasses.MISSING else default.default
    shown = {None: "none", True: "on", False: "off"}.get(value, value) if not isinstance(value, list) else \
        (", ".join(value) or "same as --model")
    return typer.Option(*(decls or ("--" + name.replace("_", "-"),)), help=help, metavar=metavar,
                        show_default=str(shown))


N, X, F = "N", "X", "FILE"


@app.command()
def run(
    target: Annotated[Optional[str], _opt("target", "--target", "-t", help="Hardware target.", metavar="NAME")] = None,
    problem: Annotated[Optional[str], _opt("problem", "--problem", "-p", help="Problem to optimize.",
                                           metavar="NAME")] = None,
    kernel: Annotated[Optional[Path], _opt("kernel", help="Starting kernel file (none: the problem's naive kernel).",
                                           metavar=F)] = None,
    out: Annotated[Optional[Path], _opt("out", "--out", "-o", help="Run directory to create (none: "
                                        "runs/PROBLEM-TIME).", metavar="DIR")] = None,
    iterations: Annotated[Optional[int], _opt("iterations", "--iterations", "-T", help="Beam-search iterations.",
                                              metavar=N)] = None,
    beam: Annotated[Optional[int], _opt("beam", "--beam", "-B", help="Beam width.", metavar=N)] = None,
    plans: Annotated[Optional[int], _opt("plans", "--plans", "-N", help="Plans per beam candidate.", metavar=N)] = None,
    codes: Annotated[Optional[int], _opt("codes", "--codes", "-K", help="Code candidates per plan.", metavar=N)] = None,
    dropout: Annotated[Optional[float], _opt("dropout", help="Menu dropout as the keep-probability of each "
                                             "option.", metavar="P")] = None,
    seed: Annotated[Optional[int], _opt("seed", help="Seed of every random choice of the search.", metavar=N)] = None,
    model: Annotated[Optional[list[str]], _opt("model", help="Planning model (repeatable: ensembling).",
                                               metavar="SPEC")] = None,
    code_model: Annotated[Optional[list[str]], _opt("code_model", help="Coding model (repeatable).",
                                                    metavar="SPEC")] = None,
    evaluators: Annotated[Optional[int], _opt("evaluators", help="Local evaluator processes (none: one per core; "
                                              "0: remote workers only).", metavar=N)] = None,
    planners: Annotated[Optional[int], _opt("planners", help="Local heuristic planner processes.", metavar=N)] = None,
    coders: Annotated[Optional[int], _opt("coders", help="Local heuristic coder processes.", metavar=N)] = None,
    repairers: Annotated[Optional[int], _opt("repairers", help="Local heuristic repairer processes.",
                                             metavar=N)] = None,
    max_repairs: Annotated[Optional[int], _opt("max_repairs", help="Repair attempts per failed candidate.",
                                               metavar=N)] = None,
    max_evals: Annotated[Optional[int], _opt("max_evals", help="Stop after this many evaluations.", metavar=N)] = None,
    patience: Annotated[Optional[int], _opt("patience", help="Stop after this many iterations without improvement.",
                                            metavar=N)] = None,
    stop_roofline: Annotated[Optional[float], _opt("stop_roofline", help="Stop once the best reaches this fraction "
                                                   "of roofline.", metavar=X)] = None,
    max_cost: Annotated[Optional[float], _opt("max_cost", help="Hard cap in USD on model calls (in-flight calls "
                                              "count).", metavar="USD")] = None,
    bind: Annotated[Optional[str], _opt("bind", help="Coordinator endpoint, e.g. tcp://0.0.0.0:5555 for remote "
                                        "workers.", metavar="ENDPOINT")] = None,
    curve: Annotated[Optional[bool], _opt("curve", "--curve/--no-curve", help="Encrypt links with CurveZMQ.",
                                          metavar="")] = None,
    replay: Annotated[Optional[Path], _opt("replay", help="Answer model jobs only from this recorded run (no "
                                           "network).", metavar="RUN_DIR")] = None,
    temperature: Annotated[Optional[float], _opt("temperature", help="Sampling temperature for the models.",
                                                 metavar=X)] = None,
    reasoning_effort: Annotated[Optional[str], _opt("reasoning_effort", help="low, medium or high (OpenAI "
                                                    "reasoning models).", metavar="LEVEL")] = None,
    call_timeout_s: Annotated[Optional[float], _opt("call_timeout_s", help="Seconds per model call.",
                                                    metavar="S")] = None,
    call_retries: Annotated[Optional[int], _opt("call_retries", help="Retries of a model call on 429/5xx/timeouts.",
                                                metavar=N)] = None,
    preflight: Annotated[Optional[bool], _opt("preflight", "--preflight/--no-preflight", help="Check that every "
                                              "model endpoint answers before starting.", metavar="")] = None,
    check_start: Annotated[Optional[bool], _opt("check_start", "--check-start/--no-check-start", help="Evaluate the "
                                                "starting kernel before agents start, to fail fast.",
                                                metavar="")] = None,
    heartbeat_s: Annotated[Optional[float], _opt("heartbeat_s", help="Heartbeat interval of the bus.",
                                                 metavar="S")] = None,
    eval_lease_s: Annotated[Optional[float], _opt("eval_lease_s", help="Seconds an evaluator may hold a job.",
                                                  metavar="S")] = None,
    llm_lease_s: Annotated[Optional[float], _opt("llm_lease_s", help="Seconds a model agent may hold a job.",
                                                 metavar="S")] = None,
    config: Annotated[Optional[Path], typer.Option(help="TOML file with any of these options (same names, with "
                                                   "underscores).", metavar=F, show_default="none")] = None,
    resume: Annotated[Optional[Path], typer.Option(help="Continue the run in this directory (-T, --max-evals, "
                                                   "--max-cost, --patience extend it).", metavar="RUN_DIR",
                                                   show_default="none")] = None,
    live: Annotated[Optional[bool], typer.Option("--live/--no-live", help="Live table.", metavar="",
                                                 show_default="on a terminal")] = None,
) -> None:
    """Optimize a kernel: beam search over plans and code from the agents."""
    given = {k: v for k, v in locals().items() if v is not None and k not in ("config", "resume", "live")}
    from agents.run import RunConfig, RunError, execute
    from agents.runconfig import ConfigError
    logsetup.configure()
    given = {k: str(v) if isinstance(v, Path) else v for k, v in given.items()}
    try:
        base = RunConfig.from_toml(config) if config else {}
        options = {**base, **given}
        if resume and "out" in options:
            raise ConfigError("give either --out (a new run) or --resume (an existing one), not both")
        cfg = None if resume else RunConfig(**options)
        summary = execute(cfg, resume=resume, given=options, live=live)
    except (RunError, ConfigError) as exc:
        _fail(str(exc))
    except (OSError, sqlite3.Error, zmq.ZMQError) as exc:   # anything the checks above did not foresee
        _fail(f"{type(exc).__name__}: {exc}")
    _print_summary(summary)


def _print_summary(summary: dict) -> None:
    if summary.get("rescued_to"):
        err.print(f"warning: {summary['rescue_reason']}; the results and the run store were saved to "
                  f"{summary['rescued_to']}", markup=False, style="yellow")
    if summary.get("failures"):
        top = "; ".join(f"{reason} x{n}" for reason, n in list(summary["failures"].items())[:5])
        console.print(f"Failures by reason: {top}", markup=False, highlight=False)
    if summary.get("warning"):
        err.print(f"warning: {summary['warning']}", markup=False, style="yellow")
    if summary.get("error"):
        err.print(f"error: {summary['error']}", markup=False, style="red")
        raise typer.Exit(1)
    if "speedup" not in summary:
        err.print(f"no result: {summary['stop_reason']}", markup=False, style="red")
        raise typer.Exit(1)
    where = summary.get("rescued_to") or summary["run_dir"]
    console.print(f"Stopped: {summary['stop_reason']} after {summary['evaluations']} evaluations.", markup=False)
    console.print(f"Best kernel: {summary['best_cycles']:,.0f} cycles vs {summary['baseline_cycles']:,.0f} "
                  f"for the starting kernel; {summary['best_roofline']:.1%} of roofline. "
                  f"Written to {where}/best.c", markup=False, highlight=False)
    if summary.get("cost_usd"):
        console.print(f"Model calls cost ${summary['cost_usd']:.2f}.", markup=False)
    console.print(f"Speedup: {summary['speedup']:.2f}x", markup=False, highlight=False)


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
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Model spec an llm worker serves (repeatable).",
                                                       metavar="SPEC", show_default="none")] = None,
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
        _fail(f"unknown role {role!r}; choose from {', '.join(roles)}")
    impls = importlib.import_module(f"agents.{role}").IMPLEMENTATIONS   # only this role's dependencies
    name = impl or next(iter(impls))
    if name not in impls:
        _fail(f"role {role} has no implementation {name!r}; choose from {', '.join(impls)}")
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
        _fail(str(exc))
    raise typer.Exit(serve(role, implementation, connect, key, capacity=capacity,
                           target=target if role == "evaluator" else None, timing=BusTiming(heartbeat_s=heartbeat),
                           curve_server_key=server_key, parent_pid=parent_pid))


@app.command()
def targets() -> None:
    """List the available targets."""
    for name in target_names():
        console.print(name)


from agents.inspect_cli import register as _register_inspect  # noqa: E402
_register_inspect(app, console, err)


if __name__ == "__main__":
    app()
