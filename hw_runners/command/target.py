"""CommandTarget: a target whose evaluation is the user's own command.

The product writes the candidate into a fresh working directory and runs the command the target.toml
declares; the command compiles, runs, checks and times the candidate and prints one JSON line
(verdict.py). The command is trusted, like the evaluator; the candidate is not, so the command runs it
as a separate child through the product's sandbox launcher ($AUTOCOMP_SANDBOX_LAUNCHER): the contract
for command writers, and why it makes forged verdicts and timings impossible by construction, is in
docs/command-target.md."""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult, Problem, Target, bounded
from autocomp_zmq.hw_runners.command.spec import CommandSpec, ProblemSpec, expand, load_command, load_problem
from autocomp_zmq.hw_runners.command.verdict import MalformedVerdict, command_fault, read_verdict, to_report
from autocomp_zmq.sandbox.buildcache import cache_root

OUTPUT_LIMIT = 1 << 20      # bytes of the command's stdout and stderr kept each (a verdict is one short line)


class CommandTarget(Target):
    """A target declared by a folder: target.toml with a [command] table, a prompt pack and problems/."""

    def __init__(self, work_root: Path | None = None, keep_workdir: bool = False) -> None:
        self.work_root, self.keep_workdir = work_root, keep_workdir

    @classmethod
    @functools.cache
    def command(cls) -> CommandSpec:
        return load_command(Path(cls.home))

    def problems(self) -> list[Problem]:
        root = self.info().problems
        found = []
        for folder in sorted(p.parent for p in root.glob("*/problem.toml")):
            spec = load_problem(folder)
            found.append(Problem(name=folder.name, target=self.name, family=spec.family, dims=dict(spec.dims),
                                 description=spec.description, kernels={"naive": folder / spec.start},
                                 semantics=(folder, spec)))
        return found

    def problem_spec(self, problem: Problem) -> tuple[Path, ProblemSpec]:
        if problem.semantics is None:
            problem = self.problem(problem.name)
        return problem.semantics

    def evaluate(self, problem: Problem, code: str, *, seed: int = 0, trace_path: Path | None = None,
                 time_limit_s: float | None = None) -> EvalResult:
        started = time.monotonic()
        folder, _ = self.problem_spec(problem)
        work = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=self.work_root))
        try:
            result = self._run(work, folder, code, seed, time_limit_s)
        finally:
            if not self.keep_workdir:
                shutil.rmtree(work, ignore_errors=True)
        result.wall_s = time.monotonic() - started
        return bounded(result)

    def _run(self, work: Path, folder: Path, code: str, seed: int, time_limit_s: float | None) -> EvalResult:
        spec, unit = self.command(), self.info().latency_unit
        (work / spec.candidate).write_text(code)
        timeout = spec.timeout_s if time_limit_s is None else min(spec.timeout_s, time_limit_s)
        argv = expand(spec.argv, {"python": sys.executable, "home": str(self.home), "problem": str(folder),
                                  "candidate": str(work / spec.candidate), "seed": str(seed),
                                  "workdir": str(work), "time_limit": f"{timeout:g}"})
        env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": str(work),
               "TMPDIR": str(work), "LANG": "C.UTF-8", "AUTOCOMP_CACHE": str(cache_root()),
               "AUTOCOMP_SANDBOX_LAUNCHER": str(sandbox.launcher_path()), **spec.env}
        try:
            proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            return command_fault(f"could not start ({argv[0]}: {exc})", "", "", unit)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            out, err = proc.communicate()
            return command_fault(f"ran past its timeout of {timeout:g} s and was killed (a kernel that runs "
                                 "forever, or a command that does not bound its runs)", _text(out), _text(err),
                                 unit, kind="timeout")
        stdout, stderr = _text(out), _text(err)
        if proc.returncode != 0:
            how = (f"was killed by signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
                   else f"exited with status {proc.returncode}")
            return command_fault(how, stdout, stderr, unit)
        try:
            verdict = read_verdict(stdout, unit)
        except MalformedVerdict as exc:
            return command_fault(f"printed no usable verdict: {exc}", stdout, stderr, unit)
        return to_report(verdict, unit, stderr)


def _kill_tree(pid: int) -> None:
    """SIGKILL the command, its process group and every descendant: the children it sandboxed run in sessions
    of their own, which killing its group would miss."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    sandbox.kill_group(pid)
    for child in descendants:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


def _text(data: bytes) -> str:
    if len(data) > OUTPUT_LIMIT:
        data = data[:OUTPUT_LIMIT // 2] + b"\n[... output cut ...]\n" + data[-OUTPUT_LIMIT // 2:]
    return data.decode("utf-8", errors="replace")
