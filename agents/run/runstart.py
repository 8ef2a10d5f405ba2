"""What a run starts from, checked before anything is created: the optimization menu as the ISA profile
shows it, the starting kernel, the trace a run reuses, the models' prices and sampling options, and the evaluation
of the starting kernel."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import structlog

from autocomp_zmq.agents.run import reuse
from autocomp_zmq.agents.console import make_console
from autocomp_zmq.agents.workers.llm.pricing import PRICES_HELP, PriceBook, PriceError, cap_refusal
from autocomp_zmq.agents.workers.llm.prompts import pack
from autocomp_zmq.agents.workers.llm.specs import ModelSpec
from autocomp_zmq.agents.engine.policy import eval_job
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.store import RunStore, damage_of
from autocomp_zmq.hw_runners.base import DescriptorError, IsaProfile, Target
from autocomp_zmq.hw_runners.pack import menu_entries
from autocomp_zmq.protocols.jobs import EvalReport, EvalRequest, MenuOption, Plan, ProblemRef
from autocomp_zmq.agents.engine.search import PriorTrace


log = structlog.get_logger("agents.run")


class RunError(RuntimeError):
    """A run cannot start or cannot go on; the message says why and what to do."""


def run_prices(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> PriceBook:
    """The run's price book; under --max-cost every hosted model must have a known price, before anything starts."""
    try:
        book = PriceBook.of(cfg.models)
    except PriceError as exc:
        raise RunError(str(exc)) from None
    unknown = sorted({s.text for role in specs.values() for s in role if not s.offline and not book.known(s)})
    if unknown and cfg.budget.max_cost is not None and not cfg.models.replay:
        raise RunError(f"--max-cost needs a price for every model, and {', '.join(unknown)} "
                       f"{'has' if len(unknown) == 1 else 'have'} none: {PRICES_HELP}")
    for model in unknown:
        log.warning("price_unknown", model=model, note=f"its calls are counted at $0; {PRICES_HELP}")
    return book


def check_sampling(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> None:
    if cfg.models.reasoning_effort and any(s.provider == "anthropic" for role in specs.values() for s in role):
        if cfg.models.temperature not in (None, 1.0):
            raise RunError("--reasoning-effort turns on Anthropic's extended thinking, which needs temperature 1: "
                           f"drop --temperature {cfg.models.temperature:g} or --reasoning-effort")
        if cfg.models.max_tokens < 4096:
            raise RunError("--reasoning-effort with an Anthropic model needs --max-tokens >= 4096 (the thinking "
                           "budget comes out of the output limit)")


# Modes whose coding calls only a model can answer, and what each asks of it (--translate-iters: its planners too)
LLM_CODER_MODES = {"one_phase": "the coding model chooses the optimization and writes the kernel in one answer",
                   "code_edits": "the coding model answers with edits to the current kernel"}


def check_modes(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> None:
    """Search modes the offline agents or other options cannot go with, refused before anything starts."""
    options = cfg.search.options
    offline = sorted({s.text for s in specs["coder"] if s.offline})
    for mode, what in LLM_CODER_MODES.items():
        if options.get(mode) and offline:
            raise RunError(f"--{mode.replace('_', '-')}: {what}, which {', '.join(offline)} cannot do (it implements "
                           "the plans it is given, whole): give --model or --code-model an LLM")
    planners = offline if options.get("one_phase") else sorted({s.text for s in specs["planner"] if s.offline})
    if options.get("translate_iters") and (offline or planners):
        raise RunError(f"--translate-iters: translating the problem's reference takes a model, and "
                       f"{', '.join(sorted(set(offline + planners)))} only optimizes kernels it knows: give --model "
                       "an LLM (and --code-model, if set)")
    planners = sorted({s.text for s in specs["planner"] if s.offline})
    if options.get("propose_options") and planners:
        raise RunError(f"--propose-options: a planning model proposes new menu options, which "
                       f"{', '.join(planners)} cannot do: give --model an LLM")
    for mode in ("one_phase", "translate_iters"):
        if options.get(mode) and cfg.task.reuse:
            raise RunError(f"--{mode.replace('_', '-')} with --reuse: a reused trace's plans are the first "
                           "iterations' plans, which this mode shapes otherwise; drop one of the two")


def menu_of(target: Target, profile: IsaProfile, family: str | None = None) -> list[MenuOption]:
    """The target's optimization menu as the ISA profile and the problem's family show it."""
    try:
        return [MenuOption(**o) for o in menu_entries(target.info(), profile, family)]
    except DescriptorError as exc:
        raise RunError(str(exc)) from None


def start_code(cfg: RunConfig, problem, profile: IsaProfile) -> str:
    """The starting kernel: --kernel FILE or builtin:ROLE, else a problem file's own, else the profile's start,
    else the naive kernel."""
    spec = cfg.task.kernel or f"builtin:{problem.start_role(profile)}"
    if not spec.startswith("builtin:"):
        return read_kernel(spec)
    role = spec.split(":", 1)[1]
    if role not in problem.kernels:
        raise RunError(f"--kernel {spec}: problem {problem.name} has no built-in kernel {role!r}; it has "
                       + ", ".join(f"builtin:{r}" for r in problem.kernels))
    return problem.kernel_source(role)


def no_offline_moves(planners, problem: ProblemRef) -> str:
    """Why a run whose every planner is the offline heuristic can do nothing beyond evaluating the starting
    kernel ("" when the heuristic has moves for the problem, or when a model plans)."""
    if not planners or not all(s.offline and s.model == "heuristic" for s in planners):
        return ""
    from autocomp_zmq.agents.workers.heuristic import unsupported
    why = unsupported(problem)
    return f"no offline moves for this problem; use --model ({why})" if why else ""


def open_store(run_dir: Path, what: str) -> RunStore:
    path = run_dir / "run.db"
    if not path.is_file():
        raise RunError(f"{what} {run_dir}: not a run directory (no run.db)")
    damage = damage_of(path)
    if damage:
        raise RunError(f"{what} {run_dir}: its store {path} is damaged ({damage}); nothing was written to it. "
                       f"`show {run_dir}` reads what it still can; restore run.db from a copy, or start a new run")
    try:
        store = RunStore(run_dir / "run.db")
        store.meta("config")
        return store
    except sqlite3.Error as exc:
        raise RunError(f"{run_dir / 'run.db'} is not a usable run store: {exc}") from None


def read_kernel(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RunError(f"cannot read the starting kernel {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                       f"at offset {exc.start})") from None
    except OSError as exc:
        raise RunError(f"cannot read the starting kernel {path}: {exc.strerror}") from None


def evaluate_start(cfg: RunConfig, problem: ProblemRef, code: str,
                    eval_seed: int) -> tuple[str, EvalRequest, EvalReport] | None:
    """Evaluate the starting kernel here, before any agent starts, so that a wrong kernel fails in
    seconds; its result is stored as the run's first evaluation, not computed twice. Skipped when all
    evaluators are remote (this host may not have the target's hardware)."""
    if cfg.local.evaluators == 0 or not cfg.local.check_start:
        return None
    from autocomp_zmq.agents.workers.evaluator import TargetEvaluator
    job_id, request = eval_job(problem, code, eval_seed)   # the id the search gives this evaluation
    result = TargetEvaluator(cfg.task.target, cfg.task.target_options).handle("eval", request)
    if not result.correct:
        what = ("could not be evaluated on this host" if result.error_kind == "setup"   # the host, not the kernel
                else "is not correct")
        raise RunError(f"the starting kernel {what} ({result.error_kind}): {(result.error or '').strip()[:2000]}")
    return job_id, request, result


def reused_trace(cfg: RunConfig, problem: ProblemRef) -> dict | None:
    """--reuse auto or RUN_DIR: the recorded trace whose plans the run's first iterations offer."""
    if not cfg.task.reuse:
        return None
    try:
        if cfg.task.reuse == "auto":
            project = reuse.project_dir() if cfg.task.schedule_scope == "project" else None
            trace = reuse.find(reuse.library_dir(cfg.task.schedule_library), problem.target, problem.isa,
                               problem.family, problem.dims, project)
        else:
            trace = reuse.from_run(Path(cfg.task.reuse), problem.target, problem.isa, problem.family, problem.dims)
    except reuse.ReuseError as exc:
        raise RunError(str(exc)) from None
    # say which: --reuse auto picks among many, and what it picked shapes the first iterations
    make_console(stderr=True).print(f"Reusing {reuse.describe(trace, problem.dims)}", markup=False, highlight=False)
    return trace


def prior_of(trace: dict | None) -> PriorTrace | None:
    """The trace as the search offers it: its workload and one plan per step."""
    if not trace:
        return None
    p = trace["problem"]
    problem = ProblemRef(target=trace["target"], name=p["name"], family=p["family"], dims=p["dims"],
                      description=p.get("description", ""), isa=trace.get("isa") or "")
    plans = tuple(Plan(text=s["text"] or "", option_id=s["option_id"], params=s.get("params") or {})
                  for s in trace["steps"])
    return PriorTrace(problem, plans)


def check_cap_admits_a_call(cfg: RunConfig, planners: list[ModelSpec], prices: PriceBook, family: str,
                            code: str) -> None:
    """Under --max-cost, refuse a run whose cap admits no plan job at all, before anything starts."""
    if cfg.budget.max_cost is None or all(s.offline for s in planners):
        return
    prefix = pack(cfg.task.target, cfg.task.isa or "", family)["prefix"]
    refusal = cap_refusal(prices, planners, len((prefix + code).encode()), cfg.models.max_tokens, cfg.budget.max_cost)
    if refusal:
        raise RunError(refusal)
