"""How one evaluation runs on a Trainium host, and how its failures read.

Two sandboxed processes, and the candidate's Python only in the first:
  1. compile: the SDK's Python runs the dialect's compile script (sdk_side/nki1.py: nki.baremetal, NKI v1 on SDK
     <= 2.29; sdk_side/nki2_compile.py: the @nki.jit kernel, NKI v2) on zero arrays; the NEFF it keeps is the
     kernel. The inputs are not written yet, so it cannot see them.
  2. run: in a fresh directory that holds the NEFF, fresh copies of the scripts and now the inputs, a Python with
     the runtime runs sdk_side/run_neff.py: the outputs the device computes, its run times, and a traced run for
     the profiler. The runtime is nrtpy (SDK 2.32+, in its own environment) or, without it, the runtime's C
     library (libnrt) through ctypes in the SDK's Python.
The NEFF is cached by everything that determines it (kernel source, the call, the SDK's versions, platform, LNC,
compiler flags), so a kernel evaluated again, by this evaluator or another on the host, is compiled once.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.trainium import harness
from autocomp_zmq.hw_runners.trainium_sim.dialect import V1, V2, Sdk
from autocomp_zmq.hw_runners.base import EvalResult
from autocomp_zmq.hw_runners.trainium.metrics import RESULT_LIMIT, read_json
from autocomp_zmq.hw_runners.trainium.neuron import INSTALL_HINT, NRTPY_HINT


@dataclass
class Run:
    """What a run left for the verdict: the directory holding result.json, out_<i>.npy, the NEFF and trace, the
    last sandbox outcome, and whether the NEFF came from the cache."""
    dir: Path
    outcome: sandbox.Outcome
    cached: bool = False
    compile_seconds: dict | None = None      # NKI v2: the compile step's stage times, when it ran

    def result(self) -> dict | None:
        res = read_json(self.dir / "result.json", RESULT_LIMIT)
        return res if isinstance(res, dict) else None


def write_inputs(work: Path, names: list[str], inputs: dict[str, np.ndarray]) -> None:
    for i, name in enumerate(names):
        np.save(work / f"in_{i}.npy", inputs[name])


@dataclass(frozen=True)
class Runtime:
    """What runs the NEFF: "nrtpy" (its Python) or "libnrt" (the SDK's Python and the library's path)."""
    name: str
    python: str
    libnrt: str | None = None


class NeffCache:
    """Compiled NEFFs by key, one directory each (kernel.neff, meta.json), written whole or not at all."""

    def __init__(self, root: Path | None) -> None:
        self.root = Path(root) if root else None

    @staticmethod
    def key(code: str, job: dict, sdk: Sdk, env: dict[str, str]) -> str:
        what = {"code": code, "call": [job["args"], job["kwargs"], job["input_shapes"], job["input_dtypes"]],
                "sdk": [sdk.neuronxcc, sdk.nki], "env": {k: env.get(k) for k in sorted(COMPILE_ENV)}}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]

    def get(self, key: str) -> tuple[Path, dict] | None:
        if self.root is None:
            return None
        entry = self.root / key
        meta = read_json(entry / "meta.json", RESULT_LIMIT)
        if not (isinstance(meta, dict) and (entry / "kernel.neff").is_file()):
            return None
        return entry / "kernel.neff", meta

    def put(self, key: str, neff: Path, meta: dict) -> None:
        if self.root is None:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=self.root))
        except OSError:
            return                                  # no cache this time; the evaluation goes on
        try:
            shutil.copyfile(neff, tmp / "kernel.neff")
            (tmp / "meta.json").write_text(json.dumps(meta))
            os.replace(tmp, self.root / key)      # fails if another evaluator got there first: theirs is as good
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)


# what the compile depends on besides the source and the call (read from the compile step's environment)
COMPILE_ENV = ("NEURON_PLATFORM_TARGET_OVERRIDE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_CC_FLAGS")


COMPILE_SCRIPTS = {V1: "nki1.py", V2: "nki2_compile.py"}


def run(work: Path, code: str, dialect: str, job: dict, inputs: dict[str, np.ndarray], sdk: Sdk, runtime: Runtime,
        compile_env: dict[str, str], run_env: dict[str, str], limits: sandbox.Limits, cache: NeffCache) -> Run:
    key = NeffCache.key(code, job, sdk, compile_env)
    hit = cache.get(key)
    if hit is None:
        argv = harness.install(work, COMPILE_SCRIPTS[dialect], job)
        (work / "tmp").mkdir(exist_ok=True)
        (work / "artifacts").mkdir(exist_ok=True)
        sandbox.prepare_workdir(work, limits)
        env = {**compile_env, "NKI_ARTIFACTS_DIR": str(work / "artifacts")}
        outcome = sandbox.run([sdk.python, *argv], work, limits, env=env)
        compiled = Run(work, outcome)
        res = compiled.result()
        neff = work / "artifacts" / "kernel.neff"
        if not (res and res.get("ok")) or not neff.is_file():
            return compiled                     # the compile step's failure is the verdict
        meta = {"neff_inputs": res.get("neff_inputs"), "seconds": res.get("seconds")}
        cache.put(key, neff, meta)
    else:
        neff, meta = hit
    bound = meta.get("neff_inputs")
    if not (isinstance(bound, dict) and all(isinstance(k, str) and isinstance(v, int) and 0 <= v < len(inputs)
                                            for k, v in bound.items())):
        bound = {}                              # run_neff.py then names the NEFF's inputs it could not bind
    run_dir = work / "run"
    run_dir.mkdir()
    (run_dir / "tmp").mkdir()
    shutil.copyfile(neff, run_dir / "kernel.neff")
    write_inputs(run_dir, job["input_names"], inputs)
    argv = harness.install(run_dir, "run_neff.py", {**job, "neff_inputs": bound, "runtime": runtime.name,
                                                     "libnrt": runtime.libnrt})
    sandbox.prepare_workdir(run_dir, limits)
    outcome = sandbox.run([runtime.python, *argv], run_dir, limits, env={**run_env, "TMPDIR": str(run_dir / "tmp")})
    seconds = meta.get("seconds") if hit is None and isinstance(meta.get("seconds"), dict) else None
    return Run(run_dir, outcome, cached=hit is not None, compile_seconds=seconds)


# what each harness stage failing means, for the error kind and the sentence the repair prompt reads
STAGES = {"setup": ("setup", "the Neuron SDK's Python cannot run NKI kernels"),
          "inputs": ("setup", "the harness could not load the inputs"),
          "import": ("compile", "kernel.py failed to import"),
          # nki.baremetal (v1) and calling the @nki.jit kernel (v2) trace, compile and run (on zeros) in one call;
          # most failures are tracing/compiling ones
          "run": ("compile", "compiling or running the kernel failed"),
          "device_setup": ("crash", "loading the compiled kernel (its NEFF) into the Neuron runtime failed"),
          "device_run": ("crash", "the compiled kernel failed on the device"),
          "benchmark": ("crash", "the kernel ran once, but timing it failed")}


def stage_failure(res: dict, strip: str, common: dict) -> EvalResult:
    """A harness stage that failed, as the error kind and sentence the repair prompt reads."""
    stage, detail = str(res.get("stage")), str(res.get("error") or "")
    kind, what = STAGES.get(stage, ("crash", "the harness failed"))
    if stage == "device_setup" and detail.startswith(("ImportError", "ModuleNotFoundError")):
        kind, detail = "setup", detail + ". " + NRTPY_HINT      # nrtpy's environment, not the kernel
    elif kind == "setup" and stage == "setup":
        detail += ". " + INSTALL_HINT
    trace = str(res.get("traceback") or "").replace(strip, "")
    return EvalResult.failure(kind, f"{what}: {detail}" + (f"\n{trace}" if trace else ""), **common)


def no_result(run: sandbox.Outcome, limits: sandbox.Limits, common: dict) -> EvalResult:
    """The harness wrote no result: it was killed, or the kernel ended the process."""
    if run.returncode == 125:
        return EvalResult.failure("sandbox", run.describe(limits), **common)
    if run.timed_out or run.signal is not None:
        kind = "timeout" if run.timed_out else "crash"
        return EvalResult.failure(kind, f"the evaluation {run.describe(limits)}", **common)
    tail = common.get("stderr", "")[-2000:]
    return EvalResult.failure("crash", f"the harness exited with status {run.returncode} before writing its result "
                              "(the kernel must return from solution(), not exit)" + (f":\n{tail}" if tail else ""),
                              **common)
