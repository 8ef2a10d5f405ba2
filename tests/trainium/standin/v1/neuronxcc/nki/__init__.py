"""Stand-in neuronxcc.nki of Neuron SDK 2.29 (NKI v1): kernels run with numpy; the API is held to AWS's docs
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/nki/api/generated/nki.benchmark.html, nki.baremetal.html).
nki.baremetal(save_neff_name=PATH) keeps the NEFF (JSON here, as the v2 stand-in writes it: the kernel's source,
constant arguments, array parameters with their dtypes, platform and LNC)."""
import inspect
import json
import os

import numpy as np

from standin_chiplock import record_chip_lock

COMPILE_LOG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "compiles.log")
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)       # "Available percentiles" of get_latency_percentile
BENCHMARK_ARGS = {"warmup", "iters", "save_neff_name", "save_trace_name", "additional_compile_opt"}
BAREMETAL_ARGS = {"save_neff_name", "save_trace_name", "additional_compile_opt", "artifacts_dir"}


def _compile(kind):
    with open(COMPILE_LOG, "a") as fh:
        fh.write("%s nki1\n" % kind)


def jit(fn=None, **kw):
    return fn if fn is not None else (lambda f: f)


def _check(kw, allowed, what):
    unknown = set(kw) - allowed
    if unknown:
        raise TypeError("%s() got unexpected keyword arguments %s" % (what, sorted(unknown)))


def baremetal(kernel=None, **kw):
    _check(kw, BAREMETAL_ARGS, "baremetal")
    if kernel is None:
        return lambda k: baremetal(k, **kw)

    def run(*args, **kwargs):
        _compile("baremetal")
        out = kernel(*args, **kwargs)
        if not all(isinstance(o, np.ndarray) for o in (out if isinstance(out, (tuple, list)) else (out,))):
            raise TypeError("an NKI kernel returns the HBM tensors it wrote, not %s" % type(out).__name__)
        if kw.get("save_neff_name"):
            _save_neff(kernel, args, kwargs, kw["save_neff_name"])
        return out
    return run


def _save_neff(kernel, args, kwargs, path):
    with open(inspect.getsourcefile(kernel)) as fh:
        source = fh.read()
    bound = inspect.signature(kernel).bind(*args, **kwargs)
    bound.apply_defaults()
    arrays = {k: v for k, v in bound.arguments.items() if isinstance(v, np.ndarray)}
    neff = {"source": source, "entry": kernel.__name__, "lnc": int(os.environ.get("NEURON_LOGICAL_NC_CONFIG") or 1),
            "constants": {k: v for k, v in bound.arguments.items() if k not in arrays},
            "inputs": {k: [list(v.shape), getattr(v, "standin_dtype", str(v.dtype))] for k, v in arrays.items()},
            "platform": os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")}
    with open(path, "w") as fh:
        json.dump(neff, fh)


class _Latency:
    def get_latency_percentile(self, p):
        if p not in PERCENTILES:
            raise ValueError("percentile %r is not one of %s" % (p, PERCENTILES))
        return 10.0 + p / 10


class _Result:
    nc_latency = _Latency()


class _Bench:
    def __init__(self, kernel, kw):
        self.kernel, self.kw = kernel, kw

    def __call__(self, *args, **kwargs):
        _compile("benchmark")
        # AWS: save_trace_name "requires that the save_neff_name is unspecified or specified as 'file.neff'"
        if self.kw.get("save_trace_name") and self.kw.get("save_neff_name") not in (None, "file.neff"):
            raise ValueError("save_trace_name requires save_neff_name unspecified or 'file.neff'")
        for key, default in (("save_neff_name", "file.neff"), ("save_trace_name", None)):
            if self.kw.get(key, default):
                with open(self.kw.get(key, default), "w") as fh:
                    fh.write(os.environ["NEURON_RT_VISIBLE_CORES"])
        record_chip_lock()
        out = self.kernel(*args, **kwargs)
        self.benchmark_result = _Result()
        return out


def benchmark(kernel=None, **kw):
    _check(kw, BENCHMARK_ARGS, "benchmark")
    return _Bench(kernel, kw) if kernel is not None else (lambda k: _Bench(k, kw))
