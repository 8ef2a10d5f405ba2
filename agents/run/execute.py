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

from autocomp_zmq.agents.run import logsetup
from autocomp_zmq.agents.engine.coordinator import Coordinator, CostPolicy, LeasePolicy
from autocomp_zmq.agents.run.localagents import key_variables, spawn_local_agents
from autocomp_zmq.agents.run.runwatch import RunWatch
from autocomp_zmq.agents.run.supervisor import Supervisor
from autocomp_zmq.agents.workers.llm.pricing import cost_functions
from autocomp_zmq.agents.workers import registry
from autocomp_zmq.agents.workers.llm.specs import (SPEC_FORMS, ModelSpec, SpecError, answers_from_seed, check_keys,
                                                   parse_spec)
from autocomp_zmq.agents.run.outcome import save_results, summarize
from autocomp_zmq.agents.run.context import Display, Resumed, RunContext
from autocomp_zmq.agents.run.progress import Progress
from autocomp_zmq.agents.run.runconfig import ConfigError, RunConfig, flat_view, resume_config
from autocomp_zmq.agents.run.rundir import RunDirError, RunLock, keep_private, prepare_new, write_atomic
from autocomp_zmq.agents.run import continuation, problemsource, reuse, translation
from autocomp_zmq.agents.run.runstart import (RunError, check_cap_admits_a_call, check_modes, check_sampling,
                                              evaluate_start, menu_of, no_offline_moves, open_store, prior_of,
                                              read_kernel, reused_trace, run_prices, start_code)
from autocomp_zmq.agents.store import STORE_FORMAT, RunStore, last_iteration
from autocomp_zmq.agents.engine.policy import SearchPolicy, SearchSettings, config_class, policy_class
from autocomp_zmq.bus.auth import SecretError, load_secret, write_secret
from autocomp_zmq.bus.curve import create_server_keys, load_keys
from autocomp_zmq.bus.router import Router
from autocomp_zmq.bus.timing import BusTiming
from autocomp_zmq.agents.run import slurm_evaluators
from autocomp_zmq.cluster.slurm import SlurmError
from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.base import DescriptorError, UnknownIsaError, UnknownTargetError
from autocomp_zmq.protocols.envelope import convert
from autocomp_zmq.protocols.jobs import ProblemRef, ProblemDefinition

log = structlog.get_logger("agents.run")
RUNS_DIR = Path("runs")                        # where runs go without --out: runs/ in the working directory

__all__ = ["RunConfig", "RunError", "execute"]


def _model_specs(cfg: RunConfig) -> dict[str, list[ModelSpec]]:
    """Models per LLM role, checked (syntax and API keys) before any work starts."""
    if cfg.models.replay and "replay" in [*cfg.models.model, *cfg.models.code_model]:
        # 'replay': the recorded run's own models, so that its stored answers match job for job
        recorded = flat_view(open_store(Path(cfg.models.replay), "--replay").meta("config") or {})
        cfg.models.model = list(recorded.get("model") or ["heuristic"])
        cfg.models.code_model = list(recorded.get("code_model") or cfg.models.model)
    try:
        plan = [parse_spec(m) for m in cfg.models.model]
        code = [parse_spec(m) for m in (cfg.models.code_model or cfg.models.model)]
        if not cfg.models.replay:   # a replay never calls a model
            check_keys(plan + code)
    except SpecError as exc:
        raise RunError(str(exc)) from None
    specs = {"planner": plan, "coder": code, "repairer": code}
    for role, role_specs in specs.items():
        for spec in role_specs:
            if spec.offline:
                _check_local_agent(role, spec)
    return specs


def _check_local_agent(role: str, spec: ModelSpec) -> None:
    """A model named like `heuristic` is an agent implementation the run starts here: the role must have it,
    and it must serve the model of that name (jobs are routed by model)."""
    try:
        cls = registry.load(role, spec.model)
    except (registry.RegistryError, ImportError) as exc:
        raise RunError(f"model {spec.text!r} is not provider:MODEL and not an agent implementation the run can "
                       f"start: {exc} ({SPEC_FORMS})") from None
    served = list(getattr(cls, "models", None) or [])
    if spec.model not in served:
        raise RunError(f"model {spec.text!r}: the {role} implementation {spec.model} serves "
                       f"{', '.join(served) or 'no model by name'}, so no job for {spec.text!r} would reach it")


def _preflight(cfg: RunConfig, specs: dict[str, list[ModelSpec]]) -> None:
    if cfg.models.replay or not cfg.models.preflight:
        return
    # imports the SDKs: only when a model is hosted
    from autocomp_zmq.agents.workers.llm.preflight import check_endpoints
    hosted = [s for role_specs in specs.values() for s in role_specs if not s.offline]
    if hosted:
        problems = check_endpoints(hosted)
        if problems:
            raise RunError("; ".join(problems) + " (nothing was started; --no-preflight skips this check)")


def _bind(cfg: RunConfig, key: bytes, run_name: str, curve_secret: bytes | None) -> Router:
    try:
        return Router([cfg.bus.bind], key, run_id=run_name, curve_secret_key=curve_secret,
                      timing=BusTiming(heartbeat_s=cfg.bus.heartbeat_s, dead_after=cfg.bus.liveness))
    except zmq.ZMQError as exc:
        raise RunError(f"cannot listen on --bind {cfg.bus.bind}: {exc}") from None


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
            done = last_iteration(store.db) or 0
            if cfg.budget.iterations < done:   # -T is the run's total (the help says so), never "this many more"
                raise RunError(f"-T {cfg.budget.iterations}: the run has done {done} iterations, and -T is its new "
                               f"total: give at least {done} (e.g. -T {done + cfg.budget.iterations} for "
                               f"{cfg.budget.iterations} more)")
            # a problem file is read once, when the run starts: the run keeps its definition
            definition = _stored_definition(store)
        else:
            if cfg.task.problems_dir and given is not None and "problem" not in given:   # not the default name
                raise RunError(f"--problems-dir {cfg.task.problems_dir}: name one of its problems with --problem NAME "
                               "(`problems --problems-dir DIR` lists them)")
            definition = problemsource.read_definition(cfg.task.problem_file, cfg.task.problems_dir, cfg.task.problem)
            if definition is not None:
                settled = {"problem": cfg.task.problem, "target": cfg.task.target}
                problemsource.settle(settled, given or {}, definition)
                cfg.task.problem, cfg.task.target = settled["problem"], settled["target"]
            default = RUNS_DIR / f"{cfg.task.problem}-{time.strftime('%Y%m%d-%H%M%S')}"
            run_dir = Path(out or cfg.task.out or default).absolute()
            cfg.task.out = str(run_dir)
        resumed = Resumed(lock, store, code) if resume else None
        return _execute(cfg, run_dir, resumed, Display(live, progress), definition)
    except (ConfigError, RunDirError, SecretError, problemsource.ProblemSourceError) as exc:
        raise RunError(str(exc)) from None
    finally:
        if lock:
            lock.release()


def _stored_definition(store: RunStore) -> ProblemDefinition | None:
    """The problem file a run stored when it started (None: a problem known by name, or an older run)."""
    stored = store.meta("problem") or {}
    try:
        return convert(stored, ProblemRef).definition if stored.get("definition") else None
    except msgspec.ValidationError as exc:
        raise RunError(f"the run's stored problem is unusable: {exc}") from None


def _prepare(cfg: RunConfig, resumed: Resumed | None, definition: ProblemDefinition | None) -> RunContext:
    """Every lookup a run needs, each once, with the checks that fail fast, in the order a user meets them;
    nothing is created yet."""
    specs = _model_specs(cfg)
    cfg.models.model, cfg.models.code_model = [s.text for s in specs["planner"]], [s.text for s in specs["coder"]]
    try:
        target = get_target(cfg.task.target, **cfg.task.target_options)
    except (UnknownTargetError, DescriptorError) as exc:
        raise RunError(exc.args[0]) from None
    except (TypeError, ValueError) as exc:    # --target-option: an option the target lacks, or a bad value
        raise RunError(f"--target-option: {cfg.task.target}: {exc}") from None
    kernel = cfg.task.kernel
    if cfg.task.isa is None and kernel and not kernel.startswith("builtin:") and not resumed:
        cfg.task.isa = target.profile_for(read_kernel(kernel))   # e.g. an NKI v2 kernel: its own profile
    try:
        info = target.info()
        profile = info.isa_profile(cfg.task.isa)
        problem = problemsource.load(target, cfg.task.problem, profile.name, definition)
    except (UnknownTargetError, DescriptorError) as exc:
        raise RunError(exc.args[0]) from None
    except UnknownIsaError as exc:
        raise RunError(f"--isa: {exc}") from None
    except problemsource.ProblemSourceError as exc:
        raise RunError(str(exc)) from None
    replay = open_store(Path(cfg.models.replay), "--replay") if cfg.models.replay else None
    if replay:
        specs = {role: [s for s in role_specs if s.offline] for role, role_specs in specs.items()}
    check_sampling(cfg, specs)
    check_modes(cfg, specs)
    prices = run_prices(cfg, specs)
    _preflight(cfg, specs)
    try:
        slurm_evaluators.preflight(cfg, info)   # Slurm is there and would take the job: before anything is created
    except SlurmError as exc:
        raise RunError(str(exc)) from None
    policy = policy_class(cfg.search.policy)     # known: the configuration was checked against it
    wire_problem = problemsource.wire(problem, info.latency_unit, cfg.task.isa)
    continued = continuation.of(cfg, policy, wire_problem, resumed and resumed.store, RUNS_DIR)
    if resumed:
        code = resumed.initial_code
    else:   # a continued run starts from the other run's start (speedups compare alike), unless --kernel says
        code = continued["initial_code"] if continued and not cfg.task.kernel else start_code(cfg, problem, profile)
    if not replay:
        check_cap_admits_a_call(cfg, specs["planner"], prices, problem.family, code or "")
    return RunContext(cfg=cfg, target=target, info=info, profile=profile, problem=problem, wire_problem=wire_problem,
                      menu=menu_of(target, profile, problem.family), specs=specs, prices=prices, replay=replay,
                      policy=policy, initial_code=code, continued=continued,
                      translation=translation.of(cfg, info, profile, problem, policy))



def _execute(cfg: RunConfig, run_dir: Path, resumed: Resumed | None, display: Display,
             definition: ProblemDefinition | None = None) -> dict:
    resume, lock, store = resumed is not None, resumed and resumed.lock, resumed and resumed.store
    keep_private(run_dir, cfg.local.group_read)      # a resumed run's; a new one's once its directory exists
    ctx = _prepare(cfg, resumed, definition)
    search_cfg = _search_config(cfg, ctx.policy)
    wire_problem, code = ctx.wire_problem, ctx.initial_code
    trace = store.meta("reused_trace") if resume else reused_trace(cfg, wire_problem)
    # with only the offline heuristic planning, a problem it has no moves for ends after the starting kernel
    halt = no_offline_moves(ctx.specs["planner"], wire_problem)

    def make_search(store: RunStore) -> SearchPolicy:
        search = ctx.policy(search_cfg, wire_problem, code, ctx.menu, store, seeded=answers_from_seed,
                            prior=prior_of(trace), **ctx.modes())
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
            if cfg.bus.curve and not curve_cert.exists():
                raise RunError(f"the run uses CurveZMQ but its key {curve_cert} is missing")
        else:
            leftover = run_dir / "secret"   # a run directory prepared earlier (workers may hold this secret)
            key = load_secret(leftover) if leftover.exists() and not (run_dir / "run.db").exists() \
                else secrets.token_bytes(32)
            curve_cert = run_dir / "curve" / "server.key_secret"
            if cfg.bus.curve and not curve_cert.exists():
                create_server_keys(staging / "curve")
                curve_cert = staging / "curve" / "server.key_secret"
        router = _bind(cfg, key, run_dir.name, load_keys(curve_cert)[1] if cfg.bus.curve else None)
        if not resume:
            try:
                lock = prepare_new(run_dir)
                if not (run_dir / "secret").exists():
                    write_secret(run_dir / "secret", key)
                if (staging / "curve").exists():
                    shutil.move(str(staging / "curve"), run_dir / "curve")
                store = RunStore(run_dir / "run.db")
                keep_private(run_dir, cfg.local.group_read)
            except BaseException:
                router.close(grace_s=0)
                raise
            store.set_meta("store_format", STORE_FORMAT)
            store.set_meta("config", cfg.to_dict())
            store.set_meta("initial_code", code)
            store.set_meta("problem", wire_problem.to_dict())
            if ctx.continued:
                store.set_meta("continued_from", ctx.continued)   # resume reads it, never the other run again
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
        return _search(ctx, run_dir, store, make_search(store), router, display)
    finally:
        if lock:
            lock.release()


def _search_config(cfg: RunConfig, policy: type) -> SearchSettings:
    """What the policy is given: the shared settings and its own section (checked when cfg was built)."""
    m, b = cfg.models, cfg.budget
    return config_class(policy)(iterations=b.iterations, seed=cfg.search.seed, plan_models=tuple(m.model),
                                code_models=tuple(m.code_model or m.model), model_allocation=m.model_allocation,
                                max_repairs=cfg.search.max_repairs, patience=b.patience, max_evals=b.max_evals,
                                stop_roofline=b.stop_roofline, **cfg.search.options)


def _search(ctx: RunContext, run_dir: Path, store: RunStore, search: SearchPolicy, router: Router,
            display: Display) -> dict:
    cfg = ctx.cfg
    store.set_meta("endpoint", router.endpoints[0])
    store.set_meta("session", {"pid": os.getpid(), "started": time.time(), "endpoint": router.endpoints[0],
                               "curve": cfg.bus.curve, "evaluators": cfg.local.evaluators,
                               "iterations": cfg.budget.iterations, "max_evals": cfg.budget.max_evals,
                               "max_cost": cfg.budget.max_cost})
    progress = Progress(cfg.task.problem, live=display.live, plain_every_s=5.0 if display.plain else float("inf"))
    logsetup.to_run_dir(run_dir / "logs" / "coordinator.log", progress.console)
    leases = LeasePolicy(lease_s={"plan": cfg.model_lease_s, "code": cfg.model_lease_s,
                                  "repair": cfg.model_lease_s, "eval": cfg.bus.eval_lease_s})
    interrupted, failure = 0, None    # interrupted: the signal that stopped the run (its exit status is 128 + it)

    def stop(signum, _frame):
        nonlocal interrupted
        interrupted = signum

    # installed before any agent or Slurm job exists, so that an interruption at any point reaches the finally
    # below (scancel included); SIGINT too, whatever its inherited disposition: a run started in the background by
    # a script gets SIGINT ignored, and Python then installs no KeyboardInterrupt for it, so `kill -INT` would do
    # nothing
    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    agents, cluster, ended = Supervisor([]), slurm_evaluators.Submitted(), False
    try:
        try:
            agents = spawn_local_agents(cfg, run_dir, router.endpoints[0], ctx.specs, ctx.target)
            cluster = slurm_evaluators.start(cfg, run_dir, router.endpoints[0], key_variables(ctx.specs))
        except OSError as exc:
            raise RunError(f"cannot start the local agents: {exc}") from None
        except SlurmError as exc:
            raise RunError(str(exc)) from None
        watch = RunWatch(run_dir, progress.update, agents, stopping=lambda: interrupted)
        coord = Coordinator(router, store, search, leases, on_progress=watch,
                            cost=CostPolicy(cfg.budget.max_cost, *cost_functions(ctx.prices, cfg.models.max_tokens)),
                            replay=ctx.replay, seeded=answers_from_seed)
        with progress:
            try:
                coord.run(should_stop=lambda: interrupted or cluster.failed or agents.failed)
            except KeyboardInterrupt:
                interrupted = signal.SIGINT
            except (sqlite3.Error, OSError) as exc:   # nothing acknowledged is lost: results commit before acks
                failure = exc
        ended = not interrupted and failure is None and not cluster.failed and not agents.failed
    finally:
        agents.stopping = True     # from here on a process that ends is not restarted
        try:
            router.close("run finished" if ended else "run interrupted")
            agents.stop()
        finally:    # the Slurm job ends with the run, however it ends (scancel; at once unless it ended normally)
            try:
                cluster.end(finished=ended)
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)
    if cluster.failed:
        raise RunError(f"the run stopped: {cluster.failed}; every result is kept: continue with --resume {run_dir}")
    if agents.failed:
        raise RunError(f"the run stopped: {agents.failed}\nEvery result is kept: fix the cause and continue with "
                       f"--resume {run_dir}")
    if failure is not None:
        raise RunError(f"the run stopped: the run store failed ({failure}); every acknowledged result is kept "
                       f"in {run_dir / 'run.db'}: fix the cause and continue with --resume {run_dir}")
    summary = summarize(cfg, search, coord, run_dir, bool(interrupted))
    if interrupted:
        summary["exit_status"] = 128 + interrupted    # as a shell reports a process the signal ended: 130, 143
    best = search.summary().best
    try:
        recorded = reuse.record(store, run_dir, best.id if best else None, reuse.library_dir(cfg.task.schedule_library),
                                summary)
        if recorded:
            summary["schedule_trace"] = str(recorded)
    except OSError as exc:   # the run store keeps the trace; only the library copy is missing
        log.warning("schedule_library_unwritable", error=str(exc))
        summary["schedule_library_error"] = str(exc)
    try:
        return save_results(run_dir, store, summary, best.code if best else None,
                            "best" + ctx.info.kernel_suffix)
    except sqlite3.Error as exc:
        raise RunError(f"the run finished and wrote its best kernel, but its store could not take in what it "
                       f"recorded ({exc}): that is in {run_dir / 'run.db-wal'}; keep that file beside run.db") from None
