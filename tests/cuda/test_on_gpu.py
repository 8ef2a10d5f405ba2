"""The cuda target on a real GPU: every problem's naive and hand-tuned kernels correct and the tuned one faster,
ways of fooling a GPU judge turned down (side streams included), and an offline search that finds a speedup.
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
from tests.cuda.test_judge_cpu import FORGER, softmax  # noqa: E402
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
    (FORGER, "the judge's clock saw"),
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


def test_an_offline_search_finds_a_speedup(tmp_path):
    out = finish(launch("run", "--target", "cuda", "--problem", "softmax", "--out", str(tmp_path / "run"), "-T", "3"))
    assert float(re.search(r"Speedup: ([0-9.]+)x", out).group(1)) > 1.0, out
