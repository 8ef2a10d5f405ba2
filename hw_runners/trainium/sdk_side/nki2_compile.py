"""NKI v2 (import nki, Neuron SDK 2.27+), step 1 of 2: compile kernel.py's solution to a NEFF.

Calling an @nki.jit kernel with numpy arrays compiles it and runs it standalone, without a framework
(nki.jit's docstring, https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.jit.html);
with NKI_ARTIFACTS_DIR set before `import nki` the NEFF is kept as <dir>/kernel.neff (nrtpy's debugging tutorial,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrtpy/tutorial-debug-neff-nrtpy.html).
The kernel is called on zero arrays of the problem's shapes and dtypes: compiling depends on those alone, and
the candidate's Python never sees the inputs it is judged on. Its results here are not used: run_neff.py runs
the NEFF on fresh inputs in a process that runs no candidate code. The NEFF's inputs are named after the
kernel's parameters, so this step reports which parameter each problem input was bound to.
"""
import inspect
import os

import numpy as np

import harness_common as h

os.environ.setdefault("NKI_ARTIFACTS_DIR", os.path.abspath("artifacts"))
try:
    import nki
    import nki.language as nl
except Exception as exc:
    h.fail("setup", exc)


def zeros(shape, dtype):
    if dtype == "bfloat16":
        return h.bf16_array(np.zeros(shape, np.float32))
    return np.zeros(shape, h.NUMPY_DTYPES[dtype])


def python_function(kernel):
    """The Python function behind an @nki.jit kernel object (whose attribute names are not documented)."""
    for attr in ("__wrapped__", "func", "fn", "function"):
        inner = getattr(kernel, attr, None)
        if inspect.isfunction(inner):
            return inner
    return kernel


def bindings(fn, args, kwargs, inputs):
    """{kernel parameter name: input index} for the parameters the problem's arrays are passed to."""
    bound = inspect.signature(python_function(fn)).bind(*args, **kwargs)
    ids = {id(a): i for i, a in enumerate(inputs)}
    return {name: ids[id(value)] for name, value in bound.arguments.items() if id(value) in ids}


def launched(kernel):
    """The kernel as the runtime's logical core config launches it: NKI 0.4-0.6 take the LNC as kernel[n](...)
    (LNC=1 by default), NKI 0.7 reads NEURON_LOGICAL_NC_CONFIG and deprecates the brackets."""
    lnc = int(os.environ.get("NEURON_LOGICAL_NC_CONFIG") or 1)
    version = tuple(int(p) for p in h.RESULT["nki_version"].split("+")[0].split(".")[:2] if p.isdigit())
    return kernel[lnc] if lnc > 1 and version < (0, 7) else kernel


def compile_kernel():
    result = launched(solution)(*args, **kwargs)
    outs = result if isinstance(result, (tuple, list)) else (result,)
    h.RESULT["outputs"] = [{"shape": list(np.shape(o)), "dtype": str(getattr(o, "dtype", "?"))} for o in outs]
    if not os.path.exists(os.path.join(os.environ["NKI_ARTIFACTS_DIR"], "kernel.neff")):
        raise FileNotFoundError("the kernel ran but NKI kept no kernel.neff in NKI_ARTIFACTS_DIR")


h.RESULT["nki_version"] = str(getattr(nki, "__version__", ""))
inputs = h.timed("inputs", lambda: [zeros(shape, dtype) for shape, dtype in
                                    zip(h.JOB["input_shapes"], h.JOB["input_dtypes"])])
solution = h.timed("import", h.load_kernel)
args, kwargs = h.call_arguments(inputs, nl)
h.RESULT["neff_inputs"] = h.timed("import", lambda: bindings(solution, args, kwargs, inputs))
h.timed("run", compile_kernel)
h.RESULT["ok"] = True
h.RESULT["stage"] = "done"
h.finish()
