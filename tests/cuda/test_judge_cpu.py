"""The cuda target's judge, end to end in its CPU functional-check mode (device=cpu: the same children, sandbox,
seeds, checks and protocol as on a GPU, with PyTorch on the CPU and Triton's interpreter; no GPU times): kernels that
do the work pass, and each known way of fooling a kernel judge is turned down, by construction where it can be."""
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
SOFTMAX = """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init}
    def forward(self, x):
{body}
"""


def softmax(body: str, init: str = "", prelude: str = "") -> str:
    return HEAD + prelude + SOFTMAX.format(body="\n".join("        " + l for l in body.strip().splitlines()),
                                    init="\n".join("        " + l for l in init.strip().splitlines()) + "\n")


@pytest.fixture(scope="module")
def cuda_cpu():
    root = Path(tempfile.mkdtemp(prefix="cuda-cpu-problems-"))
    write_problems(root)
    target = get_target("cuda", device="cpu", problems_dir=root, warmup=1, iters=5,
                        limits={"drop_root": False})       # the test venv's Python is private to root
    yield target
    shutil.rmtree(root, ignore_errors=True)


def judge(target, code: str, problem: str = "softmax-small"):
    return target.evaluate(target.problem(problem), code)


def test_a_triton_kernel_is_judged_correct_with_feedback(cuda_cpu):
    r = judge(cuda_cpu, cuda_cpu.problem("softmax-small").kernel_source("tuned"))
    assert r.correct, r.error
    m = r.feedback
    assert r.latency == m["median_us"] > 0 and m["runs"] == 5 and m["device"] == "cpu"
    assert m["sets"] == 4 and m["max_abs_err"] < 1e-5 and m["reference_us"] > 0
    assert "CPU: not GPU times" in r.feedback_text and "drawn fresh for this evaluation" in r.feedback_text
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


@pytest.mark.parametrize("name, code, kind, words", [
    ("returns its input", softmax("return x"), "wrong_result", "shares memory with input 0"),
    ("returns a view of its input", softmax("torch.softmax(x, 1)\nreturn x[:, :]"), "wrong_result",
     "shares memory with input 0"),
    ("works in place on its input", softmax("x.sub_(x.amax(1, keepdim=True))\ne = x.exp()\nreturn e / e.sum(1, keepdim=True)"),
     "wrong_result", "changed its input 0 in place"),
    ("hands back one buffer every call", softmax("if self.buf is None:\n    self.buf = torch.empty_like(x)\n"
                                                 "self.buf.copy_(torch.softmax(x, 1))\nreturn self.buf",
                                                 init="self.buf = None"), "wrong_result", "handed back output 0's buffer"),
    ("caches its first output", softmax("if self.cache is None:\n    self.cache = torch.softmax(x, 1)\n"
                                        "return self.cache.clone()", init="self.cache = None"),
     "wrong_result", "input set public1"),
    ("memorizes the public inputs", softmax(
        "for probe, out in MEMO:\n    if torch.equal(x, probe):\n        return out.clone()\nreturn torch.zeros_like(x)",
        prelude="import sys\nref = sys.modules['reference']\nMEMO = []\nfor s in (1, 2):\n    torch.manual_seed(s)\n"
                "    (x0,) = ref.get_inputs()\n    MEMO.append((x0, torch.softmax(x0, 1)))\n"), "wrong_result",
     "input set hidden0 (drawn fresh)"),
    ("looks for the reference's outputs", softmax(
        "if FOUND:\n    import numpy\n    return torch.from_numpy(numpy.load(FOUND[0]))\nreturn torch.zeros_like(x)",
        prelude="import glob\nFOUND = glob.glob('/tmp/**/reference/public0_0.npy', recursive=True) + "
                "glob.glob('../reference/*.npy')\n"), "wrong_result", "input set public0"),
    ("replaces a judge function", softmax("return torch.softmax(x, 1)",
                                          prelude="import time\ntime.perf_counter = lambda: 0.0\n"),
     "policy", "replaced functions the judge relies on: time.perf_counter"),
    ("leaves a thread running", softmax("return torch.softmax(x, 1)",
                                        prelude="import threading, time\nthreading.Thread(target=time.sleep, "
                                                "args=(600,), name='helper', daemon=True).start()\n"),
     "policy", "left threads running (helper)"),
])
def test_ways_of_fooling_the_judge_are_turned_down(cuda_cpu, name, code, kind, words):
    r = judge(cuda_cpu, code)
    assert (r.correct, r.error_kind) == (False, kind), (name, r.error)
    assert words in r.error, (name, r.error)


FORGER = softmax("return torch.softmax(x, 1)", prelude='''import json, os, sys, time
import numpy as np
# speaks the judge's protocol itself: waits for the seed, computes the timed runs' outputs slowly with the reference,
# saves them, and reports runs of one nanosecond
job = json.load(open("job.json"))
ref = sys.modules["reference"]
os.write(3, b'{"ready": true}\\n')
seed = json.loads(os.read(4, 4096))["seed"]
model = ref.Model()
for k in range(job["warmup"] + job["iters"]):
    torch.manual_seed(seed + k)
    (x,) = ref.get_inputs()
    time.sleep(0.4)
    if k >= job["warmup"]:
        np.save("timed%d_0.npy" % (k - job["warmup"]), torch.softmax(x, 1).numpy())
result = {"ok": True, "stage": "done", "times_ms": [1e-6] * (job["warmup"] + job["iters"]), "outputs": {}}
for name, s in job["sets"].items():
    torch.manual_seed(s)
    (x,) = ref.get_inputs()
    np.save(name + "_0.npy", torch.softmax(x, 1).numpy())
    result["outputs"][name] = [{"shape": [64, 512], "dtype": "float32"}]
result["outputs"]["timed"] = [{"shape": [64, 512], "dtype": "float32"}]
json.dump(result, open("result.json", "w"))
os.write(3, b'{"done": true}\\n')
time.sleep(60)
''')


def test_forged_run_times_disagree_with_the_judges_clock(cuda_cpu):
    r = judge(cuda_cpu, FORGER)
    assert (r.correct, r.error_kind) == (False, "policy"), r.error
    assert "the judge's clock saw" in r.error and "are not the device's" in r.error


def test_a_forged_done_before_the_outputs_exist_counts_nothing_after_it(cuda_cpu):
    early = FORGER.replace("os.write(3, b'{\"ready\": true}\\\\n')", "os.write(3, b'{\"ready\": true}\\\\n')\n"
                           "os.read(4, 4096)\nos.write(3, b'{\"done\": true}\\\\n')\ntime.sleep(60)")
    r = judge(cuda_cpu, early)
    assert not r.correct and r.error_kind in ("wrong_result", "crash", "policy"), r.error
