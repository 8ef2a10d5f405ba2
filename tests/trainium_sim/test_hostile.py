"""Hostile kernels: each is refused or marked failed with a reason, and the evaluator survives it.

Every case evaluates the attack in one TrainiumSim instance and then a good kernel in the same
instance, which must still be correct. Cases where the attack currently works (the simulator returns
correct=True, or evaluate() itself raises) are strict xfails naming the hole; they are security bugs
for the lead to fix.
"""
from __future__ import annotations

import contextlib
import resource

import numpy as np
import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok

pytestmark = pytest.mark.system

MAX_INSTRUCTIONS = 5000       # a small instruction budget keeps the exhaustion cases fast

GOOD = """
@nki.jit
def solution(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(a)))
    return out
"""
# the real os module, reached without `import` through a class every CPython process has loaded
REACH_OS = ("OS = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]"
            ".__init__.__globals__\n")


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-hostile"), max_instructions=MAX_INSTRUCTIONS)


@pytest.fixture(scope="module")
def prob(kit):
    return kit.problem({"a": ((128, 64), "float32")}, {"out": ((128, 64), "float32")}, """
def reference(a):
    return np.exp(a)
""")


def survives(kit, prob) -> None:
    ok(kit.evaluate(prob, GOOD))


def hostile(kit, prob, code: str, *needles: str, kinds=("compile",), time_limit_s: float | None = 30):
    """Evaluate an attack: a failed verdict of one of `kinds` whose error holds every needle; then a
    good kernel still evaluates correctly in the same instance."""
    r = kit.evaluate(prob, code, time_limit_s=time_limit_s)
    assert not r.correct and r.error_kind in kinds, explain(r)
    for n in needles:
        assert n in (r.error or ""), f"expected {n!r}:\n{explain(r)}"
    survives(kit, prob)
    return r


@pytest.mark.parametrize("stmt,use,name", [
    ("import os", "os.system('id')", "os.system"), ("import subprocess", "subprocess.run(['id'])", "subprocess.run"),
    ("import socket", "socket.socket()", "socket.socket"), ("import ctypes", "ctypes.CDLL(None)", "ctypes.CDLL"),
    ("import importlib", "importlib.import_module('os')", "importlib.import_module"),
    ("m = __import__('os')", "m.system('id')", "os.system"), ("from os import path", "path.exists('/')", "os.path.exists"),
    ("import sys", "sys.exit(3)", "sys.exit"), ("import os", "print(os.environ['HOME'])", "os.environ"),
])
def test_forbidden_imports(kit, prob, stmt, use, name):
    # a module outside the allowed ones imports as an inert stand-in (harness files import torch, time, os for
    # their host-side code); any use of it is refused
    hostile(kit, prob, stmt + "\n" + use + "\n" + GOOD, f"{name} is not available in a kernel")


@pytest.mark.parametrize("read", [
    "open('/etc/passwd').read()",
    "np.load('/etc/passwd', allow_pickle=True)",
    "np.fromfile('/etc/passwd', dtype=np.uint8)",
    "np.loadtxt('/etc/hostname', dtype=str)",
])
def test_reading_files(kit, prob, read):
    hostile(kit, prob, read + "\n" + GOOD, "Operation not permitted")


def test_writing_a_file(kit, prob, tmp_path):
    target = tmp_path / "pwned.txt"
    hostile(kit, prob, f"open({str(target)!r}, 'w').write('x')\n" + GOOD, "Operation not permitted")
    assert not target.exists()


def test_spinning_forever_times_out(kit, prob):
    hostile(kit, prob, "while True:\n    pass\n" + GOOD, "timed out", kinds=("timeout",), time_limit_s=3)


def test_sleeping(kit, prob):
    # `time` is loaded in the child; reached through sys.modules, sleeping is refused or timed out
    code = REACH_OS + "OS['sys'].modules['time'].sleep(100)\n" + GOOD
    r = kit.evaluate(prob, code, time_limit_s=3)
    assert not r.correct and (("Operation not permitted" in r.error and r.error_kind == "compile")
                              or r.error_kind == "timeout"), explain(r)
    survives(kit, prob)


def test_huge_numpy_allocation(kit, prob):
    hostile(kit, prob, "x = np.zeros(64 << 30, dtype=np.uint8)\nx[::4096] = 1\n" + GOOD, "MemoryError",
            kinds=("compile", "crash"))


def test_huge_python_list(kit, prob):
    hostile(kit, prob, "x = [0] * (2 << 30 >> 3)\ny = [1] * (2 << 30 >> 3)\n" + GOOD, kinds=("compile", "crash"))


def test_deep_recursion(kit, prob):
    hostile(kit, prob, "def f(n):\n    return f(n + 1)\nf(0)\n" + GOOD, "RecursionError")


def test_recursion_past_the_c_stack(kit, prob):
    # with the recursion limit lifted through sys.modules, recursion through C calls (list, map)
    # overflows the interpreter's C stack: the child dies with SIGSEGV
    code = REACH_OS + "OS['sys'].setrecursionlimit(10 ** 8)\ndef f(n):\n    return list(map(f, [n + 1]))\nf(0)\n"
    hostile(kit, prob, code + GOOD, "SIGSEGV", kinds=("crash",))


def test_fork_through_builtins_tricks(kit, prob):
    hostile(kit, prob, REACH_OS + "OS['fork']()\n" + GOOD, "Operation not permitted")


def test_system_through_builtins_tricks(kit, prob, tmp_path):
    target = tmp_path / "system.txt"
    code = REACH_OS + f"rc = OS['system']('echo pwned > {target}')\nassert rc == 0, f'system() failed: {{rc}}'\n"
    hostile(kit, prob, code + GOOD, "system() failed")
    assert not target.exists()


def test_subprocess_through_the_loaded_importlib(kit, prob):
    code = REACH_OS + "sp = OS['sys'].modules['importlib'].import_module('subprocess')\nsp.run(['id'])\n"
    hostile(kit, prob, code + GOOD, "Operation not permitted")


def test_socket_through_the_loaded_ctypes(kit, prob):
    code = REACH_OS + """ctypes = OS['sys'].modules['ctypes']
libc = ctypes.CDLL(None, use_errno=True)
if libc.socket(2, 1, 0) < 0:
    raise OSError(ctypes.get_errno(), 'socket() refused')
""" + GOOD
    hostile(kit, prob, code, "socket() refused", "Errno 1")


def test_killing_its_process_group(kit, prob):
    hostile(kit, prob, REACH_OS + "OS['killpg'](0, 9)\n" + GOOD, "Operation not permitted")


def test_killing_itself_and_its_parent(kit, prob):
    hostile(kit, prob, REACH_OS + "OS['kill'](OS['getppid'](), 9)\n" + GOOD, "Operation not permitted")


def test_exiting_without_a_stream(kit, prob):
    hostile(kit, prob, "raise SystemExit(0)\n" + GOOD, "without writing its instruction stream", kinds=("crash",))


@pytest.mark.parametrize("exit_stmt", ["raise SystemExit(0)", "OS['_exit'](0)"])
def test_forged_garbage_stream(kit, prob, exit_stmt):
    code = REACH_OS + ("f = open(4, 'wb', closefd=False)\nf.write(b'\\xc1 forged stream')\nf.flush()\n"
                       f"{exit_stmt}\n") + GOOD
    hostile(kit, prob, code, "unreadable", kinds=("crash",))


def test_forged_malformed_stream(kit, prob):
    # a well-formed msgpack map with nonsense tables is validated like any stream
    code = REACH_OS + """msgpack = OS['sys'].modules['msgpack']
f = open(4, 'wb', closefd=False)
f.write(msgpack.packb({'error': None, 'tensors': [['hbm', [1 << 40], 'float32', 0, 0, -1]], 'instrs': 7,
                       'inputs': [0], 'outputs': [0]}))
f.flush()
OS['_exit'](0)
""" + GOOD
    hostile(kit, prob, code, "NKI error")


def test_flooding_stdout(kit, prob):
    r = hostile(kit, prob, "while True:\n    print('x' * 65536)\n" + GOOD, kinds=("compile", "crash", "timeout"),
                time_limit_s=10)
    assert len(r.stdout) <= 4200 and len(r.error) <= 9000, (len(r.stdout), len(r.error))


def test_exhausting_instructions(kit, prob):
    code = """
@nki.jit
def solution(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    while True:
        t = nl.exp(t)
    return out
"""
    hostile(kit, prob, code, f"more than {MAX_INSTRUCTIONS:,} instructions")


def test_noop_recorder(kit, prob):
    code = "import neuronxcc.nki._trace as T\nT.RECORDER.emit = lambda *args, **kw: None\n" + GOOD
    hostile(kit, prob, code, "never written", kinds=("wrong_result",))


def test_clearing_the_recorded_instructions(kit, prob):
    code = GOOD.replace("    return out", "    nl.RECORDER.instrs.clear()\n    return out")
    hostile(kit, prob, code, "never written", kinds=("wrong_result",))


def test_forged_copy_claiming_the_output(kit, prob):
    forged = "['dma', 'dma', [out.view().encode()], [a.view().encode()], {}, 0]"
    code = GOOD.replace("    nl.store(out, nl.exp(nl.load(a)))", f"    nl.RECORDER.instrs.append({forged})")
    hostile(kit, prob, code, "wrong result", kinds=("wrong_result",))


def test_returning_the_input_as_output(kit, prob):
    hostile(kit, prob, "@nki.jit\ndef solution(a):\n    return a\n", "must be a new HBM tensor")


def test_numpy_values_as_store_value(kit, prob):
    code = GOOD.replace("nl.exp(nl.load(a))", "np.exp(np.ones((128, 64), dtype=np.float32))")
    hostile(kit, prob, code, "nl.store's value", "ndarray")


def test_constant_output(kit, prob):
    code = GOOD.replace("nl.exp(nl.load(a))", "nl.full((128, 64), 1.0, nl.float32)")
    hostile(kit, prob, code, "wrong result", kinds=("wrong_result",))


def test_hard_coded_public_outputs_fail_on_hidden_inputs(kit):
    """A kernel that somehow knows the public input set (seed 0) writes its outputs as constants: the
    public set passes, the hidden set drawn for the evaluation does not."""
    p = kit.problem({"a": ((4, 8), "float32")}, {"out": ((4, 8), "float32")}, """
def reference(a):
    return 2 * a
""")
    public = 2 * kit.sim.spec(p).make_inputs([0, 0])["a"].astype(np.float64)
    stores = "\n".join(f"    nl.store(out[{i}:{i + 1}, {j}:{j + 1}], nl.full((1, 1), {float(public[i, j])!r}, "
                       "nl.float32))" for i in range(4) for j in range(8))
    code = ("@nki.jit\ndef solution(a):\n    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
            f"{stores}\n    return out\n")
    r = kit.evaluate(p, code, seed=0)
    assert not r.correct and r.error_kind == "wrong_result", explain(r)
    assert "hidden input set 1" in r.error and "the public set was right" in r.error, explain(r)
    # the hidden set is kept per evaluator, so its values are never quoted back to the search
    assert "expected" not in r.error and "got" not in r.error, explain(r)
    hidden = kit.sim._hidden(kit.sim.spec(p))[0][0]["a"]
    assert not np.array_equal(hidden, kit.sim.spec(p).make_inputs([0, 0])["a"])
    assert kit.sim._hidden(kit.sim.spec(p))[0][0]["a"] is hidden          # drawn once, kept


# -- holes found and closed: each attack once succeeded
@pytest.mark.parametrize("instr", [
    '"ew", "dma", [out.view()], [a.view()], {"fn": "exp"}',
    '"activation", "dma", [out.view()], [a.view(), 1.0, None], {"fn": "exp"}',
])
def test_compute_forged_onto_the_dma_engine(kit, prob, instr):
    code = GOOD.replace("    nl.store(out, nl.exp(nl.load(a)))", f"    nl.RECORDER.emit({instr})")
    hostile(kit, prob, code, kinds=("compile", "limit"))


def test_raising_the_instruction_limit_in_the_sandbox(kit, prob):
    code = ("import neuronxcc.nki._trace as T\nT.MAX_INSTRUCTIONS = 10 ** 9\n"
            + GOOD.replace("    return out", f"    for i in range({2 * MAX_INSTRUCTIONS}):\n"
                           "        nisa.memset((1, 1), 0.0, nl.float32)\n    return out"))
    hostile(kit, prob, code, "instructions", kinds=("compile", "limit"))


def test_output_aliasing_an_input_through_reshape(kit):
    p = kit.problem({"a": ((128, 64), "float32")}, {"out": ((128, 64), "float32")}, """
def reference(a):
    return a
""")
    r = kit.evaluate(p, "@nki.jit\ndef solution(a):\n    return a.reshape((128, 64))\n")
    assert not r.correct and "new HBM tensor" in (r.error or ""), explain(r)


@contextlib.contextmanager
def address_space_cap(extra: int = 6 << 30):
    """Cap this process's address space for the duration, so an evaluator that tries to allocate a
    hostile amount of memory fails with MemoryError instead of paging the host to death (the sandboxed
    child sets its own, lower limit)."""
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + extra if hard == resource.RLIM_INFINITY else min(hard, vm + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_huge_sbuf_declaration_does_not_break_the_evaluator(kit, prob):
    code = GOOD.replace("    return out", "    big = nl.ndarray((128, 2 ** 31 - 1), dtype=nl.float32)\n    return out")
    with address_space_cap():
        r = kit.evaluate(prob, code)
    assert not r.correct and r.error_kind in ("compile", "limit"), explain(r)
    survives(kit, prob)


def test_huge_mask_expression_does_not_break_the_evaluator(kit, prob):
    code = GOOD.replace("nl.exp(nl.load(a))",
                        "nl.exp(nl.load(a), mask=(nl.arange(2 ** 24)[:, None] + nl.arange(2 ** 24)[None, :] < 5))")
    with address_space_cap():
        r = kit.evaluate(prob, code)
    assert not r.correct and r.error_kind in ("compile", "limit"), explain(r)
    survives(kit, prob)


def test_an_oversized_instruction_stream_is_refused_before_it_is_decoded(tmp_path):
    """A 48 MiB stream once took the evaluator to 3.66 GB while it was unpacked: the stream's size is now
    checked first (max_trace_bytes), and decoding runs under a memory ceiling."""
    kit = SimKit(tmp_path, max_trace_bytes=1 << 20)
    p = kit.problem({"a": ((128, 64), "float32")}, {"out": ((128, 64), "float32")}, "def reference(a):\n"
                    "    return np.exp(a)\n")
    code = GOOD.replace("    return out", "    for i in range(20000):\n"
                        f"        nisa.memset((1, 1), 0.0, nl.float32)\n    return out")
    r = kit.evaluate(p, code)
    assert not r.correct and r.error_kind == "limit" and "max_trace_bytes" in r.error, explain(r)
    ok(kit.evaluate(p, GOOD))


def test_one_deadline_covers_the_whole_evaluation(kit, prob):
    """`--timeout 5` once stopped only the sandboxed trace: placement and timing ran on for minutes. Now the
    time limit is one deadline over tracing, decoding, placement, replay and timing."""
    # traced in a moment, but each of its instructions is a big numpy job for the replayer
    code = GOOD.replace("    return out", "    big = nl.ndarray((128, 32768), dtype=nl.float32)\n"
                        "    big[...] = 1.0\n"
                        "    for i in range(4000):\n"
                        "        big[...] = nl.exp(big)\n    return out")
    r = kit.evaluate(prob, code, time_limit_s=2)
    assert not r.correct and r.error_kind == "timeout", explain(r)
    # replaying all 4,000 would take over a minute: stopped by the 2 s deadline it ends far sooner, on any load
    assert r.wall_s < 60, r.wall_s
    survives(kit, prob)
