"""NKI v2 (import nki, Neuron SDK 2.27+), step 1 of 2: compile kernel.py's solution to a NEFF.

Calling an @nki.jit kernel with numpy arrays compiles it and runs it standalone, without a framework
(nki.jit's docstring, https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.jit.html);
with NKI_ARTIFACTS_DIR set before `import nki` the NEFF is kept as <dir>/kernel.neff (nrtpy's debugging tutorial,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrtpy/tutorial-debug-neff-nrtpy.html).
The kernel is called on zero arrays of the problem's shapes and dtypes (harness_common.zeros); its results here
are not used: run_neff.py runs the NEFF on fresh inputs in a process that runs no candidate code.
"""
import os

import harness_common as h

os.environ.setdefault("NKI_ARTIFACTS_DIR", os.path.abspath("artifacts"))
try:
    import nki
    import nki.language as nl
except Exception as exc:
    h.fail("setup", exc)


def launched(kernel):
    """The kernel as the runtime's logical core config launches it: NKI 0.4-0.6 take the LNC as kernel[n](...)
    (LNC=1 by default), NKI 0.7 reads NEURON_LOGICAL_NC_CONFIG and deprecates the brackets."""
    lnc = int(os.environ.get("NEURON_LOGICAL_NC_CONFIG") or 1)
    version = tuple(int(p) for p in h.RESULT["nki_version"].split("+")[0].split(".")[:2] if p.isdigit())
    return kernel[lnc] if lnc > 1 and version < (0, 7) else kernel


def compile_kernel(solution, args, kwargs):
    result = launched(solution)(*args, **kwargs)
    if not os.path.exists(os.path.join(os.environ["NKI_ARTIFACTS_DIR"], "kernel.neff")):
        raise FileNotFoundError("the kernel ran but NKI kept no kernel.neff in NKI_ARTIFACTS_DIR")
    return result


h.RESULT["nki_version"] = str(getattr(nki, "__version__", ""))
inputs = h.timed("inputs", lambda: [h.zeros(shape, dtype) for shape, dtype in
                                    zip(h.JOB["input_shapes"], h.JOB["input_dtypes"])])
h.compile_step(compile_kernel, inputs, nl)
