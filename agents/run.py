"""A run from start to finish: run directory, secret, store, the coordinator in
this process, local agent processes next to it, live progress, the result.

Run directory layout:
    run.db      SQLite run store (WAL)          secret   HMAC key, mode 0600
    config.json the configuration, for humans  logs/    one log per local agent
    best.c      the best kernel found          best.json  its numbers
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import psutil
import structlog

from agents.coordinator import Coordinator, CostPolicy, LeasePolicy
from agents.llm.specs import ModelSpec, SpecError, check_keys, parse_spec
from agents.progress import Progress
from agents.runstore import RunStore
from agents.search import BeamSearch, SearchConfig
from bus.auth import create_secret, load_secret
from bus.curve import create_server_keys, load_keys
from bus.router import Router
from bus.timing import BusTiming
from hw_runners import get_target
from hw_runners.base import PROMPTS_DIR, UnknownProblemError, UnknownTargetError

log = structlog.get_logger("agents.run")
ROOT = Path(__file__).resolve().parents[1]


class RunError(RuntimeError):
    """A run cannot start; the message says why and what to do."""


@dataclass
class RunConfig:
    target: str = "gemmini-sim"
    problem: str = "gemm-512x512x512"
    kernel: str | None = None            # starting kernel file; default: the problem's naive kernel
    iterations: int = 8
    beam: int = 4
    plans: int = 4
    codes: int = 2
    dropout: float = 0.3                 # keep-probability of each menu option
    seed: int = 0
    models: list[str] = field(default_factory=lambda: ["heuristic"])
    code_models: list[str] = field(default_factory=list)   # default: same as models
    evaluators: int | None = None        # None: one per core; 0: only remote workers
    planners: int = 1
    coders: int = 1
    repairers: int = 1
    max_repairs: int = 1
    patience: int = 3
    max_evals: int | None = None
    stop_roofline: float | None = None
    bind: str = "tcp://127.0.0.1:*"
    curve: bool = False                  # encrypt links with CurveZMQ (keys in RUN_DIR/curve)
    heartbeat_s: float = 1.0
    eval_lease_s: float = 600.0
    llm_lease_s: float = 600.0
    max_cost: float | None = None        # USD; calls in flight count against it
    temperature: float | None = None     # passed to models that accept it
    reasoning_effort: str | None = None  # low | medium | high, for OpenAI reasoning models
    call_timeout_s: float = 600.0        # per model call
    call_retries: int = 4                # the SDK's retries on 429/5xx/timeouts
    replay: str | None = None            # answer model jobs only from this recorded run directory

    @classmethod
    def from_toml(cls, path: Path) -> dict:
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise RunError(f"cannot read config {path}: {exc}") from None
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise RunError(f"unknown keys in {path}: {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
        return data

    def search_config(self) -> SearchConfig:
        try:
            return SearchConfig(iterations=self.iterations, beam=self.beam, plans=self.plans, codes=self.codes,
                                keep_prob=self.dropout, seed=self.seed, plan_models=tuple(self.models),
                                code_models=tuple(self.code_models or self.models), max_repairs=self.max_repairs,
                                patience=self.patience, max_evals=self.max_evals, stop_roofline=self.stop_roofline)
        except ValueError as exc:
            raise RunError(str(exc)) from None


def _model_specs(cfg: RunConfig) -> dict[str, list[ModelSpec]]:
    """Models per LLM role, checked (syntax and API keys) before any work starts."""
    if cfg.reasoning_effort not in (None, "low", "medium", "high"):
        raise RunError(f"reasoning effort must be low, medium or high, not {cfg.reasoning_effort!r}")
    if cfg.replay and "replay" in [*cfg.models, *cfg.code_models]:
        # 'replay': the recorded run's own models, so that its stored answers match job for job
        if not (Path(cfg.replay) / "run.db").exists():
            raise RunError(f"--replay {cfg.replay}: not a run directory (no run.db)")
        recorded = RunStore(Path(cfg.replay) / "run.db").meta("config") or {}
        cfg.models = list(recorded.get("models") or ["heuristic"])
        cfg.code_models = list(recorded.get("code_models") or cfg.models)
    try:
        plan = [parse_spec(m) for m in cfg.models]
        code = [parse_spec(m) for m in (cfg.code_models or cfg.models)]
        if not cfg.replay:   # a replay never calls a model
            check_keys(plan + code)
    except SpecError as exc:
        raise RunError(str(exc)) from None
    return {"planner": plan, "coder": code, "repairer": code}


def _menu(target: str) -> list[dict]:
    path = PROMPTS_DIR / target / "menu.toml"
    try:
        options = tomllib.loads(path.read_text())["option"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise RunError(f"target {target} has no usable optimization menu at {path}: {exc}") from None
    return [{"id": o["id"], "title": o["title"], "description": o["description"]} for o in options]


def _open_resume(cfg: RunConfig, run_dir: Path) -> tuple[RunConfig, RunStore, bytes, str]:
    if not (run_dir / "run.db").exists():
        raise RunError(f"{run_dir} is not a run directory (no run.db)")
    store = RunStore(run_dir / "run.db")
    saved, code = store.meta("config"), store.meta("initial_code")
    if saved is None or code is None:
        raise RunError(f"{run_dir} holds no saved configuration")
    overrides = {k: getattr(cfg, k) for k in ("evaluators", "planners", "coders", "repairers", "bind", "curve",
                                              "max_cost")}
    return RunConfig(**{**saved, **overrides}), store, load_secret(run_dir / "secret"), code


def _create(cfg: RunConfig, out: Path | None, code: str) -> tuple[Path, RunStore, bytes]:
    run_dir = Path(out) if out else ROOT / "runs" / f"{cfg.problem}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (run_dir / "run.db").exists():
        raise RunError(f"{run_dir} already holds a run; use --resume {run_dir} to continue it")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    key = create_secret(run_dir / "secret")
    store = RunStore(run_dir / "run.db")
    store.set_meta("config", asdict(cfg))
    store.set_meta("initial_code", code)
    (run_dir / "config.json").write_text(json.dumps(asdict(cfg), indent=1))
    return run_dir, store, key


def execute(cfg: RunConfig, out: Path | None = None, resume: Path | None = None, live: bool | None = None,
            progress: bool = True) -> dict:
    store = key = None
    if resume:
        run_dir = Path(resume)
        cfg, store, key, code = _open_resume(cfg, run_dir)
    specs = _model_specs(cfg)
    cfg.models = [s.text for s in specs["planner"]]
    cfg.code_models = [s.text for s in specs["coder"]]
    try:
        problem = get_target(cfg.target).problem(cfg.problem)
    except (UnknownTargetError, UnknownProblemError) as exc:
        raise RunError(exc.args[0]) from None
    search_cfg = cfg.search_config()
    menu = _menu(cfg.target)
    if not resume:
        try:
            code = Path(cfg.kernel).read_text() if cfg.kernel else problem.kernel_source("naive")
        except OSError as exc:
            raise RunError(f"cannot read the starting kernel: {exc}") from None
        run_dir, store, key = _create(cfg, out, code)
    problem_payload = {"target": cfg.target, "name": problem.name, "family": problem.family,
                       "dims": problem.dims, "description": problem.description}
    search = BeamSearch(search_cfg, problem_payload, code, menu, store)
    timing = BusTiming(heartbeat_s=cfg.heartbeat_s)
    curve_secret = None
    if cfg.curve:
        cert = run_dir / "curve" / "server.key_secret"
        _, curve_secret = load_keys(cert) if cert.exists() else create_server_keys(run_dir / "curve")
    router = Router([cfg.bind], key, run_id=run_dir.name, timing=timing, curve_secret_key=curve_secret)
    store.set_meta("endpoint", router.endpoints[0])
    leases = LeasePolicy(lease_s={"plan": cfg.llm_lease_s, "code": cfg.llm_lease_s, "repair": cfg.llm_lease_s,
                                  "eval": cfg.eval_lease_s})
    replay = None
    if cfg.replay:
        if not (Path(cfg.replay) / "run.db").exists():
            raise RunError(f"--replay {cfg.replay}: not a run directory (no run.db)")
        replay = RunStore(Path(cfg.replay) / "run.db")
        specs = {role: [s for s in role_specs if s.offline] for role, role_specs in specs.items()}
    procs = spawn_local_agents(cfg, run_dir, router.endpoints[0], specs)
    progress = Progress(cfg, problem.name, live=live, plain_every_s=5.0 if progress else float("inf"))
    coord = Coordinator(router, store, search, leases, on_progress=progress.update,
                        cost=CostPolicy(max_usd=cfg.max_cost), replay=replay)
    interrupted = False

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
    finally:
        signal.signal(signal.SIGTERM, old)
        router.close("run finished" if not interrupted else "run interrupted")
        stop_agents(procs)
    summary = summarize(search, coord, run_dir, interrupted)
    store.set_meta("summary", summary)
    store.close()
    return summary


def summarize(search: BeamSearch, coord: Coordinator, run_dir: Path, interrupted: bool) -> dict:
    base, best = search.baseline, search.best
    summary = {"run_dir": str(run_dir), "stop_reason": "interrupted" if interrupted else search.stop_reason,
               "iterations": search.iteration, "evaluations": search.evals_done,
               "replayed_results": search.replayed_results, "requeued_jobs": coord.stats.requeued,
               "lost_jobs": coord.stats.lost, "duplicate_results": coord.stats.duplicates,
               "failed_jobs": dict(coord.stats.failed), "cost_usd": round(coord.spent, 6)}
    if base and best:
        summary.update(baseline_cycles=base.cycles, best_cycles=best.cycles, speedup=base.cycles / best.cycles,
                       best_id=best.id, best_utilization=(best.result or {}).get("utilization"),
                       best_roofline=(best.result or {}).get("roofline_fraction"),
                       beam=[[c.id, c.cycles] for c in search.beam])
        (run_dir / "best.c").write_text(best.code)
        (run_dir / "best.json").write_text(json.dumps({k: v for k, v in summary.items() if k != "beam"}, indent=1))
    return summary


def agent_command(role: str, endpoint: str, run_dir: Path, cfg: RunConfig, capacity: int,
                  impl: str | None = None, models: list[str] = ()) -> list[str]:
    cmd = [sys.executable, str(ROOT / "launch.py"), "worker", "--role", role, "--connect", endpoint,
           "--secret-file", str(run_dir / "secret"), "--parent-pid", str(os.getpid()),
           "--capacity", str(capacity), "--heartbeat", str(cfg.heartbeat_s)]
    if impl:
        cmd += ["--impl", impl]
    for model in models:
        cmd += ["--model", model]
    if impl == "llm":
        cmd += ["--call-timeout", str(cfg.call_timeout_s), "--call-retries", str(cfg.call_retries)]
        if cfg.temperature is not None:
            cmd += ["--temperature", str(cfg.temperature)]
        if cfg.reasoning_effort:
            cmd += ["--reasoning-effort", cfg.reasoning_effort]
    if role == "evaluator":
        cmd += ["--target", cfg.target]
    if cfg.curve:
        cmd += ["--curve-server-key", str(run_dir / "curve" / "server.key")]
    return cmd


def spawn_local_agents(cfg: RunConfig, run_dir: Path, endpoint: str,
                       specs: dict[str, list[ModelSpec]]) -> list[subprocess.Popen]:
    """Evaluators (one per core by default), heuristic agents for roles that use the heuristic, and one
    LLM agent per role serving that role's hosted models (many calls at once: they mostly wait)."""
    local_evals = (psutil.cpu_count(logical=True) or 1) if cfg.evaluators is None else cfg.evaluators
    # Only LLM agents get the API keys; evaluators, and the candidate code they run, never see them.
    full_env = dict(os.environ)
    safe_env = {k: v for k, v in full_env.items() if not k.endswith(("_API_KEY", "_TOKEN", "_SECRET"))}
    launches = [("evaluator", 1, None, [], safe_env)] * local_evals
    counts = {"planner": cfg.planners, "coder": cfg.coders, "repairer": cfg.repairers}
    for role, role_specs in specs.items():
        if any(s.offline for s in role_specs):
            launches += [(role, 4, "heuristic", [], safe_env)] * counts[role]
        hosted = [s.text for s in role_specs if not s.offline]
        if hosted:
            launches.append((role, 16, "llm", hosted, full_env))
    procs = []
    for i, (role, capacity, impl, models, env) in enumerate(launches):
        logf = open(run_dir / "logs" / f"{role}-{i}.log", "ab")
        procs.append(subprocess.Popen(agent_command(role, endpoint, run_dir, cfg, capacity, impl, models),
                                      stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=env, cwd=ROOT))
        logf.close()
    return procs


def stop_agents(procs: list[subprocess.Popen], grace_s: float = 3.0) -> None:
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            p.kill()
