"""Hostile NKI v2 kernels (`import nki`): the v1 attacks of test_hostile.py, written against the v2 front end.
Each is refused or marked failed with a reason, and the same evaluator still judges a good kernel correctly:
the v2 front end records into the same untrusted stream, so escaping the sandbox or forging a result is no
easier through it."""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok
from tests.trainium_sim.test_hostile import REACH_OS, hostile

pytestmark = pytest.mark.system

MAX_INSTRUCTIONS = 5000
V2 = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\nimport nki._v2 as V\n"
GOOD = V2 + """
@nki.jit
def solution(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    e = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t)
    nisa.dma_copy(dst=out, src=e)
    return out
"""
BODY = """    nisa.dma_copy(dst=t, src=a)
    e = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=t)
    nisa.dma_copy(dst=out, src=e)
"""


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-hostile-v2"), max_instructions=MAX_INSTRUCTIONS)


@pytest.fixture(scope="module")
def prob(kit):
    return kit.problem({"a": ((128, 64), "float32")}, {"out": ((128, 64), "float32")},
                       "def reference(a):\n    return np.exp(a)\n")


class V2Kit:
    """The kit, evaluating v2 kernels as written (their imports are in the source) and test_hostile's good v1
    kernel (the evaluator survives an attack) with the v1 header."""

    def __init__(self, kit) -> None:
        self.kit = kit

    def evaluate(self, prob, code, **kw):
        return self.kit.evaluate(prob, code, header="import nki\n" not in code, **kw)


def attack(kit, prob, code: str, *needles: str, kinds=("compile",), time_limit_s: float | None = 30):
    return hostile(V2Kit(kit), prob, code, *needles, kinds=kinds, time_limit_s=time_limit_s)


def test_the_good_v2_kernel_is_correct(kit, prob):
    ok(kit.evaluate(prob, GOOD, header=False))


@pytest.mark.parametrize("stmt,use,name", [
    ("import os", "os.system('id')", "os.system"), ("import subprocess", "subprocess.run(['id'])", "subprocess.run"),
    ("import socket", "socket.socket()", "socket.socket"),
])
def test_forbidden_imports(kit, prob, stmt, use, name):
    attack(kit, prob, stmt + "\n" + use + "\n" + GOOD, f"{name} is not available in a kernel")


@pytest.mark.parametrize("read", ["open('/etc/passwd').read()", "np.fromfile('/etc/passwd', dtype=np.uint8)"])
def test_reading_files(kit, prob, read):
    attack(kit, prob, V2 + read + "\n" + GOOD.split(V2)[1], "Operation not permitted")


def test_fork_through_builtins_tricks(kit, prob):
    attack(kit, prob, REACH_OS + "OS['fork']()\n" + GOOD, "Operation not permitted")


def test_spinning_forever_times_out(kit, prob):
    attack(kit, prob, GOOD.replace("    return out", "    while True:\n        pass\n    return out"),
           "timed out", kinds=("timeout",), time_limit_s=3)


def test_noop_recorder(kit, prob):
    # the v2 front end notices that its instruction went missing; with only DMAs, the output is never written
    attack(kit, prob, V2 + "V.RECORDER.emit = lambda *args, **kw: None\n" + GOOD.split(V2)[1],
           "no instruction was recorded")
    only_dma = GOOD.replace("    nisa.activation(dst=e, op=nl.exp, data=t)\n", "").replace("src=e)", "src=t)")
    attack(kit, prob, V2 + "V.RECORDER.emit = lambda *args, **kw: None\n" + only_dma.split(V2)[1],
           "never written", kinds=("wrong_result",))


def test_clearing_the_recorded_instructions(kit, prob):
    attack(kit, prob, GOOD.replace("    return out", "    V.RECORDER.instrs.clear()\n    return out"),
           "never written", kinds=("wrong_result",))


def test_forged_copy_claiming_the_output(kit, prob):
    forged = "    V.RECORDER.instrs.append(['dma', 'dma', [out.view().encode()], [a.view().encode()], {}, 0])\n"
    attack(kit, prob, GOOD.replace(BODY, forged), "wrong result", kinds=("wrong_result",))


def test_forged_dst_redirect_onto_the_input(kit, prob):
    # the v2 front end rewrites an instruction's destination (nisa's dst=); a kernel rewriting it onto its input
    # writes an input tensor, which the trusted side never treats as the output
    code = GOOD.replace("    nisa.dma_copy(dst=out, src=e)\n",
                        "    V.RECORDER.instrs[-1][2][0] = a.view().encode()\n    nisa.dma_copy(dst=out, src=e)\n")
    r = kit.evaluate(prob, code, header=False)
    assert not r.correct, explain(r)
    ok(kit.evaluate(prob, GOOD, header=False))


@pytest.mark.parametrize("instr", [
    '"ew", "dma", [out.view()], [a.view()], {"fn": "exp"}',
    '"activation", "dma", [out.view()], [a.view(), 1.0, None], {"fn": "exp"}',
])
def test_compute_forged_onto_the_dma_engine(kit, prob, instr):
    attack(kit, prob, GOOD.replace(BODY, f"    V.RECORDER.emit({instr})\n"), kinds=("compile", "limit"))


def test_returning_the_input_as_output(kit, prob):
    attack(kit, prob, V2 + "@nki.jit\ndef solution(a):\n    return a\n", "must be a new HBM tensor")


def test_numpy_values_as_an_operand(kit, prob):
    code = GOOD.replace("data=t)", "data=np.ones((128, 64), dtype=np.float32))")
    attack(kit, prob, code, "must be a tensor or a tile", "ndarray")


def test_constant_output(kit, prob):
    code = GOOD.replace("nisa.activation(dst=e, op=nl.exp, data=t)", "nisa.memset(dst=e, value=1.0)")
    attack(kit, prob, code, "wrong result", kinds=("wrong_result",))


def test_raising_the_instruction_limit_in_the_sandbox(kit, prob):
    code = GOOD.replace("    return out", f"    for i in range({2 * MAX_INSTRUCTIONS}):\n"
                        "        nisa.memset(dst=e, value=0.0)\n    return out")
    code = code.replace("import nki._v2 as V\n", "import nki._v2 as V\nimport neuronxcc\n")
    # reaching v1's module to lift its limit is a dialect mix, refused before anything runs
    attack(kit, prob, code, "imports both", kinds=("compile",))
    # reached through the recorder's own globals instead: the trusted side counts the stream again
    lifted = GOOD.replace("    return out", f"    V.RECORDER.emit.__globals__['MAX_INSTRUCTIONS'] = 10 ** 9\n    for i in range({2 * MAX_INSTRUCTIONS}):\n"
                          "        nisa.memset(dst=e, value=0.0)\n    return out")
    attack(kit, prob, lifted, "instructions", kinds=("compile", "limit"))


def test_a_platform_the_kernel_sets_is_ignored(kit, prob):
    # the tutorials set NEURON_PLATFORM_TARGET_OVERRIDE through os.environ: a no-op here (the evaluator's
    # `platform` option decides), and the kernel still runs
    code = "import os\nos.environ['NEURON_PLATFORM_TARGET_OVERRIDE'] = 'trn3'\n" + GOOD
    r = kit.evaluate(prob, code, header=False)
    ok(r)
    assert r.feedback["platform"] == "trn2"
