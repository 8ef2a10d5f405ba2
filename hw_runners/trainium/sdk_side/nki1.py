"""NKI v1 (neuronxcc.nki, Neuron SDK <= 2.29), step 1 of 2: compile kernel.py's solution to a NEFF.

nki.baremetal compiles the kernel, runs it once on the NeuronCore and keeps the NEFF at save_neff_name
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/nki/api/generated/nki.baremetal.html). It is called on
zero arrays of the problem's shapes and dtypes, so the candidate's Python never sees the inputs it is judged on;
run_neff.py then runs and times that NEFF on fresh inputs (through nrtpy, or the runtime's C library on SDKs
without it) in a process that runs no candidate code. One compile per evaluation, cached by the evaluator; no
nki.benchmark, which compiled the kernel a second time.
"""
import os

import harness_common as h

try:
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
except Exception as exc:
    h.fail("setup", exc)
if not hasattr(nki, "baremetal"):
    h.RESULT["error"] = "this neuronxcc has no nki.baremetal: NKI v1 kernels need a Neuron SDK 2.29 or older"
    h.finish()
NEFF = os.path.join(os.path.abspath("artifacts"), "kernel.neff")


def bf16(array):
    """bf16 arrays made by nl.static_cast, as the NKI v1 samples make them."""
    try:
        return nl.static_cast(array, nl.bfloat16)
    except Exception:
        return h.bf16_array(array)


def compile_kernel(solution, args, kwargs):
    result = nki.baremetal(save_neff_name=NEFF)(solution)(*args, **kwargs)
    if not os.path.exists(NEFF):
        raise FileNotFoundError("nki.baremetal ran the kernel but kept no NEFF at save_neff_name")
    return result


inputs = h.timed("inputs", lambda: [h.zeros(shape, dtype, cast=bf16) for shape, dtype in
                                    zip(h.JOB["input_shapes"], h.JOB["input_dtypes"])])
h.compile_step(compile_kernel, inputs, nl)
