"""NKI v1 (neuronxcc.nki, Neuron SDK <= 2.29): runs kernel.py's solution on one NeuronCore.

  1. nki.baremetal: compile the kernel and run it once, saving every output as out_<i>.npy;
  2. nki.benchmark: compile again and run warmup + iters times under neuron-bench, keeping the NEFF and
     the NTFF trace, and report the latency percentiles (us);
  3. the profiler's summary-json of that NEFF/NTFF, for engine utilisation.
API: https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/nki/api/generated/nki.baremetal.html and
.../nki.benchmark.html (benchmark_result.nc_latency.get_latency_percentile(p), in us as AWS's examples print it).
"""
import os
import time

import numpy as np

import harness_common as h

try:
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
except Exception as exc:
    h.fail("setup", exc)
if not (hasattr(nki, "baremetal") and hasattr(nki, "benchmark")):
    h.RESULT["error"] = ("this neuronxcc has no nki.baremetal/nki.benchmark: NKI v1 kernels need a Neuron SDK "
                         "2.29 or older")
    h.finish()


def device_array(array, dtype):
    """The kernel's view of an input: bf16 arrays made by nl.static_cast, as the NKI v1 samples make them."""
    if dtype == "bfloat16":
        try:
            return nl.static_cast(array, nl.bfloat16)
        except Exception:
            return h.bf16_array(array)
    return array.astype(h.NUMPY_DTYPES[dtype])


def timed_runs():
    # AWS's docstring: save_trace_name "requires that the save_neff_name is unspecified or specified as
    # 'file.neff'"; the NEFF is renamed afterwards, as AWS's own samples do
    bench = nki.benchmark(warmup=h.JOB["warmup"], iters=h.JOB["iters"], save_neff_name="file.neff",
                          save_trace_name="kernel.ntff")(solution)
    bench(*args, **kwargs)
    if os.path.exists("file.neff"):
        os.replace("file.neff", "kernel.neff")
    latency = bench.benchmark_result.nc_latency
    h.RESULT["latency_us"] = {}
    for p in h.JOB["percentiles"]:
        try:
            h.RESULT["latency_us"]["p%d" % p] = float(latency.get_latency_percentile(p))
        except Exception:
            if p in (50, 99):
                raise


inputs = h.timed("inputs", lambda: [device_array(np.load("in_%d.npy" % i), dtype)
                                    for i, dtype in enumerate(h.JOB["input_dtypes"])])
solution = h.timed("import", h.load_kernel)
args, kwargs = h.call_arguments(inputs, nl)
outs = h.timed("run", lambda: nki.baremetal(solution)(*args, **kwargs))
h.timed("outputs", lambda: h.save_outputs(outs))
h.timed("benchmark", lambda: h.chip_locked(timed_runs))
if h.JOB["profile"]:
    started = time.monotonic()
    h.profile("kernel.neff", "kernel.ntff")
    h.RESULT["seconds"]["profile"] = round(time.monotonic() - started, 3)
h.RESULT["ok"] = True
h.RESULT["stage"] = "done"
h.finish()
