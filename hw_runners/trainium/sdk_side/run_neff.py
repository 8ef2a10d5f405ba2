"""NKI v2, step 2 of 2: run the compiled NEFF through nrtpy on the evaluator's inputs, then time it.

Runs in nrtpy's own Python environment (the nrtpy and nki wheels cannot be installed together:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrtpy/index.html), and no candidate code
runs here: the outputs are what the device computed from in_<i>.npy, and the times are the device's.
API (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrtpy/model.html, tensor.html):
NrtpyModel.load_from_neff(path, core_id=0); model(inputs={name: NrtpyTensor}) -> {name: NrtpyTensor};
model.benchmark(inputs, warmup_iter=, benchmark_iter=, mode="device") -> BenchmarkResult, whose durations_ms
are device-side run times in milliseconds (it reports no percentiles: they are computed here);
model(inputs, save_trace=True, ntff_name=...) writes the NTFF trace the profiler reads.
"""
import time

import numpy as np

import harness_common as h

NEFF = "kernel.neff"    # copied by the evaluator from the compile step's artifacts into this fresh directory
try:
    from nrtpy import NrtpyModel, NrtpyTensor
except Exception as exc:
    h.fail("device_setup", exc)


def device_array(array, dtype):
    """The bytes the NEFF expects: bf16 as ml_dtypes when installed, else as its raw 16-bit patterns."""
    if dtype == "bfloat16":
        try:
            return h.bf16_array(array)
        except ImportError:
            return (np.ascontiguousarray(array, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return array.astype(h.NUMPY_DTYPES[dtype])


def host_array(array, dtype):
    """An output as float32. Auto-allocated outputs can come back as raw void items (|V2, |V4): they are read
    as the problem declares them."""
    array = np.asarray(array)
    if array.dtype.kind == "V" or dtype == "bfloat16" and array.dtype.itemsize == 2 and array.dtype.kind != "f":
        if dtype == "bfloat16":
            return (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        array = array.view(h.NUMPY_DTYPES.get(dtype, np.float32))
    return array.astype(np.float32)


def load():
    model = NrtpyModel.load_from_neff(NEFF, core_id=0)
    names = set(model.input_tensors_info)
    if names != set(h.JOB["neff_inputs"]):
        raise ValueError("the NEFF's inputs %s are not the kernel's array parameters %s"
                         % (sorted(names), sorted(h.JOB["neff_inputs"])))
    tensors = {}
    for name, i in h.JOB["neff_inputs"].items():
        array = device_array(np.load("in_%d.npy" % i), h.JOB["input_dtypes"][i])
        tensors[name] = NrtpyTensor.from_numpy(array, name=name, core_id=0)
    return model, tensors


def run_once():
    outs = model(inputs=tensors)
    names = sorted(outs, key=lambda n: (int(n.rsplit("_", 1)[1]) if n.rsplit("_", 1)[-1].isdigit() else 1 << 30, n))
    dtypes = h.JOB["output_dtypes"]
    for i, name in enumerate(names):
        array = host_array(outs[name].numpy(), dtypes[i] if i < len(dtypes) else "float32")
        h.RESULT["outputs"].append({"shape": list(array.shape), "dtype": dtypes[i] if i < len(dtypes) else "?"})
        np.save("out_%d.npy" % i, array)


def timed_runs():
    result = model.benchmark(tensors, warmup_iter=h.JOB["warmup"], benchmark_iter=h.JOB["iters"], mode="device")
    h.RESULT["latency_us"] = h.percentiles_us(result.durations_ms)
    h.RESULT["timed_runs"] = len(result.durations_ms)


model, tensors = h.timed("device_setup", load)
h.timed("device_run", run_once)
h.timed("benchmark", lambda: h.chip_locked(timed_runs))
if h.JOB["profile"]:
    started = time.monotonic()
    try:
        model(inputs=tensors, save_trace=True, ntff_name="kernel.ntff")
        h.profile(NEFF, "kernel.ntff")
    except Exception as exc:
        h.RESULT["profile_error"] = "tracing a run failed: %s: %s" % (type(exc).__name__, exc)
    h.RESULT["seconds"]["profile"] = round(time.monotonic() - started, 3)
h.RESULT["ok"] = True
h.RESULT["stage"] = "done"
h.finish()
