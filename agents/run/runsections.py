"""The sections of a run's options (task, search, models, budget, bus, local, cluster) and how one option is
declared: its type and bounds, its help, its extra flags and its resume rule (agents/run/runconfig.py builds the
configuration, the command lines and the TOML keys from these declarations)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from autocomp_zmq.agents.engine.options import EXTEND, FIXED, LOCAL, SECURITY, bounded, opt  # noqa: F401 - re-exported
from autocomp_zmq.agents.engine.policy import DEFAULT_POLICY
from autocomp_zmq.protocols.control import MAX_LEASE_S

EVALUATORS_PER_CORE = 4        # more evaluators than this per core only queue for the CPU

class ConfigError(ValueError):
    """An option has a wrong type or value, or cannot change on resume; the message says which and why."""


N, S, X = "N", "S", "X"


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class Task(_Section):
    """What is optimized, from what, and where the run goes."""
    target: Annotated[str, opt("Hardware target (a --problem-file sets it).", "-t", metavar="NAME")] = "gemmini-sim"
    problem: Annotated[str, opt("Problem to optimize: a name the target knows (`problems` lists them; parametric "
                                "names such as gemm-100x100x100 too), or one of --problems-dir.", "-p",
                                metavar="NAME")] = "gemm-512x512x512"
    problem_file: Annotated[str | None, opt(
        "Optimize the problem this file defines (TOML: signature, dims, tensors, reference, starting kernel; see the "
        "README); sets --problem and --target.", metavar="FILE")] = None
    problems_dir: Annotated[str | None, opt("A directory of problem files (*.toml): --problem names one of them.",
                                            metavar="DIR")] = None
    kernel: Annotated[str | None, opt(
        "Starting kernel: a file, or builtin:ROLE for one of the problem's own kernels (none: a problem file's own, "
        "else the ISA profile's start, else the problem's naive kernel).", metavar="FILE")] = None
    isa: Annotated[str | None, opt(
        "ISA profile of the target: what kernels may use (gemmini-sim: full, or fine for the paper's rules: no loop "
        "FSMs or library calls, the hardware loop as the upper bound); none: the target's default.",
        metavar="PROFILE")] = None
    reuse: Annotated[str | None, opt(
        "Reuse a recorded optimization trace: its plans, adapted to this problem, are the first iterations' plans. "
        "auto: the most similar workload in the schedule library (same target and ISA profile); or a RUN_DIR.",
        metavar="auto|RUN_DIR")] = None
    schedule_library: Annotated[str | None, opt(
        "Directory of recorded optimization traces (written at the end of every run, read by --reuse auto).",
        metavar="DIR", shown="$AUTOCOMP_SCHEDULE_LIBRARY, else the user's data directory", resume=LOCAL)] = None
    schedule_scope: Annotated[Literal["project", "global"], opt(
        "Which recorded traces --reuse auto may pick: project (those of runs started from this directory) or "
        "global (every run's in the library).", metavar="SCOPE", resume=LOCAL)] = "project"
    continue_from: Annotated[str | None, opt(
        "Start from another run's final beam (a run directory, or the name or id of a run under runs/): its kernels, "
        "evaluated again by this run, are the first parents, and its starting kernel this run's (unless --kernel). "
        "Same target, problem and ISA profile only.", metavar="RUN_DIR|ID")] = None
    out: Annotated[str | None, opt("Run directory to create (none: runs/PROBLEM-TIME).", "-o", metavar="DIR")] = None
    # the target's own options (trainium: platform, lnc, latency_percentile, ...): --target-option NAME=VALUE or
    # [task.target_options]; every evaluator of the run is built with them, and a resumed run keeps them
    target_options: dict[str, Any] = msgspec.field(default_factory=dict)


class Search(_Section):
    """How the search explores: its policy (and the policy's own options), its seed, its repairs."""
    policy: Annotated[str, opt("Search policy: beam (the paper's beam search) or one a plug-in registers in the "
                               "autocomp_zmq.policies entry-point group.", metavar="NAME",
                               flag="--search")] = DEFAULT_POLICY
    seed: Annotated[int, opt("Seed of every random choice of the search.", metavar=N)] = 0
    max_repairs: Annotated[bounded(int, ge=0), opt("Repair attempts per failed candidate.", metavar=N)] = 1
    options: dict[str, Any] = msgspec.field(default_factory=dict)   # the policy's section: its Config's own fields


Count = bounded(int, ge=1)
Seconds = bounded(float, gt=0)
Lease = bounded(float, gt=0, le=MAX_LEASE_S)
Processes = bounded(int, ge=1, le=64)


class Models(_Section):
    """Which models plan and code, and how they are called."""
    model: Annotated[bounded(list[str], min_length=1), opt(
        "Planning model (repeatable: ensembling): provider:MODEL, or an agent implementation's name.",
        metavar="SPEC")] = \
        msgspec.field(default_factory=lambda: ["heuristic"])
    code_model: Annotated[list[str], opt("Coding model (repeatable).", metavar="SPEC",
                                         shown="same as --model")] = msgspec.field(default_factory=list)
    model_allocation: Annotated[Literal["even", "bandit"], opt(
        "How plan and code samples are split among ensembled models: even (the paper's: models take turns) or "
        "bandit (Thompson sampling: samples shift toward the models whose candidates entered the beam).",
        metavar="POLICY")] = "even"
    temperature: Annotated[bounded(float, ge=0, le=2) | None, opt("Sampling temperature for the models.",
                                                                  metavar=X)] = None
    reasoning_effort: Annotated[Literal["low", "medium", "high"] | None, opt(
        "low, medium or high: OpenAI reasoning effort; for Anthropic models extended thinking with a budget of 2k, "
        "8k or 24k tokens.", metavar="LEVEL")] = None
    # LOCAL: a run whose answers were cut off may continue with a larger limit
    max_tokens: Annotated[bounded(int, ge=1024), opt(
        "Output tokens (reasoning included) a model call may use: a call first asks for half, and asks once more "
        "with all of it if its answer was cut off.", metavar=N, resume=LOCAL)] = 32000
    call_timeout_s: Annotated[Seconds, opt("Seconds per model call.", metavar=S)] = 600.0
    call_retries: Annotated[bounded(int, ge=0), opt(
        "Retries of a model call the provider did not bill (429, 5xx, 529, no connection), after its Retry-After "
        "or a backoff, each recorded; a call lost after it was sent is charged at its worst case and its job sent "
        "again (at most twice) if --max-cost has room.", metavar=N)] = 4
    openai_api: Annotated[Literal["responses", "chat"], opt("How openai:MODEL is called: the Responses API (with "
        "reasoning summaries) or Chat Completions (what OpenAI-compatible servers get).", metavar="API")] = "responses"
    long_cache: Annotated[bool, opt("Anthropic's 1-hour prompt cache (writes priced at 2x input, not 1.25x) and "
        "OpenAI's 24-hour retention, for calls of one prefix more than 5 minutes apart.")] = False
    service_tier: Annotated[Literal["default", "flex", "priority", "auto"], opt(
        "OpenAI's processing tier for openai:MODEL: default (standard prices), flex (half price, slower, refused when "
        "busy), priority (dearer, faster) or auto (the project's setting; capped as if priority). Each call is "
        "priced at the tier its answer reports.", metavar="TIER")] = "default"
    batch_window_s: Annotated[Seconds | None, opt(
        "Send openai: and anthropic: calls through the providers' Batch APIs (half price; answers in minutes to "
        "hours), the calls made within this many seconds of each other in one batch.", metavar=S)] = None
    llm_concurrency: Annotated[bounded(int, ge=1), opt(
        "Calls an LLM agent makes to one model at once (halved on a 429, then raised again one by one): a beam "
        "iteration's calls are independent, so this, not the search, decides how many wait on the provider.",
        metavar=N, resume=LOCAL)] = 64
    llm_lease_s: Annotated[Lease | None, opt(
        "Seconds a model agent may hold a job (none: long enough for every retry of a call, so that a slow call is "
        "not paid twice).", metavar=S)] = None
    prices: Annotated[str | None, opt(
        "TOML file of model prices (USD per million tokens: input, output, cached_input, cache_write) merged over "
        "genai-prices' table, model by model.", metavar="FILE", shown="$AUTOCOMP_PRICES, else none",
        resume=LOCAL)] = None
    replay: Annotated[str | None, opt("Answer model jobs only from this recorded run (no network).",
                                      metavar="RUN_DIR")] = None
    preflight: Annotated[bool, opt("Check that every model endpoint answers before starting.", resume=LOCAL)] = True


class Budget(_Section):
    """When the run stops; a resumed run may extend every limit but the roofline goal (each is a total)."""
    iterations: Annotated[Count, opt("Search iterations, in all (on --resume, the new total).", "-T", metavar=N,
                                     resume=EXTEND)] = 8
    patience: Annotated[Count, opt("Stop after this many iterations without improvement.", metavar=N,
                                   resume=EXTEND)] = 3
    max_evals: Annotated[Count | None, opt("Stop after this many evaluations (the starting kernel is one too).",
                                           metavar=N, resume=EXTEND)] = None
    max_cost: Annotated[bounded(float, ge=0) | None, opt(
        "Hard cap in USD on model calls: a call starts only if its worst case (its prompt and --max-tokens at the "
        "model's price) and that of every call in flight fit under it.", metavar="USD", resume=EXTEND)] = None
    stop_roofline: Annotated[bounded(float, gt=0) | None, opt(
        "Stop once the best reaches this fraction of roofline.", metavar=X)] = None


class Bus(_Section):
    """The coordinator's endpoint and the links to its workers."""
    bind: Annotated[str, opt("Coordinator endpoint, e.g. tcp://0.0.0.0:5555 for remote workers.",
                             metavar="ENDPOINT", resume=SECURITY)] = "tcp://127.0.0.1:*"
    curve: Annotated[bool, opt("Encrypt links with CurveZMQ (keys in RUN_DIR/curve).", resume=SECURITY)] = False
    heartbeat_s: Annotated[Seconds, opt("Heartbeat interval of the bus.", metavar=S)] = 1.0
    # LOCAL: how fast the dead are noticed changes no result (a requeued job is the same job)
    liveness: Annotated[bounded(int, ge=2), opt(
        "Heartbeats a silent peer may miss before it is declared dead: its jobs go back to the queue (and a worker "
        "whose coordinator went silent reconnects) after heartbeat-s x liveness seconds.", metavar=N,
        resume=LOCAL)] = 10
    eval_lease_s: Annotated[Lease, opt("Seconds an evaluator may hold a job; past it the evaluation is a timeout "
                                         "verdict.", metavar=S)] = 600.0
    max_refused: Annotated[Count, opt("A worker gives up after this many handshakes in a row that the coordinator "
                                      "refused (wrong secret, CURVE key or version).", metavar=N, resume=LOCAL)] = 5
    unreachable_s: Annotated[Seconds, opt("A worker gives up after this many seconds without reaching a coordinator "
                                          "(none there, or its run has ended).", metavar=S, resume=LOCAL)] = 600.0


class Local(_Section):
    """The processes this run starts, and the files it writes, on its own host."""
    evaluators: Annotated[bounded(int, ge=0) | None, opt(
        "Local evaluator processes (none: one per core, or 0 with --slurm; 0: remote workers only).", metavar=N,
        resume=LOCAL)] = None
    planners: Annotated[Processes, opt("Local processes per offline planning agent.", metavar=N, resume=LOCAL)] = 1
    coders: Annotated[Processes, opt("Local processes per offline coding agent.", metavar=N, resume=LOCAL)] = 1
    repairers: Annotated[Processes, opt("Local processes per offline repair agent.", metavar=N, resume=LOCAL)] = 1
    check_start: Annotated[bool, opt("Evaluate the starting kernel before agents start, to fail fast.",
                                     resume=LOCAL)] = True
    group_read: Annotated[bool, opt(
        "Let the run directory's group read it (0750 folders, 0640 files): kernels, prompts and answers shared on a "
        "cluster filesystem. Default: the owner only (0700, 0600).", resume=LOCAL)] = False
    pass_env: Annotated[list[str], opt(
        "An environment variable the agents that hold no model key (evaluators, offline agents, Slurm tasks) get "
        "besides the standard ones (repeatable), e.g. a license server's.", metavar="NAME", shown="none",
        resume=LOCAL)] = msgspec.field(default_factory=list)


class Cluster(_Section):
    """Evaluators the run submits to a cluster's scheduler (Slurm) and cancels when it ends (cluster/)."""
    slurm: Annotated[bounded(int, ge=1) | None, opt(
        "Submit this many evaluators to Slurm as the tasks of one sbatch job (one core each; a device target's "
        "take one device of their node): they connect to the coordinator and are cancelled when the run ends.",
        metavar=N, resume=LOCAL)] = None
    slurm_option: Annotated[list[str], opt("An sbatch option for the evaluators' job, e.g. --partition=trn "
                                           "(repeatable).", metavar="OPTION", shown="none", resume=LOCAL)] = \
        msgspec.field(default_factory=list)


SECTIONS: dict[str, type[_Section]] = {"task": Task, "search": Search, "models": Models, "budget": Budget, "bus": Bus,
                                       "local": Local, "cluster": Cluster}
