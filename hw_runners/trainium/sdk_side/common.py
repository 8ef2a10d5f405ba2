"""What every harness script shares (copied into the evaluation's directory as harness_common.py): the job
the evaluator wrote, the result file it reads back, stages with their timings, what both dialects' compile steps
do (zero inputs, the kernel's array parameters) and the device-side steps (the chip's timing lock, the profile)."""
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

import numpy as np

with open(sys.argv[1] if len(sys.argv) > 1 else "job.json") as _fh:
    JOB = json.load(_fh)
RESULT = {"ok": False, "stage": "setup", "outputs": [], "seconds": {}}
NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "int8": np.int8,
                "uint8": np.uint8}


def finish():
    path = "result.json"
    with open(path + ".tmp", "w") as fh:
        json.dump(RESULT, fh)
    os.replace(path + ".tmp", path)
    sys.exit(0)


def fail(stage, exc):
    RESULT["stage"] = stage
    RESULT["error"] = "%s: %s" % (type(exc).__name__, exc)
    RESULT["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:]
    finish()


def timed(stage, fn):
    RESULT["stage"] = stage
    started = time.monotonic()
    try:
        value = fn()
    except Exception as exc:
        RESULT["seconds"][stage] = round(time.monotonic() - started, 3)
        fail(stage, exc)
    RESULT["seconds"][stage] = round(time.monotonic() - started, 3)
    return value


def bf16_array(array):
    """numpy has no bfloat16: NKI's own dtypes build on ml_dtypes'."""
    import ml_dtypes
    return array.astype(ml_dtypes.bfloat16)


def load_kernel():
    import importlib.util
    spec = importlib.util.spec_from_file_location("kernel", os.path.abspath("kernel.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "solution", None)):
        raise NameError("kernel.py defines no solution()")
    return module.solution


def chip_locked(fn):
    """fn() holding the chip's timing lock when the job names one: the cores of a chip share its HBM, so a
    memory-bound kernel timed beside another would be slowed by it."""
    lock = JOB.get("chip_lock")
    if not lock:
        return fn()
    import fcntl
    fd = os.open(lock, os.O_RDWR)
    try:
        started = time.monotonic()
        fcntl.flock(fd, fcntl.LOCK_EX)
        RESULT["seconds"]["chip_wait"] = round(time.monotonic() - started, 3)
        return fn()
    finally:
        os.close(fd)


def percentiles_us(durations_ms):
    """Latency percentiles in us of device run times in ms, at the percentiles nki.benchmark reported."""
    values = np.asarray(durations_ms, dtype=np.float64) * 1e3
    return {"p%d" % p: float(np.percentile(values, p)) for p in JOB["percentiles"]}


def _profilers():
    """neuron-explorer replaces neuron-profile (no longer supported from SDK 2.30) with the same capture and view
    arguments; the summary-json layout is the same."""
    return [t for t in (shutil.which(name) or os.path.join("/opt/aws/neuron/bin", name)
                        for name in ("neuron-explorer", "neuron-profile")) if os.access(t, os.X_OK)]


def capture(neff, ntff):
    """Trace one run of the NEFF with the profiler's capture command (`capture -n NEFF -s NTFF`, AWS's "Profile a
    NKI Kernel" guides), for runtimes that cannot save a trace themselves (libnrt)."""
    found = _profilers()
    if not found:
        raise OSError("neither neuron-explorer nor neuron-profile is installed (aws-neuronx-tools)")
    done = subprocess.run([found[0], "capture", "-n", neff, "-s", ntff], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=JOB["profile_timeout"])
    if done.returncode or not os.path.exists(ntff):
        raise OSError("%s capture exited with status %d: %s" % (os.path.basename(found[0]), done.returncode,
                                                                 done.stderr[-600:].decode(errors="replace")))


def profile(neff, ntff):
    """The profiler's summary of one traced run, as profile.json."""
    found = _profilers()
    if not (os.path.exists(neff) and os.path.exists(ntff)):
        RESULT["profile_error"] = "no NEFF and trace to profile"
        return
    if not found:
        RESULT["profile_error"] = "neither neuron-explorer nor neuron-profile is installed (aws-neuronx-tools)"
        return
    RESULT["profiler"] = os.path.basename(found[0])
    try:
        with open("profile.json", "wb") as fh:
            done = subprocess.run([found[0], "view", "-n", neff, "-s", ntff, "--output-format", "summary-json"],
                                  stdout=fh, stderr=subprocess.PIPE, timeout=JOB["profile_timeout"])
        if done.returncode:
            RESULT["profile_error"] = "%s exited with status %d: %s" % (
                RESULT["profiler"], done.returncode, done.stderr[-600:].decode(errors="replace"))
    except Exception as exc:
        RESULT["profile_error"] = "%s: %s" % (type(exc).__name__, exc)


def call_arguments(inputs, nl):
    """The kernel's positional and keyword arguments: the job's call, written as Python by the evaluator
    (inputs[i] for arrays, nl.<dtype> for dtypes, literals for the rest)."""
    scope = {"inputs": inputs, "nl": nl, "float": float}
    return eval("[" + JOB["args"] + "]", scope), eval("dict(" + JOB["kwargs"] + ")", scope)


def zeros(shape, dtype, cast=None):
    """A zero input for the compile step: compiling depends on shapes and dtypes alone, and the candidate's Python
    never sees the inputs it is judged on. cast: the dialect's own bf16 conversion, if it has one."""
    if dtype == "bfloat16":
        return cast(np.zeros(shape, np.float32)) if cast else bf16_array(np.zeros(shape, np.float32))
    return np.zeros(shape, NUMPY_DTYPES[dtype])


def python_function(kernel):
    """The Python function behind an @nki.jit kernel object (whose attribute names are not documented)."""
    for attr in ("__wrapped__", "func", "fn", "function"):
        inner = getattr(kernel, attr, None)
        if inspect.isfunction(inner):
            return inner
    return kernel


def bindings(fn, args, kwargs, inputs):
    """{kernel parameter name: input index} for the parameters the problem's arrays are passed to, in the
    kernel's parameter order (the NEFF's inputs are named after them)."""
    bound = inspect.signature(python_function(fn)).bind(*args, **kwargs)
    ids = {id(a): i for i, a in enumerate(inputs)}
    return {name: ids[id(value)] for name, value in bound.arguments.items() if id(value) in ids}


def compile_step(compile_kernel, inputs, nl):
    """Load the kernel, bind the problem's arrays to its parameters, compile, and report (both dialects)."""
    solution = timed("import", load_kernel)
    args, kwargs = call_arguments(inputs, nl)
    RESULT["neff_inputs"] = timed("import", lambda: bindings(solution, args, kwargs, inputs))
    result = timed("run", lambda: compile_kernel(solution, args, kwargs))
    outs = result if isinstance(result, (tuple, list)) else (result,)
    RESULT["outputs"] = [{"shape": list(np.shape(o)), "dtype": str(getattr(o, "dtype", "?"))} for o in outs]
    RESULT["ok"] = True
    RESULT["stage"] = "done"
    finish()
