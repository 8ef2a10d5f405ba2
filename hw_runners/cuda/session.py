"""Running the cuda target's two children (child/README.md) and reading what they leave: the result file, the
outputs, and, for the candidate, the short conversation through which it learns its timed runs' inputs only once
it is ready to run them ("ready" -> the seed), timed on the evaluator's own clock until it says "done", when it is
stopped: outputs written after that do not count."""
from __future__ import annotations

import json
import os
import select
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult
from autocomp_zmq.hw_runners.cuda.metrics import read_json
from autocomp_zmq.hw_runners.cuda.problems import ProblemSpec

CHILD = Path(__file__).with_name("child")
TO_PARENT, FROM_PARENT = 3, 4       # the candidate child's descriptors of the two pipes
# what a stage failing means, for the error kind and the sentence the repair prompt reads
STAGES = {"setup": ("setup", "the judge could not start"),
          "import": ("compile", "kernel.py failed to import (its inline CUDA is compiled on import)"),
          "init": ("compile", "building ModelNew(*get_init_inputs()) failed"),
          "run": ("crash", "forward failed"),
          "benchmark": ("crash", "timing forward failed")}


@dataclass
class Child:
    dir: Path
    python: str
    env: dict[str, str]
    limits: sandbox.Limits


@dataclass
class Run:
    child: Child
    outcome: sandbox.Outcome
    result: dict = field(default_factory=dict)
    timed_wall_s: float = 0.0            # the evaluator's clock from revealing the timed inputs to "done"

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def error(self) -> str:
        return str(self.result.get("error") or self.outcome.describe(self.child.limits))

    @property
    def stdout(self) -> str:
        return sandbox.read_tail(self.child.dir / "stdout.txt")

    @property
    def stderr(self) -> str:
        return sandbox.read_tail(self.child.dir / "stderr.txt", 6000)

    @property
    def notes(self) -> list[str]:
        return self.outcome.notes

    def output(self, name: str, i: int, mmap: bool = False) -> np.ndarray | None:
        """Output i of an input set (float32), or of a timed run (timed<k>: in its own dtype, bf16 as bit patterns,
        read as float32 here; memory-mapped when only a few positions are read)."""
        array = load(self.child.dir / f"{name}_{i}.npy", mmap)
        meta = (self.result.get("outputs", {}).get("timed" if name.startswith("timed") else name) or [{}])
        dtype = meta[i].get("dtype") if i < len(meta) and isinstance(meta[i], dict) else None
        if array is not None and dtype == "bfloat16" and array.dtype == np.int16:
            return _Bf16(array)
        return array

    def count(self, name: str) -> int:
        meta = self.result.get("outputs", {}).get(name)
        return len(meta) if isinstance(meta, list) else 0

    def times(self, n: int) -> list[float] | None:
        """The n run times the child reported (ms), or None if it reported anything else."""
        times = self.result.get("times_ms")
        if not (isinstance(times, list) and len(times) == n and all(isinstance(t, (int, float)) for t in times)):
            return None
        return [float(t) for t in times]

    def failure(self, limits: sandbox.Limits, common: dict) -> EvalResult:
        res = self.result
        if not res:
            o = self.outcome
            if o.returncode == 125:
                return EvalResult.failure("sandbox", o.describe(limits), **common)
            kind = "timeout" if o.timed_out else "crash"
            tail = common.get("stderr", "")[-2000:]
            return EvalResult.failure(kind, f"the evaluation {o.describe(limits)} before the judge wrote its result"
                                      + (f":\n{tail}" if tail else ""), **common)
        stage = str(res.get("stage"))
        kind, what = STAGES.get(stage, ("crash", "the judge failed"))
        kind = res.get("kind") or kind
        trace = str(res.get("traceback") or "").replace(str(self.child.dir) + "/", "")
        return EvalResult.failure(kind, f"{what}: {res.get('error', '')}" + (f"\n{trace}" if trace else ""), **common)


def load(path: Path, mmap: bool = False) -> np.ndarray | None:
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (OSError, ValueError):
        return None


class _Bf16:
    """A bf16 array stored as its 16-bit patterns, read as float32 (whole, or at flat positions)."""

    def __init__(self, bits: np.ndarray) -> None:
        self.bits, self.shape, self.size = bits, bits.shape, bits.size

    @staticmethod
    def _f32(bits: np.ndarray) -> np.ndarray:
        return (np.asarray(bits).astype(np.uint16).astype(np.uint32) << 16).view(np.float32)

    def at(self, flat: np.ndarray) -> np.ndarray:
        return self._f32(self.bits.reshape(-1)[flat])

    def __array__(self, dtype=None, copy=None):
        return self._f32(self.bits)


def values_at(array, flat: np.ndarray) -> np.ndarray:
    return array.at(flat) if isinstance(array, _Bf16) else np.asarray(array).reshape(-1)[flat].astype(np.float32)


SAMPLED = 4096      # positions checked per output of a timed run (drawn after the runs, by the evaluator)


def compare_outputs(spec: ProblemSpec, cand: "Run", ref: "Run", names: list[str], timed_runs: int,
                    rng: np.random.Generator) -> tuple[str | None, float]:
    """(why the candidate's outputs are wrong, or None; the largest error seen): every input set's outputs in full,
    every timed run's at SAMPLED positions drawn now, after both children have finished."""
    from autocomp_zmq.hw_runners.cuda import metrics
    worst = 0.0
    for name in names:
        n = ref.count(name)
        if cand.count(name) != n:
            return f"forward returned {cand.count(name)} tensors; the reference returns {n}", worst
        for i in range(n):
            got, want = cand.output(name, i), ref.output(name, i)
            if got is None or want is None:
                return f"output {i} of input set {name} could not be read back", worst
            wrong = metrics.mismatch(f"output {i}", got, want, spec.atol, spec.rtol)
            worst = max(worst, metrics.max_error(got, want))
            if wrong:
                return f"wrong result on input set {name} ({'drawn fresh' if 'hidden' in name else 'public'}): {wrong}", worst
    outs = ref.count("timed")
    if cand.count("timed") != outs:
        return f"the timed runs returned {cand.count('timed')} tensors; the reference returns {outs}", worst
    for k in range(timed_runs):
        for o in range(outs):
            got, want = cand.output(f"timed{k}", o, mmap=True), ref.output(f"timed{k}", o, mmap=True)
            if got is None or want is None:
                return f"output {o} of timed run {k} was not saved", worst
            if tuple(got.shape) != tuple(want.shape):
                return f"timed run {k}: output {o} has shape {list(got.shape)}, expected {list(want.shape)}", worst
            flat = rng.choice(want.size, size=min(SAMPLED, want.size), replace=False)
            g, w = values_at(got, flat), values_at(want, flat)
            wrong = metrics.mismatch(f"output {o} (at {flat.size:,} positions drawn after the runs)", g, w, spec.atol,
                                     spec.rtol)
            worst = max(worst, metrics.max_error(g, w))
            if wrong:
                return f"wrong result in timed run {k} (its inputs were revealed as the runs began): {wrong}", worst
    return None, worst


def _install(child: Child, spec: ProblemSpec, script: str, job: dict) -> list[str]:
    child.dir.mkdir(parents=True, exist_ok=True)
    (child.dir / "tmp").mkdir(exist_ok=True)
    for name in ("judge_common.py", script):
        shutil.copyfile(CHILD / name, child.dir / name)
    shutil.copyfile(spec.reference, child.dir / "reference.py")
    (child.dir / "job.json").write_text(json.dumps(job))
    sandbox.prepare_workdir(child.dir, child.limits)
    return [child.python, script, "job.json"]


def _result(child: Child) -> dict:
    res = read_json(child.dir / "result.json")
    return res if isinstance(res, dict) else {}


def run_reference(child: Child, spec: ProblemSpec, job: dict) -> Run:
    outcome = sandbox.run(_install(child, spec, "reference_run.py", job), child.dir, child.limits, env=child.env)
    return Run(child, outcome, _result(child))


def run_profile(child: Child, spec: ProblemSpec, job: dict, code: str) -> dict:
    """Nsight Compute's metrics of one forward of the candidate (ncu.py), or {"ncu_error": why not}."""
    from autocomp_zmq.hw_runners.cuda import ncu
    tool = ncu.ncu_path()
    if tool is None:
        return {"ncu_error": "ncu (Nsight Compute) is not installed"}
    child.dir.mkdir(parents=True, exist_ok=True)
    (child.dir / "kernel.py").write_text(code)
    argv = _install(child, spec, "profile_run.py", job)
    outcome = sandbox.run(ncu.command(tool, *argv), child.dir, child.limits, env=child.env)
    metrics = ncu.parse(sandbox.read_tail(child.dir / "stdout.txt", 1 << 20))
    if metrics:
        return {"ncu": metrics}
    why = ncu.describe_failure(sandbox.read_tail(child.dir / "stderr.txt") + sandbox.read_tail(child.dir / "stdout.txt"))
    return {"ncu_error": why if outcome.ok or not outcome.timed_out else outcome.describe(child.limits)}


def run_candidate(child: Child, spec: ProblemSpec, job: dict, go: dict) -> Run:
    """The candidate child, told `go` (the timed runs' seed, pool size and checked run) only after it says it is
    ready; the evaluator's clock runs from telling it to hearing that the timed runs are done."""
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    argv = _install(child, spec, "candidate_run.py", {**job, "to_parent": TO_PARENT, "from_parent": FROM_PARENT})
    try:
        proc = sandbox.start(argv, child.dir, child.limits, env=child.env, inherit={TO_PARENT: up_w, FROM_PARENT: down_r})
    finally:
        os.close(up_w)
        os.close(down_r)
    deadline = time.monotonic() + child.limits.wall_s + 5
    told = done = None
    try:
        for message in _lines(up_r, deadline):
            if message.get("ready") and told is None:
                told = time.monotonic()
                try:
                    os.write(down_w, (json.dumps(go) + "\n").encode())
                except OSError:
                    break
            elif message.get("done") and told is not None:
                done = time.monotonic()
                sandbox.kill_group(proc.proc.pid)   # what it had not written by now does not count
                break
    finally:
        os.close(up_r)
        os.close(down_w)
    outcome = proc.wait()
    run = Run(child, outcome, _result(child))
    run.timed_wall_s = (done - told) if told is not None and done is not None else 0.0
    if run.ok and done is None:         # a result claiming timed runs the evaluator never saw start and end
        run.result = {"ok": False, "stage": "benchmark", "kind": "policy",
                      "error": "the judge wrote a result without the timed runs this evaluation asked for"}
    return run


def _lines(fd: int, deadline: float, limit: int = 1 << 16):
    """JSON lines from `fd` until EOF or the deadline (malformed or oversized lines end the conversation)."""
    buf = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return
        chunk = os.read(fd, 4096)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                return
            if isinstance(message, dict):
                yield message
        if len(buf) > limit:
            return
