"""Row-wise problems a user brings in a problem file with no family (a row softmax, a scale + bias + ReLU): the
offline heuristic recognises them from what their reference computes, whatever the names, and its schedules
render kernels the simulator accepts as correct, ragged last row tiles included."""
from __future__ import annotations

from pathlib import Path

import pytest

from autocomp_zmq.agents.workers.heuristic import unsupported
from autocomp_zmq.agents.run.problemsource import wire
from autocomp_zmq.hw_runners.base import get_target, target_class
from autocomp_zmq.hw_runners.problemfile import read
from autocomp_zmq.hw_runners.trainium_sim.heuristic import rowwise
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import parse_schedule, render
from autocomp_zmq.hw_runners.trainium_sim.heuristic.rowwise_kind import recognise

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "problems" / "examples"
START = "import neuronxcc.nki as nki\n\n\n@nki.jit\ndef solution(*args):\n    return None\n"


def problem_file(tmp_path: Path, signature: str, inputs: dict[str, list], reference: str, out=("R", "C"),
                 dims=None) -> Path:
    """A user's problem file (and its reference and a placeholder kernel) written as the README says."""
    dims = dims or {"R": 200, "C": 300}
    tensors = "".join(f'\n[[inputs]]\nname = "{n}"\nshape = {s!r}\ndtype = "float32"\n'.replace("'", '"')
                      for n, s in inputs.items())
    (tmp_path / "ref.py").write_text("import numpy as np\n\n\n" + reference)
    (tmp_path / "k.py").write_text(START)
    toml = (f'name = "mine"\ntarget = "trainium-sim"\ndescription = "x"\nsignature = "{signature}"\n'
            f'dims = {{{", ".join(f"{k} = {v}" for k, v in dims.items())}}}\nkernel = "k.py"\nreference = "ref.py"\n'
            f'{tensors}\n[[outputs]]\nname = "out"\nshape = {list(out)!r}\ndtype = "float32"\n').replace("'", '"')
    (tmp_path / "p.toml").write_text(toml)
    return tmp_path / "p.toml"


def test_the_examples_are_recognised_from_their_references():
    sm = recognise(read(EXAMPLES / "trainium-sim-rowwise" / "my_softmax.toml"))
    assert (sm.kind, sm.params, sm.x, sm.rows, sm.cols) == ("softmax", "scores", "scores", 512, 1000)
    br = recognise(read(EXAMPLES / "trainium-sim-rowwise" / "my_bias_relu.toml"))
    assert (br.kind, br.params, br.x, br.scale, br.bias, br.act) == ("affine", "h, gamma, beta", "h", "gamma",
                                                                     "beta", "relu")


def test_roles_come_from_the_reference_not_from_names_or_order(tmp_path):
    # the bias comes first and the scale is called "b": only the reference says which is which
    path = problem_file(tmp_path, "solution(a, x, b)", {"a": ["C"], "x": ["R", "C"], "b": ["C"]},
                        "def reference(a, x, b):\n    return x * b + a\n")
    s = recognise(read(path))
    assert (s.kind, s.params, s.x, s.scale, s.bias, s.act) == ("affine", "a, x, b", "x", "b", "a", "copy")


@pytest.mark.parametrize("reference, out, reduce", [
    ("def reference(x):\n    return x.sum(axis=1)\n", ["R"], "sum"),
    ("def reference(x):\n    return np.max(x, axis=1, keepdims=True)\n", ["R", 1], "max"),
    ("def reference(x):\n    return x.mean(axis=-1)\n", ["R"], "mean"),
])
def test_row_reductions_are_recognised(tmp_path, reference, out, reduce):
    s = recognise(read(problem_file(tmp_path, "solution(x)", {"x": ["R", "C"]}, reference, out)))
    assert (s.kind, s.reduce, s.keepdims) == ("reduce", reduce, len(out) == 2)


@pytest.mark.parametrize("reference", [
    "def reference(x):\n    return np.tanh(x)\n",                                         # no form of ours
    "def reference(x):\n    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True))\n",  # a norm, not a softmax
    "def reference(x):\n    return np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)\n",     # over columns
])
def test_other_computations_are_not_recognised(tmp_path, reference):
    assert recognise(read(problem_file(tmp_path, "solution(x)", {"x": ["R", "C"]}, reference))) is None


def test_the_heuristic_takes_a_recognised_problem_and_refuses_others(tmp_path):
    t = object.__new__(target_class("trainium-sim"))   # without its constructor, which probes the compiler
    wired = wire(t.problem_from_definition(read(EXAMPLES / "trainium-sim-rowwise" / "my_softmax.toml")), "us", None)
    assert wired.family == "own:my-softmax" and unsupported(wired) is None
    path = problem_file(tmp_path, "solution(x)", {"x": ["R", "C"]}, "def reference(x):\n    return np.tanh(x)\n")
    other = wire(t.problem_from_definition(read(path)), "us", None)
    assert unsupported(other).startswith("the heuristic cannot optimize mine (family 'own:mine'")


SOFTMAX = ("def reference(x):\n    e = np.exp(x - x.max(axis=1, keepdims=True))\n"
           "    return e / e.sum(axis=1, keepdims=True)\n")
CASES = {   # signature, inputs, reference: 200 rows (a tile of 72 after the first 128), 300 columns
    "softmax": ("solution(x)", {"x": ["R", "C"]}, SOFTMAX),
    "scale-bias-relu": ("solution(x, s, b)", {"x": ["R", "C"], "s": ["C"], "b": ["C"]},
                        "def reference(x, s, b):\n    return np.maximum(x * s + b, 0)\n"),
    "bias-only": ("solution(b, x)", {"b": ["C"], "x": ["R", "C"]},
                  "def reference(b, x):\n    return x + b\n"),
    "row-mean": ("solution(x)", {"x": ["R", "C"]}, "def reference(x):\n    return x.mean(axis=1)\n", ("R",)),
    "row-max": ("solution(x)", {"x": ["R", "C"]},
                "def reference(x):\n    return x.max(axis=1, keepdims=True)\n", ("R", 1)),
}


@pytest.mark.system
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_schedule_one_move_away_renders_a_correct_kernel(tmp_path, case):
    signature, inputs, reference, *out = CASES[case]
    out = out[0] if out else ("R", "C")
    definition = read(problem_file(tmp_path, signature, inputs, reference, out, dims={"R": 256, "C": 1280}))
    t = get_target("trainium-sim")
    problem = t.problem_from_definition(definition)
    start = recognise(definition)
    schedules = [start] + [c for m in sorted(set(rowwise.ROWWISE.OPTIONS.values()))
                           for c in rowwise.candidates(m, start, {}) if rowwise.fits(c, {})]
    schedules.append(rowwise.RowSchedule(**{**vars(start), "rows": 200}))   # a ragged last tile of 72 rows
    for s in schedules:
        if s.rows == 200:
            problem = t.problem_from_definition(read(problem_file(tmp_path, signature, inputs, reference, out,
                                                                  dims={"R": 200, "C": 1280})))
        code = render(s, problem.dims)
        assert parse_schedule(code, "rowwise") == s
        r = t.evaluate(problem, code)
        assert r.correct, (s, r.error)
