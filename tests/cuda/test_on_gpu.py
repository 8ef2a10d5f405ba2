"""The cuda target on a real GPU: every problem's naive and hand-tuned kernels correct and the tuned one faster,
ways of fooling a GPU judge turned down (side streams and work moved out of the timed kernel included), a kernel
launched on the legacy default stream timed eagerly, and an offline search that finds a speedup.
Skipped where no NVIDIA GPU is present, with the reason; bench/bench_cuda.py prints the same measurements as a
table."""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.hw_runners.cuda.gpu import host_gpus

pytestmark = [pytest.mark.system, pytest.mark.timeout(1800),
              pytest.mark.skipif(not host_gpus(), reason="no NVIDIA GPU on this host (nvidia-smi lists none): "
                                                         "GPU-only test")]
torch = pytest.importorskip("torch", reason="the cuda target needs PyTorch with CUDA (pip install -e '.[cuda]')")

from autocomp_zmq.hw_runners import get_target  # noqa: E402
from tests.cuda.test_judge_attacks import FORGER, GET_INPUTS_ATTACK  # noqa: E402
from tests.cuda.test_judge_cpu import softmax  # noqa: E402
from tests.system.runkit import finish, launch  # noqa: E402

PROBLEMS = [p.name for p in get_target("cuda").problems()]


@pytest.fixture(scope="module")
def gpu():
    return get_target("cuda", warmup=5, iters=20)


@pytest.mark.parametrize("name", PROBLEMS)
def test_naive_and_tuned_kernels_are_correct_and_tuned_is_faster(gpu, name):
    problem = gpu.problem(name)
    naive, tuned = (gpu.evaluate(problem, problem.kernel_source(r)) for r in ("naive", "tuned"))
    assert naive.correct, naive.error
    assert tuned.correct, tuned.error
    assert naive.feedback["timed_as"] == "CUDA-graph replays" and naive.feedback["peaks"]
    assert "ncu" in tuned.feedback or "ncu_error" in tuned.feedback
    assert tuned.latency < naive.latency, (tuned.latency, naive.latency)


SIDE_STREAM = softmax("""s = torch.cuda.Stream()
out = torch.empty_like(x)
with torch.cuda.stream(s):
    out.copy_(torch.softmax(x, 1))
return out""")


@pytest.mark.parametrize("code, words", [
    (softmax("return x"), "shares memory with input 0"),
    (softmax("if self.cache is None:\n    self.cache = torch.softmax(x, 1)\nreturn self.cache.clone()",
             init="self.cache = None"), "input set public1"),
    (softmax("return torch.softmax(x, 1)", prelude="import torch\ntorch.cuda.synchronize = lambda *a: None\n"),
     "replaced functions the judge relies on"),
    (FORGER, "each run's window outside the timed kernel took"),
    (GET_INPUTS_ATTACK, "wrong result"),
    # forward's work done on the device as torch.randn makes each run's inputs, outside the timed events
    (softmax("return KEPT.pop().clone() if KEPT else torch.softmax(x, 1)", prelude=(
        "KEPT = []\n_randn = torch.randn\n\n\ndef randn(*a, **k):\n    x = _randn(*a, **k)\n"
        "    KEPT.append(torch.softmax(x, 1))\n    return x\n\n\ntorch.randn = randn\n")),
     "making each run's inputs took"),
])
def test_ways_of_fooling_the_judge_are_turned_down_on_the_gpu(gpu, code, words):
    r = gpu.evaluate(gpu.problem("softmax"), code)
    assert not r.correct and words in r.error, r.error


def test_work_on_a_side_stream_is_captured_or_refused_never_missed(gpu):
    """A forward that computes on another stream without joining it: the graph capture refuses it (an unjoined
    stream), or, if captured, its work is inside the timed replay and its outputs are checked."""
    r = gpu.evaluate(gpu.problem("softmax"), SIDE_STREAM)
    if r.correct:
        reference = gpu.evaluate(gpu.problem("softmax"), softmax("return torch.softmax(x, 1)"))
        assert r.latency >= 0.8 * reference.latency
    else:
        assert "CUDA graph" in r.error or "wrong result" in r.error


def legacy_stream_softmax(gpu) -> str:
    """The built-in naive softmax launched as KernelBench's examples launch: <<<grid, block>>>, the legacy default
    stream, which a CUDA graph cannot capture."""
    naive = gpu.problem("softmax").kernel_source("naive")
    return naive.replace(", 0, c10::cuda::getCurrentCUDAStream()>>>", ">>>").replace('"softmax_naive"',
                                                                                      '"softmax_legacy"')


def test_a_kernel_on_the_legacy_default_stream_is_timed_eagerly(gpu):
    r = gpu.evaluate(gpu.problem("softmax"), legacy_stream_softmax(gpu))
    assert r.correct, r.error
    assert "eager runs" in r.feedback["timed_as"] and "device-wide synchronize" in r.feedback["timed_as"]
    graph = gpu.evaluate(gpu.problem("softmax"), gpu.problem("softmax").kernel_source("naive"))
    assert graph.correct and r.latency >= 0.9 * graph.latency      # the same kernel: eager timing adds, never hides


def test_an_offline_search_finds_a_speedup(tmp_path):
    out = finish(launch("run", "--target", "cuda", "--problem", "softmax", "--out", str(tmp_path / "run"), "-T", "3"))
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 1.0, out
