"""The cuda target's judge, end to end in its CPU functional-check mode (device=cpu: the same children, sandbox,
seeds, checks and protocol as on a GPU, with PyTorch on the CPU and Triton's interpreter; no GPU times): kernels that
do the work pass, every output is compared (shape, dtype, values; scalars and integers too; outputs of any size in
sealed pieces, nothing written to disk), and the hidden input sets go beyond get_inputs' distribution where the
problem allows it. The ways of fooling the judge are in test_judge_attacks.py."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the cuda target's judge runs PyTorch (pip install -e '.[cuda]')")
pytest.importorskip("triton", reason="the cuda target's judge runs Triton (pip install -e '.[cuda]')")

from autocomp_zmq.hw_runners import get_target  # noqa: E402
from tests.cuda.cpu_problems import write_problems  # noqa: E402

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]

HEAD = "import torch\nimport torch.nn as nn\n\n\n"
FORWARD = """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, {args}):
{body}
"""


def kernel(body: str, init: str = "", prelude: str = "", args: str = "x") -> str:
    """A ModelNew whose forward(args) runs `body`."""
    indent = lambda text: "\n".join("        " + line for line in text.strip().splitlines())  # noqa: E731
    return HEAD + prelude + FORWARD.format(body=indent(body), init=indent(init) + "\n", args=args)


def softmax(body: str, init: str = "", prelude: str = "") -> str:
    return kernel(body, init, prelude)


@pytest.fixture(scope="module")
def problems_root():
    root = Path(tempfile.mkdtemp(prefix="cuda-cpu-problems-"))
    write_problems(root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def cpu_target(root: Path, **options):
    return get_target("cuda", device="cpu", problems_dir=root, warmup=1, iters=5,
                      limits={"drop_root": False}, **options)    # the test venv's Python is private to root


@pytest.fixture(scope="module")
def cuda_cpu(problems_root):
    return cpu_target(problems_root)


def judge(target, code: str, problem: str = "softmax-small"):
    return target.evaluate(target.problem(problem), code)


def test_a_triton_kernel_is_judged_correct_with_feedback(cuda_cpu):
    r = judge(cuda_cpu, cuda_cpu.problem("softmax-small").kernel_source("tuned"))
    assert r.correct, r.error
    m = r.feedback
    assert r.latency == m["median_us"] > 0 and m["runs"] == 5 and m["device"] == "cpu"
    assert m["sets"] == 4 and m["max_abs_err"] < 1e-5 and m["reference_us"] > 0
    assert set(m["clock_checks"]) == {"gen", "flush", "handover", "outside"}
    assert "CPU: not GPU times" in r.feedback_text and "drawn fresh for this evaluation" in r.feedback_text
    assert "every timed run's outputs" in r.feedback_text
    assert {"pid isolated", "fs private", "net isolated"} <= set(r.sandbox)


def test_weights_are_built_the_way_the_reference_builds_them(cuda_cpu):
    good = HEAD + """class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.clamp_min(x @ self.linear.weight.t() + self.linear.bias, 0.0)
"""
    assert judge(cuda_cpu, good, "linear-relu-small").correct
    other_order = good.replace("self.linear = nn.Linear(in_features, out_features)",
                               "self.scratch = nn.Linear(8, 8)\n        self.linear = nn.Linear(in_features, out_features)")
    r = judge(cuda_cpu, other_order, "linear-relu-small")
    assert (r.correct, r.error_kind) == (False, "wrong_result") and "public0" in r.error


def test_the_problems_small_sizes_are_what_the_cpu_check_runs(cuda_cpu):
    """The built-in softmax ships at 4096 x 8192 with small = {B = 64, D = 512}: the CPU check runs at those."""
    r = judge(cuda_cpu, softmax("return torch.softmax(x, 1)"), "softmax-shrunk")
    assert r.correct, r.error
    assert r.feedback["io_bytes"]["inputs"] == 64 * 512 * 4


def test_a_scalar_output_is_compared(cuda_cpu):
    right = kernel("return ((a - b) * (a - b)).mean()", args="a, b")
    r = judge(cuda_cpu, right, "mse-loss")
    assert r.correct, r.error
    wrong = kernel("return ((a - b) * (a - b)).mean() * 1.01", args="a, b")
    r = judge(cuda_cpu, wrong, "mse-loss")
    assert (r.correct, r.error_kind) == (False, "wrong_result") and "1 of 1 elements of output 0" in r.error, r.error


@pytest.mark.parametrize("body, words", [
    ("return torch.softmax(x.double(), 1)", "output 0 is float64; the reference returns float32"),
    ("return torch.softmax(x, 1).half()", "output 0 is float16; the reference returns float32"),
    ("return torch.softmax(x, 1).reshape(-1)", "output 0 has shape [32768], expected [64, 512]"),
    ("return torch.softmax(x, 1), x.clone()", "forward returned 2 tensors; the reference returns 1"),
    ("y = torch.softmax(x, 1)\ny[3, 5] = float('nan')\nreturn y",
     "output 0 has 1 NaN/Inf elements where the reference is finite (first at [3, 5])"),
])
def test_dtype_shape_and_count_are_compared(cuda_cpu, body, words):
    r = judge(cuda_cpu, softmax(body))
    assert (r.correct, r.error_kind) == (False, "wrong_result"), r.error
    assert words in r.error and "public0" in r.error, r.error


def test_an_integer_output_must_be_exact_and_of_the_same_dtype(cuda_cpu):
    assert judge(cuda_cpu, kernel("return torch.max(x, dim=1).indices"), "argmax-rows").correct
    r = judge(cuda_cpu, kernel("return torch.argmax(x, dim=1).int()"), "argmax-rows")
    assert not r.correct and "output 0 is int32; the reference returns int64" in r.error, r.error
    r = judge(cuda_cpu, kernel("return torch.argmin(x, dim=1)"), "argmax-rows")
    assert not r.correct and "elements of output 0 are outside the tolerance" in r.error, r.error


def test_signed_hidden_inputs_tell_relu_from_identity(cuda_cpu):
    """get_inputs draws torch.rand (non-negative): identity passes every set drawn from it; the hidden set whose
    torch.rand draws are signed does not."""
    r = judge(cuda_cpu, kernel("return x.clone()"), "relu-rand")
    assert (r.correct, r.error_kind) == (False, "wrong_result"), r.error
    assert "hidden-signed" in r.error and "signed inputs" in r.error, r.error
    r = judge(cuda_cpu, kernel("return x.clamp_min(0.0)"), "relu-rand")
    assert r.correct, r.error
    assert "hidden-signed" in r.feedback["set_names"] and "torch.rand's draws in [-1, 1)" in r.feedback_text


def test_a_problem_the_signed_variant_does_not_apply_to_says_so(cuda_cpu):
    r = judge(cuda_cpu, softmax("return torch.softmax(x, 1)"))
    assert r.correct and "hidden-signed" in r.feedback["dropped_sets"], r.feedback
    assert "input set hidden-signed not used: get_inputs draws nothing the signed variant changes" in r.feedback_text


def test_outputs_in_many_sealed_pieces_are_compared_in_full_and_nothing_is_written_to_disk(problems_root):
    target = cpu_target(problems_root, chunk_bytes=4096)
    r = judge(target, softmax("return torch.softmax(x, 1)"))
    assert r.correct, r.error
    last = softmax("y = torch.softmax(x, 1)\ny[-1, -1] += 1.0\nreturn y")     # wrong in the last piece only
    r = judge(target, last)
    assert not r.correct and "1 of 32,768 elements of output 0" in r.error and "[63, 511]" in r.error, r.error


def test_no_output_reaches_the_disk(problems_root, tmp_path):
    target = cpu_target(problems_root, keep_workdir=True, work_root=tmp_path)
    assert judge(target, softmax("return torch.softmax(x, 1)")).correct
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size > 64 * 1024]
    assert not written, written       # 64 x 512 float32 outputs are 128 KiB each: none was saved
