"""Ways of fooling a kernel judge, each tried on the cuda target's judge in its CPU functional-check mode (the same
children, sandbox, protocol and checks as on a GPU), each turned down: by construction where it can be (outputs
compared in another process, inputs the judge makes with its own copy of the problem's code, outputs that cannot
change once handed over), and by the evaluator's own clock for time moved out of the timed kernel."""
from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the cuda target's judge runs PyTorch (pip install -e '.[cuda]')")
pytest.importorskip("triton", reason="the cuda target's judge runs Triton (pip install -e '.[cuda]')")

from tests.cuda.test_judge_cpu import cpu_target, judge, kernel, problems_root, softmax  # noqa: E402,F401

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cuda_cpu(problems_root):  # noqa: F811
    return cpu_target(problems_root)


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
        prelude="import glob\nFOUND = glob.glob('/tmp/**/reference/*.npy', recursive=True) + "
                "glob.glob('../reference/*')\n"), "wrong_result", "input set public0"),
    ("replaces a judge function", softmax("return torch.softmax(x, 1)",
                                          prelude="import time\ntime.perf_counter = lambda: 0.0\n"),
     "policy", "replaced functions the judge relies on: time.perf_counter"),
    ("leaves a thread running", softmax("return torch.softmax(x, 1)",
                                        prelude="import threading, time\nthreading.Thread(target=time.sleep, "
                                                "args=(600,), name='helper', daemon=True).start()\n"),
     "policy", "left threads running (helper)"),
    ("leaves a process running", softmax("return torch.softmax(x, 1)",
                                         prelude="import subprocess\nHELPER = subprocess.Popen(['sleep', '600'])\n"),
     "policy", "left 1 process(es) running"),
])
def test_ways_of_fooling_the_judge_are_turned_down(cuda_cpu, name, code, kind, words):
    r = judge(cuda_cpu, code)
    assert (r.correct, r.error_kind) == (False, kind), (name, r.error)
    assert words in r.error, (name, r.error)


# The red team's attack: replace the reference module's get_inputs (which the judge used to call to make each timed
# run's inputs, outside the timed events), compute the softmax there and return the kept result from forward. The
# judge now makes inputs with its own copy of the problem's code, loaded before kernel.py: nothing is kept.
GET_INPUTS_ATTACK = softmax("return KEPT.pop().clone() if KEPT else torch.zeros_like(x)", prelude='''import sys
ref = sys.modules["reference"]
_made = ref.get_inputs
KEPT = []


def get_inputs():
    xs = _made()
    KEPT.append(torch.softmax(xs[0], 1))
    return xs


ref.get_inputs = get_inputs
''')


def test_work_done_in_the_reference_modules_get_inputs_never_happens(cuda_cpu):
    r = judge(cuda_cpu, GET_INPUTS_ATTACK)
    assert (r.correct, r.error_kind) == (False, "wrong_result"), r.error


# Deeper: replace torch.randn itself (which the problem's get_inputs calls, in whatever copy) and do forward's work
# there, as each run's inputs are made. The work then happens in the judge's input step, which the reference's same
# step on the same inputs, just before, shows to cost far less.
RANDN_ATTACK = '''import torch
import torch.nn as nn

MODELS, KEPT = [], []
_randn = torch.randn


def randn(*args, **kwargs):
    x = _randn(*args, **kwargs)
    if MODELS and x.dim() == 2:
        m = MODELS[0]
        KEPT.append(torch.relu(x @ m.linear.weight.t() + m.linear.bias))
    return x


torch.randn = randn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        MODELS.append(self)

    def forward(self, x):
        if KEPT:
            return KEPT.pop().clone()
        return torch.relu(x @ self.linear.weight.t() + self.linear.bias)
'''


def test_work_moved_into_making_the_inputs_is_caught_by_the_clock(cuda_cpu):
    honest = RANDN_ATTACK.replace("torch.randn = randn", "")
    r = judge(cuda_cpu, honest, "linear-relu-heavy")
    assert r.correct, r.error
    r = judge(cuda_cpu, RANDN_ATTACK, "linear-relu-heavy")
    assert (r.correct, r.error_kind) == (False, "policy"), r.error
    assert "making each run's inputs took" in r.error and "more than the reference's" in r.error, r.error
    # a machine's load can slow every run now and then; hidden work slows them every time: a second set of runs,
    # on fresh inputs, doubted it too
    assert "in a second set of timed runs too" in r.error, r.error


# A forger speaks the judge's protocol itself from kernel.py's import: it hands over correct outputs (computed with the
# reference, slowly) and reports runs of a microsecond.
FORGER = softmax("return torch.softmax(x, 1)", prelude='''import json, sys, time
import judge_common as h
ref = sys.modules["reference"]
for name, s in h.JOB["sets"].items():
    torch.manual_seed(s["seed"])
    (x,) = ref.get_inputs()
    meta, fds = h.hand_over([torch.softmax(x, 1)])
    h.tell({"set": name, "outputs": meta}, fds)
    h.hear()
h.tell({"ready": True, "timed_as": "graph", "graph_error": None})
while True:
    message, _ = h.hear()
    if "run" not in message:
        break
    torch.manual_seed(message["seed"])
    (x,) = ref.get_inputs()
    time.sleep(0.05)
    meta, fds = h.hand_over([torch.softmax(x, 1)]) if message["keep"] else (None, [])
    h.tell({"done": message["run"], "regions": {"gen": 0.001, "flush": 0.0, "bracket": 0.001, "handover": 0.001},
            "outputs": meta}, fds)
h.tell({"finished": True, "seconds": {}})
h._exit(0)
''')


def test_forged_run_times_disagree_with_the_judges_clock(cuda_cpu):
    r = judge(cuda_cpu, FORGER)
    assert (r.correct, r.error_kind) == (False, "policy"), r.error
    assert "each run's window outside the timed kernel took" in r.error and "second set" in r.error, r.error


@pytest.mark.parametrize("change, words", [
    # a run answered without its outputs
    ('h.hand_over([torch.softmax(x, 1)]) if message["keep"] else (None, [])', "a report the protocol does not allow"),
    # outputs handed over as an ordinary file, which the forger could still change
    ('h.hand_over([torch.softmax(x, 1)]) if message["keep"] else (None, [])',
     "descriptors that are not sealed memory"),
    # more time reported than the judge's clock saw
    ('"bracket": 0.001', "but the judge's clock saw"),
])
def test_a_forger_that_breaks_the_protocol_is_stopped(cuda_cpu, change, words):
    replacement = {"a report the protocol does not allow": "(h.describe([torch.softmax(x, 1)]), [])",
                   "descriptors that are not sealed memory":
                       "(h.describe([x]), [__import__('os').open('kernel.py', __import__('os').O_RDONLY)])",
                   "but the judge's clock saw": '"bracket": 1000.0'}[words]
    code = FORGER.replace(change, replacement).replace("time.sleep(0.05)", "")
    r = judge(cuda_cpu, code)
    assert (r.correct, r.error_kind) == (False, "policy"), r.error
    assert words in r.error, r.error
