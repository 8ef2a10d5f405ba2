"""Problem files for trainium-sim with the inputs Autocomp's newer harnesses pass: a bool mask (nl.bool_, a
byte per element; harnesses/trn-e2e/5_llama_attention_nki.py draws `randint(0, 2).astype(np.bool_)`) drawn with a
probability or made as a fixed pattern, and a tuple-valued non-tensor argument; each judged end to end."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq.hw_runners.problemfile import DefinitionError, read
from autocomp_zmq.hw_runners.trainium_sim.target import TrainiumSim

V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"

# out = x where mask else 0, written with the mask as the kernel sees it (a uint8 tile of 0s and 1s)
MASKED = V2 + """
@nki.jit
def solution(x, mask):
    P, F = x.shape
    assert mask.dtype == nl.bool_
    out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    xt = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    mt = nl.ndarray((P, F), dtype=nl.bool_, buffer=nl.sbuf)
    nisa.dma_copy(dst=xt, src=x)
    nisa.dma_copy(dst=mt, src=mask)
    mf = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=mf, src=mt)
    res = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=res, data1=xt, data2=mf, op=nl.OP)
    nisa.dma_copy(dst=out, src=res)
    return out
"""
# the reference sees numpy bools: `~mask` is the logical negation (on bytes it would be 254 / 255)
MASKED_REF = "import numpy as np\n\ndef reference(x, mask):\n    return np.where(~mask, 0.0, x)\n"

BASE = {"name": "masked", "target": "trainium-sim", "description": "x where mask", "signature": "solution(x, mask)",
        "kernel": "k.py", "reference": "ref.py",
        "inputs": [{"name": "x", "shape": [128, 256], "dtype": "float32", "range": [-2.0, 2.0]},
                   {"name": "mask", "shape": [128, 256], "dtype": "bool", "probability": 0.3}],
        "outputs": [{"name": "out", "shape": [128, 256], "dtype": "float32"}]}


def _toml(meta: dict) -> str:
    value = lambda v: "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}" if isinstance(v, dict) \
        else "[" + ", ".join(value(x) for x in v) + "]" if isinstance(v, list) else json.dumps(v)  # noqa: E731
    lines = [f"{k} = {value(v)}" for k, v in meta.items() if k not in ("inputs", "outputs")]
    for k in ("inputs", "outputs"):
        for item in meta[k]:
            lines += ["", f"[[{k}]]"] + [f"{a} = {value(b)}" for a, b in item.items()]
    return "\n".join(lines) + "\n"


def _load(tmp: Path, meta: dict, ref: str = MASKED_REF):
    (tmp / "my.toml").write_text(_toml(meta))
    (tmp / "ref.py").write_text(ref)
    (tmp / "k.py").write_text("# mine\n")
    return object.__new__(TrainiumSim).problem_from_definition(read(tmp / "my.toml"))


@pytest.fixture(scope="module")
def sim():
    return TrainiumSim()


def test_a_bool_input_is_drawn_with_its_probability_as_bytes(tmp_path):
    spec = _load(tmp_path, BASE).semantics
    assert [t.dtype for t in spec.inputs] == ["float32", "uint8"]
    m = spec.make_inputs(0)["mask"]
    assert m.dtype.kind == "i" and set(np.unique(m)) <= {0, 1}        # uint8 values (held as the sim's ints)
    assert 0.25 < m.mean() < 0.35
    x = spec.make_inputs(0)["x"]
    (got,) = spec.reference({"x": x, "mask": m})
    assert np.array_equal(got, np.where(m == 1, x, 0.0))


@pytest.mark.system
def test_a_kernel_on_a_bool_mask_is_judged(tmp_path, sim):
    p = _load(tmp_path, BASE)
    r = sim.evaluate(p, MASKED.replace("OP", "multiply"))
    assert r.correct, (r.error, r.stderr)
    r = sim.evaluate(p, MASKED.replace("OP", "add"))
    assert not r.correct and r.error_kind == "wrong_result", r.error


@pytest.mark.system
def test_a_fixed_bool_pattern_from_make_inputs(tmp_path, sim):
    # a causal mask, as the reference's make_inputs builds it (a fixed pattern rather than a probability)
    meta = json.loads(json.dumps(BASE))
    del meta["inputs"][1]["probability"]
    ref = MASKED_REF + ("\ndef make_inputs(rng, shapes):\n    return {'x': rng.standard_normal(shapes['x']),\n"
                        "            'mask': np.tril(np.ones(shapes['mask'], dtype=bool))}\n")
    p = _load(tmp_path, meta, ref)
    m = p.semantics.make_inputs(1)["mask"]
    assert np.array_equal(m, np.tril(np.ones((128, 256), dtype=int)))
    r = sim.evaluate(p, MASKED.replace("OP", "multiply"))
    assert r.correct, (r.error, r.stderr)


@pytest.mark.parametrize("change, message", [
    ({"probability": 1.5}, "inputs[1].probability: must be a fraction in [0, 1], not 1.5"),
    ({"range": [0, 1]}, "inputs[1].range: a bool input is drawn by its probability"),
    ({"sparsity": 0.5}, "inputs[1].sparsity: a bool input is drawn by its probability"),
])
def test_bool_input_mistakes_name_the_field(tmp_path, change, message):
    meta = json.loads(json.dumps(BASE))
    meta["inputs"][1].update(change)
    with pytest.raises(DefinitionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _load(tmp_path, meta)


def test_a_probability_on_a_non_bool_input_is_refused(tmp_path):
    meta = json.loads(json.dumps(BASE))
    meta["inputs"][0]["probability"] = 0.5
    with pytest.raises(DefinitionError, match=r"inputs\[0\].probability: only a bool input has a probability"):
        _load(tmp_path, meta)


TUPLED = V2 + """
@nki.jit
def solution(x, tile):
    assert isinstance(tile, tuple), type(tile)
    TP, TF = tile
    P, F = x.shape
    out = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(P // TP):
        for j in range(F // TF):
            t = nl.ndarray((TP, TF), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * TP:(i + 1) * TP, j * TF:(j + 1) * TF])
            nisa.activation(dst=t, op=nl.exp, data=t)
            nisa.dma_copy(dst=out[i * TP:(i + 1) * TP, j * TF:(j + 1) * TF], src=t)
    return out
"""


@pytest.mark.system
def test_a_tuple_argument_reaches_kernel_and_reference_as_a_tuple(tmp_path, sim):
    meta = {**BASE, "signature": "solution(x, tile)", "call": ["x", [64, 128]], "inputs": BASE["inputs"][:1]}
    ref = ("import numpy as np\n\ndef reference(x, tile):\n    assert tile == (64, 128), tile\n"
           "    return np.exp(x)\n")
    p = _load(tmp_path, meta, ref)
    assert p.semantics.call == ("x", (64, 128))
    r = sim.evaluate(p, TUPLED)
    assert r.correct, (r.error, r.stderr)
    assert r.feedback["instructions"]["Scalar"] == 4, r.feedback
