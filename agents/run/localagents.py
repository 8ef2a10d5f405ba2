"""The processes a run starts on its own host: evaluators (one per core or device, as the target declares),
the offline agent implementations its models name (the heuristic, or any registered one), and one LLM agent per
role serving that role's hosted models, and how they are started (the worker command line). The supervisor
(supervisor.py) keeps them running while the run goes on and stops them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from autocomp_zmq.agents.workers.llm.specs import ModelSpec
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.runflags import BUS_WORKER_OPTIONS, WORKER_OPTIONS, as_args, option_pairs
from autocomp_zmq.agents.run.supervisor import Launch, RestartLimit, Supervisor
from autocomp_zmq.hw_runners.base import Target

ROOT = Path(__file__).resolve().parents[2]   # holds launch.py: the checkout, or site-packages when installed


def worker_argv() -> list[str]:
    """How to start this program again: by module where autocomp_zmq is installed (editable or not), by the
    path of launch.py in a checkout that was never installed (launch.py binds the package to it)."""
    if getattr(sys.modules.get("autocomp_zmq"), "__checkout__", False):
        return [sys.executable, str(ROOT / "launch.py")]
    return [sys.executable, "-m", "autocomp_zmq.launch"]


def agent_command(role: str, endpoint: str, run_dir: Path, cfg: RunConfig, capacity: int,
                  impl: str | None = None, models: list[str] = ()) -> list[str]:
    cmd = [*worker_argv(), "worker", "--role", role, "--connect", endpoint,
           "--secret-file", str(run_dir / "secret"), "--parent-pid", str(os.getpid()), "--capacity", str(capacity)]
    if impl:
        cmd += ["--impl", impl]
    for model in models:
        cmd += ["--model", model]
    # the options a worker shares with the run, under the same names
    cmd += as_args(cfg, WORKER_OPTIONS if impl == "llm" else BUS_WORKER_OPTIONS)
    if role == "evaluator":
        cmd += ["--target", cfg.task.target]
        for pair in option_pairs(cfg.task.target_options):
            cmd += ["--target-option", pair]
    if cfg.bus.curve:
        cmd += ["--curve-server-key", str(run_dir / "curve" / "server.key")]
    return cmd


def key_variables(specs: dict[str, list[ModelSpec]]) -> set[str]:
    """The environment variables the models' specs name for their API keys (openai-compat[VAR]@...)."""
    return {s.key_variable for role_specs in specs.values() for s in role_specs if s.key_variable}


# What an agent that holds no model key gets of the run's environment: these names and prefixes only (a locale, the
# paths to Python and the toolchains, the scheduler's and the devices' own variables), so that a cloud credential or a
# database password in the user's shell never reaches an evaluator or the candidate code it runs. More with --pass-env.
PASSED_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "LANG", "LANGUAGE", "TZ", "TERM",
                          "TMPDIR", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "VIRTUAL_ENV", "CONDA_PREFIX",
                          "CONDA_DEFAULT_ENV", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "PKG_CONFIG_PATH", "CC",
                          "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "XDG_DATA_HOME", "XDG_CACHE_HOME",
                          "XDG_RUNTIME_DIR"})
PASSED_PREFIXES = ("LC_", "AUTOCOMP_", "SLURM_", "SBATCH_", "CUDA_", "NVIDIA_", "NEURON_", "TRITON_", "TORCH_",
                   "OMP_", "MKL_", "OPENBLAS_")
KEY_LIKE = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_KEY")   # never, even under a passed prefix


def keyless_env(named: set[str] = frozenset(), passed: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment as agents without model keys get it (local evaluators and offline agents, Slurm
    tasks, and through them the candidate code): the allowlisted names and prefixes, and `passed` (--pass-env),
    never a key-like name or one a model spec names for its key."""
    def kept(name: str) -> bool:
        if name in passed:
            return name not in named
        return (name in PASSED_NAMES or name.startswith(PASSED_PREFIXES)) and not name.endswith(KEY_LIKE) \
            and name not in named
    return {k: v for k, v in os.environ.items() if kept(k)}


def spawn_local_agents(cfg: RunConfig, run_dir: Path, endpoint: str, specs: dict[str, list[ModelSpec]],
                       target: Target, limit: RestartLimit = RestartLimit()) -> Supervisor:
    """Evaluators (by default one per core or device, as the target declares); for each offline model of a role
    (an agent implementation named like `heuristic`), `--planners/--coders/--repairers` processes of that
    implementation; and one LLM agent per role serving that role's hosted models (many calls at once: they
    mostly wait). No repairer when --max-repairs is 0. Started, under a supervisor that restarts them (`limit`)."""
    local_evals = target.local_evaluators() if cfg.local.evaluators is None else cfg.local.evaluators
    if cfg.local.evaluators is None and cfg.cluster.slurm:
        local_evals = 0      # the evaluators are Slurm tasks: this host's cores are the coordinator's and agents'
    # Only LLM agents get the API keys; evaluators, and the candidate code they run, never see them.
    full_env = dict(os.environ)
    safe_env = keyless_env(key_variables(specs), cfg.local.pass_env)
    launches = [("evaluator", 1, None, [], safe_env)] * local_evals
    counts = {"planner": cfg.local.planners, "coder": cfg.local.coders, "repairer": cfg.local.repairers}
    for role, role_specs in specs.items():
        if role == "repairer" and cfg.search.max_repairs == 0:
            continue         # no repair job will come: a process, its imports and its CPU saved
        for implementation in dict.fromkeys(s.model for s in role_specs if s.offline):
            launches += [(role, 4, implementation, [], safe_env)] * counts[role]
        hosted = [s.text for s in role_specs if not s.offline]
        if hosted:   # jobs at once: every model's calls at once (agents/workers/llm/limits.py bounds each model's)
            launches.append((role, cfg.models.llm_concurrency * len(hosted), "llm", hosted, full_env))
    slots = [Launch(role, agent_command(role, endpoint, run_dir, cfg, capacity, impl, models), env,
                    run_dir / "logs" / f"{role}-{i}.log", impl=impl, models=tuple(models),
                    target=cfg.task.target if role == "evaluator" else None)
             for i, (role, capacity, impl, models, env) in enumerate(launches)]
    return Supervisor(slots, limit).start()
