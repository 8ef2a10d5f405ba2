"""Stand-in neuronxcc.nki of Neuron SDK 2.29 (NKI v1): kernels run with numpy; the API is held to AWS's docs
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.26.1/nki/api/generated/nki.benchmark.html, nki.baremetal.html)."""
import os

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
        return kernel(*args, **kwargs)
    return run


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
