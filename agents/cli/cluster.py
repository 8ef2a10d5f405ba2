"""`secret RUN_DIR`: a run's secret and CurveZMQ keys made before the run, so that they can be distributed (and
Slurm jobs submitted) before the coordinator starts; `run --out RUN_DIR` then uses them. `workers --slurm N`:
evaluators submitted to Slurm for a coordinator started elsewhere, cancelled when this command is stopped."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Callable, Iterator, Optional

import typer
from rich.console import Console


def make_keys(run_dir: Path, curve: bool) -> list[tuple[str, Path]]:
    """RUN_DIR/secret (mode 0600) and, with curve, RUN_DIR/curve/server.key and server.key_secret (mode 0600); what
    was made, as (what, path). A directory that holds a run, or already has a secret, is refused: workers may hold
    that secret, and a run resumed from it keeps its own."""
    from autocomp_zmq.bus.auth import create_secret
    from autocomp_zmq.bus.curve import create_server_keys
    if run_dir.exists() and not run_dir.is_dir():
        raise ValueError(f"{run_dir} exists and is not a directory")
    if (run_dir / "run.db").exists():
        raise ValueError(f"{run_dir} already holds a run: its secret is {run_dir / 'secret'}")
    if (run_dir / "secret").exists():
        raise ValueError(f"{run_dir / 'secret'} exists (workers may already hold it); remove it, and "
                         f"{run_dir / 'curve'}, to make new ones")
    run_dir.mkdir(parents=True, exist_ok=True)
    made = [("secret", run_dir / "secret")]
    create_secret(run_dir / "secret")
    if curve:
        if (run_dir / "curve" / "server.key_secret").exists():
            made.append(("kept CurveZMQ public key", run_dir / "curve" / "server.key"))
        else:
            create_server_keys(run_dir / "curve")
            made.append(("CurveZMQ public key", run_dir / "curve" / "server.key"))
    return made


def register(app: typer.Typer, console: Console, fail: Callable[[str], None], with_config_options) -> None:
    from autocomp_zmq.agents.run.runflags import BUS_WORKER_OPTIONS

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    @app.command()
    def secret(run_dir: Annotated[Path, typer.Argument(help="The run directory a later `run --out RUN_DIR` uses.",
                                                       metavar="RUN_DIR", show_default=False)],
               curve: Annotated[bool, typer.Option("--curve/--no-curve",
                                                   help="Also make the coordinator's CurveZMQ keys.")] = True) -> None:
        """Make a run's secret (and CurveZMQ keys) before the run, to hand them to workers first."""
        try:
            made = make_keys(run_dir.absolute(), curve)
        except (ValueError, OSError) as exc:
            fail(str(exc))
        for what, path in made:
            say(f"{what}: {path}" + (" (mode 0600)" if what == "secret" else ""))
        key = f" --curve-server-key {run_dir / 'curve' / 'server.key'}" if curve else ""
        say(f"Next: python launch.py run --out {run_dir}{' --curve' if curve else ''} --bind tcp://0.0.0.0:PORT ...; "
            f"workers: launch.py worker --role evaluator --connect tcp://HEAD:PORT --secret-file {run_dir / 'secret'}"
            f"{key} (or launch.py workers --slurm N with the same options)")

    @app.command()
    @with_config_options((*BUS_WORKER_OPTIONS, "slurm", "slurm_option"))
    def workers(
        connect: Annotated[str, typer.Option(help="The coordinator's endpoint, e.g. tcp://head:5555.",
                                             metavar="ENDPOINT")],
        secret_file: Annotated[Path, typer.Option(help="The run's secret file (RUN_DIR/secret or a copy, mode 0600) "
                                                       "on a filesystem the nodes see.", metavar="FILE")],
        target: Annotated[str, typer.Option(help="Target the evaluators run.", metavar="NAME")] = "gemmini-sim",
        curve_server_key: Annotated[Optional[Path], typer.Option(help="The coordinator's CurveZMQ public key file.",
                                                                 metavar="FILE", show_default="none")] = None,
        target_option: Annotated[Optional[list[str]], typer.Option(
            help="An option of the evaluators' target, NAME=VALUE (as `run --target-option`; repeatable).",
            metavar="NAME=VALUE", show_default="none")] = None,
        wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Stay until the job ends, and cancel it when "
                                                                    "stopped (Ctrl-C).")] = True,
        **options,
    ) -> None:
        """Submit --slurm N evaluators (one Slurm job) for a coordinator started elsewhere; they exit when its run
        is over."""
        from autocomp_zmq.agents.run.localagents import keyless_env, worker_argv
        from autocomp_zmq.agents.run.runconfig import ConfigError, RunConfig
        from autocomp_zmq.agents.run.runflags import evaluator_args, option_values
        from autocomp_zmq.bus.auth import SecretError, load_secret
        from autocomp_zmq.bus.curve import load_public_key
        from autocomp_zmq.cluster import slurm
        from autocomp_zmq.cluster.evaluators import EvaluatorJob, connect_address, warn_unless_one_per_device
        from autocomp_zmq.hw_runners.base import DescriptorError, UnknownTargetError, target_info
        try:
            cfg = RunConfig.of(**{k: v for k, v in options.items() if v is not None})
            if not cfg.cluster.slurm:
                raise ConfigError("give --slurm N: how many evaluators to submit")
            load_secret(secret_file)                  # mode 0600 and readable, before the tasks find out
            if curve_server_key:
                load_public_key(curve_server_key)
            option_values(target_option or [], "--target-option")     # NAME=VALUE, checked here, not in a task
            args = evaluator_args(cfg, target_option or [])
            host, port = connect_address(connect, "--connect")
            for tool in ("sbatch", "squeue", "scancel"):
                slurm.require(tool, "workers")
            warn_unless_one_per_device(target_info(target).evaluators, cfg.cluster.slurm_option)
            job = EvaluatorJob(tasks=cfg.cluster.slurm, host=host, port=port, secret=secret_file.absolute(),
                               curve_key=curve_server_key.absolute() if curve_server_key else None, target=target,
                               worker_args=args, options=list(cfg.cluster.slurm_option))
            env = job.environment(keyless_env(passed=cfg.local.pass_env), worker_argv())
            slurm.check(job.sbatch_args(), env)
        except (UnknownTargetError, DescriptorError) as exc:     # a KeyError's str() would quote the message
            fail(exc.args[0])
        except (ConfigError, SecretError, slurm.SlurmError, OSError, ValueError) as exc:
            fail(str(exc))
        with _stop_on_signal() as stop:     # from before the submission: a job is never left behind unknown
            try:
                job_id = slurm.submit(job.sbatch_args(), env)
            except slurm.SlurmError as exc:
                fail(str(exc))
            say(f"Submitted Slurm job {job_id}: {job.tasks} evaluators for tcp://{host}:{port} (squeue -j {job_id})")
            if wait or stop.is_set():
                _wait_or_cancel(job_id, stop, say)


@contextmanager
def _stop_on_signal() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while inside: whatever SIGINT's inherited disposition (a command started in
    the background by a script gets it ignored, and Python then raises no KeyboardInterrupt)."""
    stop = threading.Event()
    old = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _wait_or_cancel(job_id: str, stop: threading.Event, say: Callable[[str], None]) -> None:
    """Stay while the job is queued or running (its workers exit when the run is over); `stop` cancels it."""
    from autocomp_zmq.cluster import slurm
    try:
        while not stop.wait(2.0):
            if slurm.state(job_id) is None:
                say(f"Slurm job {job_id} ended.")
                return
    except slurm.SlurmError as exc:
        say(f"cannot follow job {job_id} ({exc}); cancelling it")
    gone = slurm.cancel(job_id)
    say(f"Cancelled Slurm job {job_id}." if gone else f"Slurm job {job_id} is still queued: scancel {job_id}")
    raise typer.Exit(130)
