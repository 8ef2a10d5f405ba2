"""A run from start to finish: checks that fail fast (models answer, the starting kernel is correct, the
endpoint binds) before anything is created, the run directory and its lock, the coordinator in this
process, local agent processes next to it, live progress, the result (written atomically, or to a
fallback directory if the run directory vanished) and a loud verdict when the models produced nothing."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

import msgspec
import structlog
import zmq

from autocomp_zmq.agents import logsetup
from autocomp_zmq.agents.coordinator import Coordinator, CostPolicy, LeasePolicy
from autocomp_zmq.agents.localagents import spawn_local_agents, stop_agents
from autocomp_zmq.agents.llm.pricing import PRICES_HELP, PriceBook, PriceError, cost_functions
from autocomp_zmq.agents.llm.specs import ModelSpec, SpecError, answers_from_seed, check_keys, parse_spec
from autocomp_zmq.agents.outcome import save_results, summarize
from autocomp_zmq.agents.progress import Progress
from autocomp_zmq.agents.runconfig import ConfigError, RunConfig, resume_config
from autocomp_zmq.agents.rundir import RunDirError, RunLock, prepare_new, write_atomic
from autocomp_zmq.agents import problemsource, reuse
from autocomp_zmq.agents.runstart import (RunError, evaluate_start, menu_of, no_offline_moves, open_store, prior_of, reused_trace,
                             start_code)
from autocomp_zmq.agents.runstore import STORE_FORMAT, RunStore
from autocomp_zmq.agents.policy import SearchPolicy, UnknownPolicyError, policy_class
from autocomp_zmq.agents.search import SearchConfig
from autocomp_zmq.bus.auth import SecretError, load_secret, write_secret
from autocomp_zmq.bus.curve import create_server_keys, load_keys
from autocomp_zmq.bus.router import Router
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.base import DescriptorError, UnknownIsaError, UnknownTargetError, target_info
from autocomp_zmq.protocols.jobs import Problem, ProblemDefinition

log = structlog.get_logger("agents.run")
RUNS_DIR = Path("runs")                        # where runs go without --out: runs/ in the working directory

__all__ = ["RunConfig", "RunError", "execute"]


def _model_specs(cfg: RunConfig) -> dict[str, list[ModelSpec]]:
    """Models per LLM role, checked (syntax and API keys) before any work starts."""
    if cfg.replay and "replay" in [*cfg.model, *cfg.code_model]:
        # 'replay': the recorded run's own models, so that its stored answers match job for job
        recorded = open_store(Path(cfg.replay), "--replay").meta("config") or {}
        cfg.model = list(recorded.get("model") or recorded.get("models") or ["heuristic"])
        cfg.code_model = list(recorded.get("code_model") or recorded.get("code_models") or cfg.model)
    try:
        plan = [parse_spec(m) for m in cfg.model]
        code = [parse_spec(m) for m in (cfg.code_model or cfg.model)]
        if not cfg.replay:   # a replay never calls a model
            check_keys(plan + code)
    except SpecError as exc:
        raise RunError(str(exc)) from None
    return {"planner": plan, "coder": code, "repairer": code}


def _prices(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> PriceBook:
    """The run's price book; under --max-cost every hosted model must have a known price, before anything starts."""
    try:
        book = PriceBook.load(cfg.prices)
    except PriceError as exc:
        raise RunError(str(exc)) from None
    unknown = sorted({s.text for role in specs.values() for s in role if not s.offline and not book.known(s)})
    if unknown and cfg.max_cost is not None and not cfg.replay:
        raise RunError(f"--max-cost needs a price for every model, and {', '.join(unknown)} "
                       f"{'has' if len(unknown) == 1 else 'have'} none: {PRICES_HELP}")
    for model in unknown:
        log.warning("price_unknown", model=model, note=f"its calls are counted at $0; {PRICES_HELP}")
    return book


def _check_sampling(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> None:
    if cfg.reasoning_effort and any(s.provider == "anthropic" for role in specs.values() for s in role):
        if cfg.temperature not in (None, 1.0):
            raise RunError("--reasoning-effort turns on Anthropic's extended thinking, which needs temperature 1: "
                           f"drop --temperature {cfg.temperature:g} or --reasoning-effort")
        if cfg.max_tokens < 4096:
            raise RunError("--reasoning-effort with an Anthropic model needs --max-tokens >= 4096 (the thinking "
                           "budget comes out of the output limit)")


def _preflight(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> None:
    if cfg.replay or not cfg.preflight:
        return
    from autocomp_zmq.agents.llm.preflight import check_endpoints   # imports the SDKs: only when a model is hosted
    hosted = [s for role_specs in specs.values() for s in role_specs if not s.offline]
    if hosted:
        problems = check_endpoints(hosted)
        if problems:
            raise RunError("; ".join(problems) + " (nothing was started; --no-preflight skips this check)")


def _bind(cfg: RunConfig, key: bytes, run_name: str, curve_secret: bytes | None) -> Router:
    try:
        return Router([cfg.bind], key, run_id=run_name, timing=BusTiming(heartbeat_s=cfg.heartbeat_s),
                      curve_secret_key=curve_secret)
    except zmq.ZMQError as exc:
        raise RunError(f"cannot listen on --bind {cfg.bind}: {exc}") from None


def execute(cfg: RunConfig | None, out: Path | None = None, resume: Path | None = None, given: dict | None = None,
            live: bool | None = None, progress: bool = True) -> dict:
    """Run a search (a new one from cfg, or the one in `resume`, changed by the options in `given`) and
    return its summary. Raises RunError, with nothing lost, for anything that stops it."""
    lock = None
    try:
        if resume:
            run_dir = Path(resume).absolute()   # agents run elsewhere: they get absolute paths
            if not run_dir.is_dir():
                raise RunError(f"--resume {run_dir}: no such directory")
            lock = RunLock(run_dir)
            store = open_store(run_dir, "--resume")
            if store.meta("store_format", 1) != STORE_FORMAT:
                raise RunError(f"--resume {run_dir}: recorded by an older version (run store format "
                               f"{store.meta('store_format', 1)}, this version resumes format {STORE_FORMAT}); "
                               f"show and report still read it")
            saved, code = store.meta("config"), store.meta("initial_code")
            if saved is None or code is None:
                raise RunError(f"{run_dir} holds no saved configuration")
            cfg = resume_config(saved, given or {})
            # a problem file is read once, when the run starts: the run keeps its definition
            definition = _stored_definition(store)
        else:
            if cfg.problems_dir and given is not None and "problem" not in given:   # not the default name
                raise RunError(f"--problems-dir {cfg.problems_dir}: name one of its problems with --problem NAME "
                               "(`problems --problems-dir DIR` lists them)")
            definition = problemsource.read_definition(cfg.problem_file, cfg.problems_dir, cfg.problem)
            if definition is not None:
                settled = cfg.to_dict()
                problemsource.settle(settled, given or {}, definition)
                cfg.problem, cfg.target = settled["problem"], settled["target"]
            run_dir = Path(out or cfg.out or RUNS_DIR / f"{cfg.problem}-{time.strftime('%Y%m%d-%H%M%S')}").absolute()
            cfg.out = str(run_dir)
        return _execute(cfg, run_dir, lock, store if resume else None, code if resume else None, live, progress,
                        definition)
    except (ConfigError, RunDirError, SecretError, problemsource.ProblemSourceError) as exc:
        raise RunError(str(exc)) from None
    finally:
        if lock:
            lock.release()


def _stored_definition(store: RunStore) -> ProblemDefinition | None:
    """The problem file a run stored when it started (None: a problem known by name, or an older run)."""
    stored = store.meta("problem") or {}
    try:
        return msgspec.convert(stored, Problem).definition if stored.get("definition") else None
    except msgspec.ValidationError as exc:
        raise RunError(f"the run's stored problem is unusable: {exc}") from None


def _execute(cfg: RunConfig, run_dir: Path, lock: RunLock | None, store: RunStore | None, code: str | None,
             live: bool | None, progress_on: bool, definition: ProblemDefinition | None = None) -> dict:
    resume = store is not None
    specs = _model_specs(cfg)
    cfg.model, cfg.code_model = [s.text for s in specs["planner"]], [s.text for s in specs["coder"]]
    try:
        target = get_target(cfg.target)
        info = target.info()
        profile = info.isa_profile(cfg.isa)
        problem = problemsource.load(target, cfg.problem, profile.name, definition)
    except (UnknownTargetError, DescriptorError) as exc:
        raise RunError(exc.args[0]) from None
    except UnknownIsaError as exc:
        raise RunError(f"--isa: {exc}") from None
    except problemsource.ProblemSourceError as exc:
        raise RunError(str(exc)) from None
    replay = open_store(Path(cfg.replay), "--replay") if cfg.replay else None
    if replay:
        specs = {role: [s for s in role_specs if s.offline] for role, role_specs in specs.items()}
    _check_sampling(cfg, specs)
    prices = _prices(cfg, specs)
    _preflight(cfg, specs)
    try:
        search_cfg = _search_config(cfg)
        policy = policy_class(cfg.search)
    except ValueError as exc:       # UnknownPolicyError included
        raise RunError(f"--search: {exc}" if isinstance(exc, UnknownPolicyError) else str(exc)) from None
    if not resume:
        code = start_code(cfg, problem, profile)
    wire_problem = problemsource.wire(problem, info.latency_unit, cfg.isa)
    menu = menu_of(target, profile, problem.family)
    trace = store.meta("reused_trace") if resume else reused_trace(cfg, wire_problem)
    # with only the offline heuristic planning, a problem it has no moves for ends after the starting kernel
    halt = no_offline_moves(specs["planner"], wire_problem)

    def make_search(store: RunStore) -> SearchPolicy:
        search = policy(search_cfg, wire_problem, code, menu, store, seeded=answers_from_seed, prior=prior_of(trace))
        if halt:
            search.halt(halt)
        return search

    first_eval = None if resume else evaluate_start(cfg, wire_problem, code, search_cfg.eval_seed)

    # the endpoint is bound before anything is written, so a bad or busy --bind leaves nothing behind
    staging = Path(tempfile.mkdtemp(prefix="autocomp-keys-"))
    try:
        if resume:
            key = load_secret(run_dir / "secret")
            curve_cert = run_dir / "curve" / "server.key_secret"
            if cfg.curve and not curve_cert.exists():
                raise RunError(f"the run uses CurveZMQ but its key {curve_cert} is missing")
        else:
            leftover = run_dir / "secret"   # a run directory prepared earlier (workers may hold this secret)
            key = load_secret(leftover) if leftover.exists() and not (run_dir / "run.db").exists() \
                else secrets.token_bytes(32)
            curve_cert = run_dir / "curve" / "server.key_secret"
            if cfg.curve and not curve_cert.exists():
                create_server_keys(staging / "curve")
                curve_cert = staging / "curve" / "server.key_secret"
        router = _bind(cfg, key, run_dir.name, load_keys(curve_cert)[1] if cfg.curve else None)
        if not resume:
            try:
                lock = prepare_new(run_dir)
                if not (run_dir / "secret").exists():
                    write_secret(run_dir / "secret", key)
                if (staging / "curve").exists():
                    shutil.move(str(staging / "curve"), run_dir / "curve")
                store = RunStore(run_dir / "run.db")
            except BaseException:
                router.close(grace_s=0)
                raise
            store.set_meta("store_format", STORE_FORMAT)
            store.set_meta("config", cfg.to_dict())
            store.set_meta("initial_code", code)
            store.set_meta("problem", wire_problem.to_dict())
            if trace:
                store.set_meta("reused_trace", trace)   # what the first iterations were offered (resume reads it)
            write_atomic(run_dir / "config.json", json.dumps(cfg.to_dict(), indent=1))
            if first_eval:
                job_id, payload, result = first_eval
                store.add_job(job_id, "eval", 0, payload)
                store.finish_job(job_id, True, result, None)
    except (OSError, sqlite3.Error) as exc:
        raise RunError(f"cannot set up the run directory {run_dir}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    try:
        return _search(cfg, run_dir, store, make_search(store), router, specs, replay, live, progress_on, prices)
    finally:
        if lock:
            lock.release()


def _search_config(cfg: RunConfig) -> SearchConfig:
    return SearchConfig(iterations=cfg.iterations, beam=cfg.beam, plans=cfg.plans, codes=cfg.codes,
                        keep_prob=cfg.dropout, seed=cfg.seed, plan_models=tuple(cfg.model),
                        code_models=tuple(cfg.code_model or cfg.model), max_repairs=cfg.max_repairs,
                        patience=cfg.patience, max_evals=cfg.max_evals, stop_roofline=cfg.stop_roofline,
                        model_allocation=cfg.model_allocation)


def _search(cfg: RunConfig, run_dir: Path, store: RunStore, search: SearchPolicy, router: Router,
            specs: dict[str, list[ModelSpec]], replay: RunStore | None, live: bool | None, progress_on: bool,
            prices: PriceBook) -> dict:
    store.set_meta("endpoint", router.endpoints[0])
    store.set_meta("session", {"pid": os.getpid(), "started": time.time(), "endpoint": router.endpoints[0],
                               "curve": cfg.curve, "evaluators": cfg.evaluators, "iterations": cfg.iterations,
                               "max_evals": cfg.max_evals, "max_cost": cfg.max_cost})
    progress = Progress(cfg.problem, live=live, plain_every_s=5.0 if progress_on else float("inf"))
    logsetup.to_run_dir(run_dir / "logs" / "coordinator.log", progress.console)
    leases = LeasePolicy(lease_s={"plan": cfg.model_lease_s, "code": cfg.model_lease_s,
                                  "repair": cfg.model_lease_s, "eval": cfg.eval_lease_s})
    try:
        procs = spawn_local_agents(cfg, run_dir, router.endpoints[0], specs)
    except OSError as exc:
        router.close(grace_s=0)
        raise RunError(f"cannot start the local agents: {exc}") from None
    watch = _RunDirWatch(run_dir, progress.update)
    coord = Coordinator(router, store, search, leases, on_progress=watch,
                        cost=CostPolicy(cfg.max_cost, *cost_functions(prices, cfg.max_tokens)),
                        replay=replay, seeded=answers_from_seed)
    interrupted, failure = False, None

    def stop(*_):
        nonlocal interrupted
        interrupted = True

    old = signal.signal(signal.SIGTERM, stop)
    try:
        with progress:
            try:
                coord.run(should_stop=lambda: interrupted)
            except KeyboardInterrupt:
                interrupted = True
            except (sqlite3.Error, OSError) as exc:   # nothing acknowledged is lost: results commit before acks
                failure = exc
    finally:
        signal.signal(signal.SIGTERM, old)
        router.close("run finished" if not interrupted else "run interrupted")
        stop_agents(procs)
    if failure is not None:
        raise RunError(f"the run stopped: the run store failed ({failure}); every acknowledged result is kept "
                       f"in {run_dir / 'run.db'}: fix the cause and continue with --resume {run_dir}")
    summary = summarize(cfg, search, coord, run_dir, interrupted)
    best = search.summary().best
    try:
        recorded = reuse.record(store, run_dir, best.id if best else None, reuse.library_dir(cfg.schedule_library),
                                summary)
        if recorded:
            summary["schedule_trace"] = str(recorded)
    except OSError as exc:   # the run store keeps the trace; only the library copy is missing
        log.warning("schedule_library_unwritable", error=str(exc))
        summary["schedule_library_error"] = str(exc)
    return save_results(run_dir, store, summary, best.code if best else None,
                        "best" + target_info(cfg.target).kernel_suffix)


class _RunDirWatch:
    """Progress callback that also notices, every few seconds, that the run directory was removed."""

    def __init__(self, run_dir: Path, update) -> None:
        self.run_dir, self.update, self.next_check, self.warned = run_dir, update, 0.0, False

    def __call__(self, coord: Coordinator) -> None:
        self.update(coord)
        now = time.monotonic()
        if not self.warned and now >= self.next_check:
            self.next_check = now + 2.0
            if not (self.run_dir / "run.db").exists():
                self.warned = True
                log.error("run_directory_removed", run_dir=str(self.run_dir),
                          note="the run goes on; its results will be written to a fallback directory")
