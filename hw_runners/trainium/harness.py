"""The job an evaluation runs on the Trainium host, written from a problem's spec.

The scripts that run it live in sdk_side/ (they run in the Neuron SDK's Python environments, not ours, and
import nothing of this product). Each evaluation gets a private directory holding kernel.py, the scripts, and
job.json: the kernel's call as Python source (inputs[i] for the problem's arrays, nl.<dtype> for dtypes,
literals for the rest), the inputs' names, shapes and dtypes, the outputs' dtypes, the benchmark's warm-up
and timed runs, the percentiles to report, the chip's timing lock and whether to profile.
"""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

from autocomp_zmq.hw_runners.trainium.metrics import PERCENTILES   # NKI v2: computed from nrtpy's run times
from autocomp_zmq.hw_runners.trainium_sim.workloads import ProblemSpec

# a dtype literal in problem.toml ("nl.bfloat16"): emitted as code, not as a string
DTYPE_LITERAL = re.compile(r"nl\.[A-Za-z_][A-Za-z0-9_]*")
PROFILE_TIMEOUT_S = 300
SDK_SIDE = Path(__file__).with_name("sdk_side")


class HarnessError(ValueError):
    """A problem spec whose call cannot be written as Python."""


def literal(value: Any, inputs: dict[str, int]) -> str:
    """Python source for one argument of the call: an input array, a dtype, or a plain literal."""
    if isinstance(value, str):
        if value in inputs:
            return f"inputs[{inputs[value]}]"
        return value if DTYPE_LITERAL.fullmatch(value) else repr(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, (tuple, list)):
        items = [literal(v, inputs) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v, inputs)}" for k, v in value.items()) + "}"
    raise HarnessError(f"cannot pass {value!r} ({type(value).__name__}) to the kernel")


def call_source(spec: ProblemSpec) -> tuple[str, str]:
    """(the positional arguments, the keyword arguments) of solution(...), as Python source."""
    inputs = {t.name: i for i, t in enumerate(spec.inputs)}
    args = ", ".join(literal(v, inputs) for v in spec.call)
    for name in spec.kwargs:
        if not name.isidentifier():
            raise HarnessError(f"keyword argument {name!r} is not a Python identifier")
    kwargs = ", ".join(f"{name}={literal(v, inputs)}" for name, v in spec.kwargs.items())
    return args, kwargs


def job(spec: ProblemSpec, warmup: int, iters: int, profile: bool = True, chip_lock: str | None = None) -> dict:
    """job.json for `spec`; chip_lock: a file whose exclusive flock the timed runs hold (one timed kernel per
    chip at a time)."""
    args, kwargs = call_source(spec)
    return {"problem": spec.name, "args": args, "kwargs": kwargs, "warmup": int(warmup), "iters": int(iters),
            "profile": bool(profile), "chip_lock": chip_lock, "profile_timeout": PROFILE_TIMEOUT_S,
            "percentiles": list(PERCENTILES), "input_names": [t.name for t in spec.inputs],
            "input_shapes": [list(t.shape) for t in spec.inputs], "input_dtypes": [t.dtype for t in spec.inputs],
            "output_dtypes": [t.dtype for t in spec.outputs]}


def install(work: Path, script: str, job_doc: dict, job_name: str = "job.json") -> list[str]:
    """Write the job and the scripts into `work` (overwriting whatever is there); the command line to run."""
    shutil.copyfile(SDK_SIDE / "common.py", work / "harness_common.py")
    shutil.copyfile(SDK_SIDE / "nrt.py", work / "harness_nrt.py")
    shutil.copyfile(SDK_SIDE / script, work / script)
    (work / job_name).write_text(json.dumps(job_doc))
    return [script, job_name]
