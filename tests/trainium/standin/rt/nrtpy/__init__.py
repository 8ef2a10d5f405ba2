"""Stand-in nrtpy (the Neuron runtime's Python API, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/
neuron-runtime/nrtpy/model.html): runs the stand-in NEFFs with numpy as the device, on the documented API:
NrtpyModel.load_from_neff(path, name=None, core_id=0, ...), input_tensors_info, model(inputs, outputs=None,
save_trace=False, ntff_name=None) -> {"output_0": NrtpyTensor, ...}, model.benchmark(inputs, outputs=None,
warmup_iter=5, benchmark_iter=5, mode="device") -> BenchmarkResult (milliseconds, no percentiles).
It refuses to import beside nki (AWS: the two wheels cannot share an environment), and a NEFF compiled for
another LNC than the runtime's NEURON_LOGICAL_NC_CONFIG fails to load."""
import importlib.util
import json
import os
import sys
import types
from collections import namedtuple

import numpy as np
from standin_chiplock import record_chip_lock

if importlib.util.find_spec("nki") is not None:
    raise ImportError("nrtpy and nki cannot be installed in the same Python environment")

TensorMetadata = namedtuple("TensorMetadata", "shape size")
BenchmarkResult = namedtuple("BenchmarkResult", "mean_ms min_ms max_ms std_dev_ms iterations warmup_iterations "
                                                "durations_ms")


class NrtError(RuntimeError):
    pass


class NrtpyTensor:
    def __init__(self, array, name=None):
        self.array, self.name = array, name
        self.shape, self.dtype = array.shape, array.dtype

    @classmethod
    def from_numpy(cls, array, name=None, core_id=0):
        return cls(np.ascontiguousarray(array).copy(), name)

    def numpy(self):
        return self.array


def _device_modules():
    """What `import nki` (NKI v2) or `import neuronxcc.nki` (v1: a NEFF runs whatever compiled it) gives the
    kernel's source on the "device" (neither is importable from this environment)."""
    mods = {}
    for root in ("nki", "neuronxcc.nki"):
        nki = types.ModuleType(root)
        nki.jit = nki.baremetal = lambda fn=None, **kw: fn if fn is not None else (lambda f: f)
        nki.language = types.ModuleType(root + ".language")
        nki.language.bfloat16, nki.language.float32, nki.language.shared_hbm = "bfloat16", "float32", "shared_hbm"
        nki.isa = types.ModuleType(root + ".isa")
        mods.update({root: nki, root + ".language": nki.language, root + ".isa": nki.isa})
    mods["neuronxcc"] = types.ModuleType("neuronxcc")
    mods["neuronxcc"].nki = mods["neuronxcc.nki"]
    return mods


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


class NrtpyModel:
    def __init__(self, neff, name):
        self.neff, self.name = neff, name
        self.input_tensors_info = {k: TensorMetadata(tuple(s), int(np.prod(s))) for k, (s, _) in neff["inputs"].items()}

    @classmethod
    def load_from_neff(cls, neff_path, name=None, core_id=0, cc_enabled=False, rank_id=0, world_size=1):
        with open(neff_path) as fh:
            neff = json.load(fh)
        if int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2")) != neff["lnc"]:
            raise NrtError("NRT_FAILURE(6): the NEFF was compiled for LNC=%d" % neff["lnc"])
        return cls(neff, name or os.path.splitext(os.path.basename(str(neff_path)))[0])

    def _execute(self, inputs):
        if set(inputs) != set(self.neff["inputs"]):
            raise NrtError("input names %s do not match the NEFF's %s" % (sorted(inputs), sorted(self.neff["inputs"])))
        for name, (shape, dtype) in self.neff["inputs"].items():
            got = inputs[name].array
            if list(got.shape) != shape or got.dtype.itemsize != np.dtype(dtype if dtype != "bfloat16" else
                                                                          np.uint16).itemsize:
                raise NrtError("input %s is %s %s, the NEFF takes %s %s" % (name, got.shape, got.dtype, shape, dtype))
        device = _device_modules()
        saved = {k: sys.modules.get(k) for k in device}
        sys.modules.update(device)
        try:
            scope = {"__name__": "neff"}
            exec(compile(self.neff["source"], "kernel.neff", "exec"), scope)
            arrays = {k: v.array.astype(np.float32) if v.array.dtype.kind in "fV" or
                      self.neff["inputs"][k][1] == "bfloat16" else v.array for k, v in inputs.items()}
            for k, v in inputs.items():       # bf16 bit patterns (uint16) back to values
                if self.neff["inputs"][k][1] == "bfloat16" and v.array.dtype == np.uint16:
                    arrays[k] = (v.array.astype(np.uint32) << 16).view(np.float32)
            constants = {k: _tuples(v) for k, v in self.neff["constants"].items()}   # baked in as the kernel saw them
            out = scope[self.neff["entry"]](**arrays, **constants)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return {"output_%d" % i: NrtpyTensor(np.asarray(o, np.float32)) for i, o in enumerate(outs)}

    def __call__(self, inputs, outputs=None, save_trace=False, ntff_name=None):
        result = self._execute(inputs)
        if save_trace:
            with open(ntff_name or self.name + ".ntff", "w") as fh:
                fh.write("trace of %s on NeuronCore %s" % (self.name, os.environ.get("NEURON_RT_VISIBLE_CORES")))
        return result

    def benchmark(self, inputs, outputs=None, warmup_iter=5, benchmark_iter=5, mode="device"):
        if mode not in ("device", "host") or benchmark_iter < 1:
            raise ValueError("mode must be 'device' or 'host' and benchmark_iter >= 1")
        record_chip_lock()
        for _ in range(warmup_iter + benchmark_iter):
            self._execute(inputs)
        durations = [0.010 + 0.0001 * i for i in range(benchmark_iter)]      # 10.0, 10.1, ... us
        mean = sum(durations) / len(durations)
        return BenchmarkResult(mean, min(durations), max(durations), float(np.std(durations)), benchmark_iter,
                               warmup_iter, durations)
