"""Command-line entry point: `python launch.py --help` in a checkout, `autocomp --help` when installed."""
from __future__ import annotations

import importlib.util
import inspect
import json
import re
import sqlite3
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
import zmq
from rich.table import Table

if __name__ == "__main__" and importlib.util.find_spec("autocomp_zmq") is None:
    # a checkout that was never installed: its folder is the autocomp_zmq package (agents/ is autocomp_zmq.agents),
    # and workers are started by this file's path rather than by module (agents/run/localagents.py: worker_argv)
    _package = types.ModuleType("autocomp_zmq")
    _package.__path__ = [str(Path(__file__).resolve().parent)]
    _package.__checkout__ = True
    sys.modules["autocomp_zmq"] = _package

from autocomp_zmq.agents.run import logsetup
from autocomp_zmq.agents.run.runflags import WORKER_OPTIONS
from autocomp_zmq.agents.console import NOOP_NOTE, latency_text, make_console
from autocomp_zmq.hw_runners import get_target, target_names
from autocomp_zmq.hw_runners.base import DescriptorError, UnknownTargetError, target_info

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
    except (TypeError, ValueError) as exc:    # an option the target does not have, or a value it refuses
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        _fail(f"{name} has no option {unknown.group(1)!r}" if unknown else f"{name}: {exc}")


ProblemFileOpt = Annotated[Optional[Path], typer.Option(help="A problem file (TOML) defining the problem; sets "
                                                       "--problem and --target.", metavar="FILE",
                                                       show_default="none")]
ProblemsDirOpt = Annotated[Optional[Path], typer.Option(help="A directory of problem files (*.toml).", metavar="DIR",
                                                        show_default="none")]
FileTargetOpt = Annotated[Optional[str], typer.Option("--target", "-t", help="Hardware target.", metavar="NAME",
                                                      show_default="gemmini-sim, or the problem file's")]


@app.command("eval")
def evaluate(kernel: Annotated[str, typer.Argument(help="Kernel source file, '-' for stdin, or "
                                                        "builtin:ROLE (gemmini-sim: naive, baseline, tuned, "
                                                        "hwloop; a problem file's: start).")],
             problem: Annotated[Optional[str], typer.Option("--problem", "-p", help="Problem name (a target's, "
                                                           "a parametric one, or one of --problems-dir).",
                                                           metavar="NAME", show_default="none")] = None,
             problem_file: ProblemFileOpt = None,
             problems_dir: ProblemsDirOpt = None,
             target: FileTargetOpt = None,
             as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
             seed: Annotated[int, typer.Option(help="Seed of the input sets.")] = 0,
             trace: Annotated[Optional[Path], typer.Option(help="Write the per-instruction timing trace here.",
                                                           show_default="none")] = None,
             timeout: Annotated[Optional[float], typer.Option(help="Seconds the kernel may run per evaluation "
                                                              "(none: the target's limit).", metavar="S",
                                                              show_default="none")] = None,
             isa: Annotated[Optional[str], typer.Option(help="ISA profile the kernel is judged under (gemmini-sim: "
                                                        "full, or fine: no loop FSMs or library calls, the "
                                                        "hardware loop as the upper bound).", metavar="PROFILE",
                                                        show_default="the target's default")] = None,
             target_option: Annotated[Optional[list[str]], typer.Option(
                 help="A target option, NAME=VALUE with VALUE in TOML (trainium: platform=\"trn2\", lnc=2, "
                      "latency_percentile=99, nrtpy_python=\"/path/python\"; a dotted NAME sets one field, as in "
                      "limits.wall_s=900); repeatable.", metavar="NAME=VALUE", show_default=False)] = None,
             ) -> None:
    """Evaluate one kernel: compile, check against the reference, measure.
    Exit status: 0 correct, 1 incorrect or failed, 2 usage error."""
    from autocomp_zmq.agents.run.problemsource import ProblemSourceError, load, read_definition, settle
    from autocomp_zmq.agents.run.runconfig import ConfigError
    from autocomp_zmq.agents.run.runflags import option_values
    if timeout is not None and not timeout > 0:
        _fail(f"--timeout must be > 0 seconds, not {timeout}")
    if problem is None and problem_file is None:
        _fail("give --problem NAME or --problem-file FILE")
    try:
        definition = read_definition(problem_file, problems_dir, problem)
        chosen = {"problem": problem, "target": target or "gemmini-sim"}
        settle(chosen, {"problem": problem, "target": target}, definition)
        tgt = _target(chosen["target"], **option_values(target_option or [], "--target-option"))
        prob = load(tgt, chosen["problem"], isa, definition)
    except (ProblemSourceError, ConfigError) as exc:
        _fail(str(exc))
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
    if isa is None and tgt.profile_for(code) not in (None, prob.isa):   # e.g. an NKI v2 kernel: its own profile
        try:
            prob = load(tgt, chosen["problem"], tgt.profile_for(code), definition)
        except ProblemSourceError as exc:
            _fail(str(exc))
    result = tgt.judge(prob, code, seed=seed, trace_path=trace, time_limit_s=timeout)
    if as_json:
        print(json.dumps(result.to_dict()))
    else:
        _print_result(prob.name, result)
    raise typer.Exit(0 if result.correct else 1)


def _print_result(name: str, r) -> None:
    # markup off throughout: errors and feedback quote kernel code, e.g. mvin(&A[i][k], ...)
    if r.correct:
        # what a target could not measure (no peak rates known: no utilization or roofline) is left out
        rates = (f", utilization {r.utilization:.1%}" if r.utilization is not None else "") + \
                (f", {r.roofline_fraction:.1%} of roofline ({r.bound}-bound)" if r.roofline_fraction is not None else "")
        latency = f"{r.latency:,}" if float(r.latency).is_integer() else f"{r.latency:,.2f}"
        console.print(f"correct {name}: {latency} {r.latency_unit}{rates}, evaluated in {r.wall_s:.2f} s",
                      style="green", markup=False, highlight=False)
        console.print(r.feedback_text, markup=False, highlight=False)
    else:
        console.print(f"failed {name} ({r.error_kind}): {r.error}", style="red", markup=False, highlight=False)
    if r.stdout:
        console.print("kernel stdout:\n" + r.stdout, highlight=False, markup=False)


def with_config_options(names: tuple[str, ...] | None = None):
    """Add RunConfig's options (all, or `names`) to a command as flags, in one help panel per section: each
    option is declared once, in its section of RunConfig (name, type, default, help, extra flags), and is the
    same key in a --config TOML file. The command receives them in **options, None where not given."""
    from rich.markup import escape
    from autocomp_zmq.agents.run.runflags import cli_options, flag_of, help_panels, shown_default

    def deco(fn):
        own = [p for p in inspect.signature(fn, eval_str=True).parameters.values()
               if p.kind is not inspect.Parameter.VAR_KEYWORD]
        for name, base, decl, default, section in cli_options(names):
            flag = flag_of(name)
            decls = (f"{flag}/--no-{flag[2:]}",) if base is bool else (flag,)
            opt = typer.Option(*decls, *decl["flags"], help=escape(decl["help"]), metavar=decl["metavar"] or "",
                               show_default=shown_default(decl, default),
                               rich_help_panel=f"Options: {section}" if names is None else None)
            own.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                         annotation=Annotated[Optional[base], opt]))
        # --help shows the panels in the order of the sections (a panel appears where its first option does)
        order = [None, *(f"Options: {section}" for section in help_panels())]
        panel = {p.name: getattr((typing.get_args(p.annotation) or (None,))[-1], "rich_help_panel", None)
                 for p in own}
        own = sorted((p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own),
                     key=lambda p: order.index(panel[p.name]) if panel[p.name] in order else len(order))
        fn.__signature__ = inspect.Signature(own)
        fn.__annotations__ = {p.name: p.annotation for p in own}
        return fn
    return deco


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@with_config_options()
def run(ctx: typer.Context,
        config: Annotated[Optional[Path], typer.Option(help="TOML file with any of these options, by section "
                                                       "(\\[budget] max_cost = 5) or by name (underscores for "
                                                       "dashes); flags override it.", metavar="FILE",
                                                       show_default="none")] = None,
        resume: Annotated[Optional[Path], typer.Option(help="Continue the run in this directory; -T, --max-evals, "
                                                       "--max-cost and --patience give its new totals (-T 12 on an "
                                                       "8-iteration run adds 4).", metavar="RUN_DIR",
                                                       show_default="none")] = None,
        live: Annotated[Optional[bool], typer.Option("--live/--no-live", help="Live table.", metavar="",
                                                     show_default="on a terminal")] = None,
        search_option: Annotated[Optional[list[str]], typer.Option(
            help="An option of the search policy, NAME=VALUE (a TOML value; repeatable): what \\[search.options] "
                 "of a config file holds, for a plug-in policy's own options.", metavar="NAME=VALUE",
            show_default="none", rich_help_panel="Options: search")] = None,
        target_option: Annotated[Optional[list[str]], typer.Option(
            help="An option of the target, NAME=VALUE (a TOML value; repeatable; \\[task.target_options] of a config "
                 "file): trainium-sim and trainium: platform=\"trn2\"; trainium: lnc=2, latency_percentile=99, "
                 "nrtpy_python=\"/path/python\". Every evaluator of the run, local or started with `worker`, takes "
                 "them.", metavar="NAME=VALUE", show_default="none", rich_help_panel="Options: task")] = None,
        **options) -> None:
    """Optimize a kernel: beam search over plans and code from the agents."""
    given = {k: v for k, v in options.items() if v is not None}
    from autocomp_zmq.agents.run.execute import RunError, execute
    from autocomp_zmq.agents.run.runconfig import ConfigError, build, flat_view, from_toml, merge, sectioned
    from autocomp_zmq.agents.run.runflags import option_values, policy_flags
    # warnings before the run directory exists (a model without a price, ...) are lines on the terminal, as the
    # run's own are, never raw JSON records above an error line
    logsetup.to_run_dir(None, err)
    try:
        options = merge(from_toml(config) if config else {}, sectioned(given))
        options = merge(options, {"search": {"options": option_values(search_option or [])}})
        if ctx.args:         # flags the command does not declare: the chosen policy's own options
            policy_own = policy_flags(ctx.args, options.get("search", {}).get("policy"))
            options = merge(options, {"search": {"options": policy_own}})
        if target_option:
            options = merge(options, {"task": {"target_options": option_values(target_option, "--target-option")}})
        if resume and "out" in options.get("task", {}):
            raise ConfigError("give either --out (a new run) or --resume (an existing one), not both")
        cfg = None if resume else build(options)
        summary = execute(cfg, resume=resume, given=flat_view(options), live=live)
    except (RunError, ConfigError) as exc:
        _fail(str(exc))
    except (OSError, sqlite3.Error, zmq.ZMQError) as exc:   # anything the checks above did not foresee
        _fail(f"{type(exc).__name__}: {exc}")
    _print_summary(summary)


def _print_summary(summary: dict) -> None:
    from autocomp_zmq.agents.run.outcome import end_line
    if summary.get("rescued_to"):
        err.print(f"warning: {summary['rescue_reason']}; the results and the run store were saved to "
                  f"{summary['rescued_to']}", markup=False, style="yellow")
    if summary.get("failures"):
        top = "; ".join(f"{reason} x{n}" for reason, n in list(summary["failures"].items())[:5])
        console.print(f"Failures by reason: {top}", markup=False, highlight=False)
    if summary.get("noop_proposals"):
        console.print(f"No-op proposals: {summary['noop_proposals']} ({NOOP_NOTE}).", markup=False, highlight=False)
    if summary.get("warning"):
        err.print(f"warning: {summary['warning']}", markup=False, style="yellow")
    if summary.get("error"):
        err.print(f"error: {summary['error']}", markup=False, style="red")
        raise typer.Exit(1)
    if "speedup" not in summary:
        err.print(f"no result: {summary['stop_reason']}", markup=False, style="red")
        raise typer.Exit(summary.get("exit_status") or 1)
    where = summary.get("rescued_to") or summary["run_dir"]
    console.print(end_line(summary), markup=False, highlight=False)
    unit = summary["latency_unit"]
    roofline = f"; {summary['best_roofline']:.1%} of roofline" if summary.get("best_roofline") is not None else ""
    if summary.get("best_upper_bound"):
        bound = summary["best_upper_bound"]
        roofline += f"; {bound['fraction']:.1%} of {bound['name']} ({latency_text(bound['cycles'], unit)})"
    console.print(f"Best kernel: {latency_text(summary['best_latency'], unit)} vs "
                  f"{latency_text(summary['baseline_latency'], unit)} for the starting kernel{roofline}. "
                  f"Written to {where}/{summary.get('best_file', 'best.c')}", markup=False, highlight=False)
    if summary.get("full_checks"):
        wrong = summary.get("full_check_failures", 0)
        console.print(f"Checked on every output element before use: {summary['full_checks']} kernel(s) whose "
                      f"sampled check had passed ({summary.get('full_check_s', 0):.1f} s of evaluation)"
                      + (f"; {wrong} of them were wrong and were not used" if wrong else "") + ".",
                      markup=False, highlight=False)
    if summary.get("cost_usd"):
        console.print(f"Model calls cost ${summary['cost_usd']:.2f}.", markup=False)
    console.print(f"Speedup: {summary['speedup']:.2f}x", markup=False, highlight=False)
    if summary.get("exit_status"):     # interrupted: saved, and resumable, but not finished
        raise typer.Exit(summary["exit_status"])


@app.command()
@with_config_options(WORKER_OPTIONS)
def worker(
    role: Annotated[str, typer.Option(help="planner, coder, repairer or evaluator.", metavar="ROLE")],
    connect: Annotated[str, typer.Option(help="Coordinator endpoint, e.g. tcp://head:5555.", metavar="ENDPOINT")],
    secret_file: Annotated[Path, typer.Option(help="The run's secret file (copy RUN_DIR/secret, mode 0600).",
                                              metavar="FILE")],
    impl: Annotated[Optional[str], typer.Option(help="Implementation (default: heuristic; target for evaluators).",
                                                metavar="NAME")] = None,
    target: Annotated[str, typer.Option(help="Target an evaluator runs.", metavar="NAME")] = "gemmini-sim",
    capacity: Annotated[int, typer.Option(help="Jobs this worker runs at once.", metavar="N")] = 1,
    curve_server_key: Annotated[Optional[Path], typer.Option(help="Coordinator's CurveZMQ public key file.",
                                                             metavar="FILE", show_default="none")] = None,
    parent_pid: Annotated[Optional[int], typer.Option(help="Exit when this process is gone.", metavar="PID",
                                                      show_default="none")] = None,
    latency: Annotated[Optional[float], typer.Option(help="Mean seconds per job of the synthetic implementation.",
                                                     metavar="S", show_default="0")] = None,
    jitter: Annotated[Optional[float], typer.Option(
        help="Synthetic latency spread (uniform: +-fraction; lognormal: log-sd).", metavar="X", show_default="0")] = None,
    latency_dist: Annotated[Optional[str], typer.Option(help="Synthetic latency distribution: uniform or lognormal.",
                                                        metavar="NAME", show_default="uniform")] = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", help="Model spec an llm worker serves (repeatable).",
                                                       metavar="SPEC", show_default="none")] = None,
    target_option: Annotated[Optional[list[str]], typer.Option(
        help="An option of the evaluator's target, NAME=VALUE (as `run --target-option`; repeatable).",
        metavar="NAME=VALUE", show_default="none")] = None,
    **options,
) -> None:
    """Serve jobs of one role for a running coordinator (this host or another)."""
    from autocomp_zmq.agents.workers import registry
    from autocomp_zmq.agents.run.runconfig import ConfigError, RunConfig
    from autocomp_zmq.agents.workers.worker import GaveUp, serve
    from autocomp_zmq.bus.auth import SecretError, load_secret
    from autocomp_zmq.bus.curve import load_public_key
    from autocomp_zmq.bus.timing import BusTiming
    logsetup.configure()
    try:
        implementation_class = registry.load(role, impl)       # imports only this one's dependencies
        cfg = RunConfig.of(**{k: v for k, v in options.items() if v is not None})   # checks types and ranges
        key = load_secret(secret_file)
        server_key = load_public_key(curve_server_key) if curve_server_key else None
        from autocomp_zmq.agents.workers.llm.specs import CallOptions
        from autocomp_zmq.agents.run.runflags import option_values
        offered = {"target": target, "target_options": option_values(target_option or [], "--target-option"),
                   "models": model or [], "latency_s": latency or 0.0, "jitter": jitter or 0.0,
                   "latency_dist": latency_dist or "uniform",
                   "call_options": CallOptions(timeout_s=cfg.models.call_timeout_s, max_retries=cfg.models.call_retries,
                                               concurrency=cfg.models.llm_concurrency,
                                               openai_api=cfg.models.openai_api, long_cache=cfg.models.long_cache,
                                               service_tier=cfg.models.service_tier,
                                               batch_window_s=cfg.models.batch_window_s,
                                               temperature=cfg.models.temperature,
                                               reasoning_effort=cfg.models.reasoning_effort,
                                               max_tokens=cfg.models.max_tokens)}
        # set on the command line but not taken by this implementation: an error, never silently dropped
        flags = (("models", "--model", model), ("latency_s", "--latency", latency), ("jitter", "--jitter", jitter),
                 ("latency_dist", "--latency-dist", latency_dist), ("target_options", "--target-option", target_option))
        given = {option: flag for option, flag, value in flags if value is not None}
        implementation = registry.construct(implementation_class, offered, given)
    except (ConfigError, SecretError, OSError, ValueError, UnknownTargetError) as exc:
        _fail(str(exc))
    except TypeError as exc:    # an option the target does not have
        _fail(f"{target}: {exc}")
    timing = BusTiming(heartbeat_s=cfg.bus.heartbeat_s, max_refused=cfg.bus.max_refused,
                       unreachable_s=cfg.bus.unreachable_s)
    try:
        raise typer.Exit(serve(role, implementation, connect, key, capacity=capacity, timing=timing,
                               target=target if role == "evaluator" else None, curve_server_key=server_key,
                               parent_pid=parent_pid))
    except GaveUp as exc:
        _fail(str(exc), 1)


@app.command()
def targets(as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False) -> None:
    """List the available targets with their descriptors: what each has run on, and how it confines kernels."""
    table, sandboxes = Table(title="targets"), []
    for col in ("name", "hardware", "language", "latency", "evaluators", "offline agent"):
        table.add_column(col)
    for name in target_names():
        try:
            info = target_info(name)
        except (DescriptorError, UnknownTargetError) as exc:     # a broken plug-in is named, the others listed
            err.print(f"error: {exc.args[0] if exc.args else exc}", markup=False)
            continue
        if as_json:
            print(json.dumps({"name": name, "language": info.language, "latency_unit": info.latency_unit,
                              "evaluators": info.evaluators, "entry_point": info.entry_point,
                              "code_fence": info.code_fence, "sandbox": info.sandbox, "problems": str(info.problems),
                              "heuristic": info.heuristic, "home": str(info.home), "hardware": info.hardware}))
        table.add_row(name, info.hardware or "-", info.language, info.latency_unit, f"one per {info.evaluators[:-1]}",
                      "heuristic" if info.heuristic else "-")
        sandboxes.append(f"  {name}: {info.sandbox}")
    if not as_json:
        console.print(table)
        console.print("Sandbox (how each target confines candidate code):", *sandboxes, sep="\n", markup=False,
                      highlight=False)


from autocomp_zmq.agents.cli.inspect import register as _register_inspect  # noqa: E402
from autocomp_zmq.agents.cli.problems import register as _register_problems  # noqa: E402
from autocomp_zmq.agents.cli.cluster import register as _register_cluster  # noqa: E402
from autocomp_zmq.agents.cli.plugins import register as _register_plugins  # noqa: E402
from autocomp_zmq.packbuilder.cli import register as _register_build_target  # noqa: E402
_register_problems(app, console, err, _fail, _target)   # problems (listing, checking, importing KernelBench)
_register_inspect(app, console, err)
_register_cluster(app, console, _fail, with_config_options)   # secret, workers
_register_build_target(app, console, _fail)   # a target's prompt pack from its documentation
_register_plugins(app, console)    # what is plugged in, and each policy's own flags


if __name__ == "__main__":
    app()
