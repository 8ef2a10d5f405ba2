"""Both NKI dialects, step 2 of 2: run the compiled NEFF on the evaluator's inputs, then time it.

No candidate code runs in this process: the outputs are what the device computed from in_<i>.npy, and the times
are measured here. The job's "runtime" says through what:
  - nrtpy (Neuron SDK 2.32+; its own Python environment: the nrtpy and nki wheels cannot be installed together,
    https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrtpy/index.html).
    NrtpyModel.load_from_neff(path, core_id=0); model(inputs={name: NrtpyTensor}) -> {name: NrtpyTensor};
    model.benchmark(inputs, warmup_iter=, benchmark_iter=, mode="device").durations_ms are the device's own run
    times (no percentiles: computed here); model(inputs, save_trace=True, ntff_name=...) traces one run.
  - libnrt (any SDK: the runtime's C library through ctypes, harness_nrt.py), where nrtpy is not installed:
    each run is timed by the host's clock around one nrt_execute call (the device's run plus the runtime's
    launch, with the inputs already on the device, as neuron-bench timed nki.benchmark's runs), and the trace
    is captured by the profiler's own `capture` command.
"""
import time

import numpy as np

import harness_common as h

NEFF = "kernel.neff"    # copied by the evaluator from the compile step's artifacts into this fresh directory


def device_array(array, dtype):
    """The bytes the NEFF expects: bf16 as ml_dtypes when installed, else as its raw 16-bit patterns."""
    if dtype == "bfloat16":
        try:
            return h.bf16_array(array)
        except ImportError:
            return (np.ascontiguousarray(array, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return array.astype(h.NUMPY_DTYPES[dtype])


def host_array(array, dtype):
    """An output as float32. Auto-allocated outputs can come back as raw void items (|V2, |V4) and libnrt's as
    their raw bytes: they are read as the problem declares them."""
    array = np.asarray(array)
    if array.dtype.kind in "Vu" or dtype == "bfloat16" and array.dtype.itemsize == 2 and array.dtype.kind != "f":
        if dtype == "bfloat16" and array.dtype.itemsize == 2:
            return (array.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        if array.dtype.kind == "V":
            array = array.view(h.NUMPY_DTYPES.get(dtype, np.float32))
    return array.astype(np.float32)


def bind(names):
    """{NEFF input name: input index}. The compile step reported the kernel's array parameters in order; a NEFF
    whose inputs carry those names is bound by name, one with other names (but as many) by position."""
    params = h.JOB["neff_inputs"]
    if set(names) == set(params):
        h.RESULT["input_binding"] = "by name"
        return {name: params[name] for name in names}
    if len(names) == len(params):
        h.RESULT["input_binding"] = "by position"
        return dict(zip(names, params.values()))
    raise ValueError("the NEFF's inputs %s are not the kernel's array parameters %s" % (sorted(names), sorted(params)))


def ordered(names):
    """Output names in the kernel's return order: output_0, output_1, ... where the NEFF names them so."""
    def key(n):
        tail = n.rsplit("_", 1)[-1]
        return (int(tail) if tail.isdigit() else 1 << 30, n)
    return sorted(names, key=key) if all(n.rsplit("_", 1)[-1].isdigit() for n in names) else list(names)


def save_outputs(arrays):
    dtypes = h.JOB["output_dtypes"]
    for i, array in enumerate(arrays):
        dtype = dtypes[i] if i < len(dtypes) else "float32"
        out = host_array(array, dtype)
        h.RESULT["outputs"].append({"shape": list(out.shape), "dtype": dtype if i < len(dtypes) else "?"})
        np.save("out_%d.npy" % i, out)


class Nrtpy(object):
    timing = "device"

    def __init__(self):
        from nrtpy import NrtpyModel, NrtpyTensor
        self.model = NrtpyModel.load_from_neff(NEFF, core_id=0)
        self.tensors = {}
        for name, i in bind(list(self.model.input_tensors_info)).items():
            array = device_array(np.load("in_%d.npy" % i), h.JOB["input_dtypes"][i])
            self.tensors[name] = NrtpyTensor.from_numpy(array, name=name, core_id=0)

    def run(self):
        outs = self.model(inputs=self.tensors)
        return [outs[name].numpy() for name in ordered(list(outs))]

    def durations_ms(self, warmup, iters):
        return self.model.benchmark(self.tensors, warmup_iter=warmup, benchmark_iter=iters, mode="device").durations_ms

    def trace(self, ntff):
        self.model(inputs=self.tensors, save_trace=True, ntff_name=ntff)


class Libnrt(object):
    timing = "host"

    def __init__(self):
        import harness_nrt
        self.model = harness_nrt.Model(h.JOB["libnrt"], NEFF)
        by_name = dict((t.name, t) for t in self.model.inputs)
        for name, i in bind([t.name for t in self.model.inputs]).items():
            dtype, tensor = h.JOB["input_dtypes"][i], by_name[name]
            if tensor.dtype_name != dtype:
                raise ValueError("the NEFF's input %s is %s, the problem's %s is %s"
                                 % (name, tensor.dtype_name, h.JOB["input_names"][i], dtype))
            self.model.write(tensor, device_array(np.load("in_%d.npy" % i), dtype))
        names = ordered([t.name for t in self.model.outputs])
        self.outputs = sorted(self.model.outputs, key=lambda t: names.index(t.name))

    def run(self):
        self.model.execute()
        return [self.model.read(t) for t in self.outputs]

    def durations_ms(self, warmup, iters):
        for _ in range(warmup):
            self.model.execute()
        times = []
        for _ in range(iters):
            started = time.perf_counter()
            self.model.execute()
            times.append((time.perf_counter() - started) * 1e3)
        return times

    def trace(self, ntff):
        h.capture(NEFF, ntff)


def timed_runs():
    durations = device.durations_ms(h.JOB["warmup"], h.JOB["iters"])
    h.RESULT["latency_us"] = h.percentiles_us(durations)
    h.RESULT["timed_runs"] = len(durations)


RUNTIMES = {"nrtpy": Nrtpy, "libnrt": Libnrt}
device = h.timed("device_setup", lambda: RUNTIMES[h.JOB["runtime"]]())
h.RESULT["timing"] = device.timing
h.timed("device_run", lambda: save_outputs(device.run()))
h.timed("benchmark", lambda: h.chip_locked(timed_runs))
if h.JOB["profile"]:
    started = time.monotonic()
    try:
        device.trace("kernel.ntff")
        h.profile(NEFF, "kernel.ntff")
    except Exception as exc:
        h.RESULT["profile_error"] = "tracing a run failed: %s: %s" % (type(exc).__name__, exc)
    h.RESULT["seconds"]["profile"] = round(time.monotonic() - started, 3)
h.RESULT["ok"] = True
h.RESULT["stage"] = "done"
h.finish()
