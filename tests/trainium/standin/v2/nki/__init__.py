"""Stand-in nki (NKI v2, the nki wheel): @nki.jit kernels called with numpy arrays compile standalone and run;
held to what AWS documents (nki.jit, https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/
nki.jit.html; NKI_ARTIFACTS_DIR, nrtpy's debugging tutorial):
  - NKI_ARTIFACTS_DIR is read when nki is imported; the NEFF is kept there as kernel.neff, else in a temporary
    directory deleted after the run;
  - a kernel launched as kernel(...) has LNC=1, and NKI 0.7's compiler refuses a NEURON_LOGICAL_NC_CONFIG that
    differs (NCC_EVRF066); kernel[n](...) launches with LNC=n;
  - using neuronxcc.nki inside a kernel is a compilation error (0.4.0);
  - there is no nki.baremetal, nki.benchmark or nki.profile.
The NEFF (JSON here) holds the kernel's source, its constant arguments, its array parameters, and the platform
(NEURON_PLATFORM_TARGET_OVERRIDE) and LNC it was compiled for."""
import inspect
import json
import os
import shutil
import tempfile
from importlib import metadata

import numpy as np

__version__ = metadata.version("nki") + "+standin"
_ARTIFACTS = os.environ.get("NKI_ARTIFACTS_DIR")        # read at import, as the real package reads its options
COMPILE_LOG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compiles.log")


class CompilationError(RuntimeError):
    pass


class Kernel:
    def __init__(self, fn, lnc=1):
        self.fn, self.lnc = fn, lnc
        self.__name__ = fn.__name__

    def __getitem__(self, lnc):
        return Kernel(self.fn, lnc)

    def __call__(self, *args, **kwargs):
        with open(inspect.getsourcefile(self.fn)) as fh:      # the kernel's whole file, as the compiler traces it
            source = fh.read()
        if "neuronxcc.nki" in source or "from neuronxcc import nki" in source:
            raise CompilationError("neuronxcc.nki.* inside an NKI kernel is a compilation error since NKI 0.4.0")
        runtime_lnc = int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2"))   # trn2's default is 2
        if runtime_lnc != self.lnc:
            raise CompilationError("NCC_EVRF066: NKI kernel '%s' is configured with LNC=%d, but neuronx-cc is using "
                                   "LNC=%d" % (self.__name__, self.lnc, runtime_lnc))
        bound = inspect.signature(self.fn).bind(*args, **kwargs)
        bound.apply_defaults()
        arrays = {k: v for k, v in bound.arguments.items() if isinstance(v, np.ndarray)}
        constants = {k: v for k, v in bound.arguments.items() if k not in arrays}
        neff = {"source": source, "entry": self.fn.__name__, "constants": constants, "lnc": self.lnc,
                "inputs": {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()},
                "platform": os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")}
        with open(COMPILE_LOG, "a") as fh:
            fh.write("compile nki2\n")
        directory = _ARTIFACTS or tempfile.mkdtemp()
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "kernel.neff"), "w") as fh:
            json.dump(neff, fh)
        try:
            return self.fn(*args, **kwargs)             # the standalone run
        finally:
            if not _ARTIFACTS:
                shutil.rmtree(directory, ignore_errors=True)


def jit(fn=None, **kwargs):
    if kwargs.get("mode") not in (None, "auto"):
        raise TypeError("nki.jit's mode= is deprecated and ignored since NKI 0.3.0")
    return Kernel(fn) if fn is not None else (lambda f: Kernel(f))


def simulate(kernel):
    return kernel.fn if isinstance(kernel, Kernel) else kernel
