"""Fixed-size inner affine loops, end to end: the front end records each nl.affine_range iteration, the trusted
side verifies the loop and times it as neuronx-cc issues it (loops.py). Autocomp's conv1d case study in small:
the same per-column multiply and reduction, in one long loop or in blocks of a 64-trip inner loop, is correct
both ways and much faster blocked (10.75x measured on a trn1 at its full size)."""
from __future__ import annotations

import pytest

from tests.trainium_sim.simkit import SimKit, ok

pytestmark = pytest.mark.system

F32 = "float32"
COLS = 1024

CONV = """
@nki.jit
def solution(img, filt):
    out = nl.ndarray((128, COLS), dtype=img.dtype, buffer=nl.shared_hbm)
    img_sb = nl.load(img)
    filt_sb = nl.load(filt)
    out_sb = nl.ndarray((128, COLS), dtype=img.dtype, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    i_w = nl.arange(3)[None, :]
LOOPS
    nl.store(out, out_sb)
    return out
"""
BODY = """
        prod = nisa.tensor_tensor(img_sb[i_p, i_w + o], filt_sb[i_p, i_w], op=np.multiply)
        out_sb[i_p, o] = nisa.tensor_reduce(np.add, prod[i_p, i_w], axis=[1])
"""
FLAT = "    for o in nl.affine_range(COLS):" + BODY
BLOCKED = ("    for b in nl.affine_range(COLS // 64):\n      for j in nl.affine_range(64):\n        o = b * 64 + j"
           + BODY.replace("\n        ", "\n        "))
SEQUENTIAL = FLAT.replace("affine_range", "sequential_range")


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    kit = SimKit(tmp_path_factory.mktemp("trn-loops"))
    problem = kit.problem({"img": ((128, COLS + 2), F32), "filt": ((128, 3), F32)}, {"out": ((128, COLS), F32)}, """
def reference(img, filt):
    return np.stack([(img[:, o:o + 3] * filt).sum(axis=1) for o in range(img.shape[1] - 2)], axis=1)
""")

    def run(loops: str):
        r = kit.evaluate(problem, CONV.replace("LOOPS", loops.rstrip()).replace("COLS", str(COLS)))
        ok(r)
        return r.latency
    return run


def test_an_inner_loop_of_64_runs_vectorized_and_a_long_one_overlapped(conv):
    flat, blocked, sequential = conv(FLAT), conv(BLOCKED), conv(SEQUENTIAL)
    assert flat / blocked > 5, (flat, blocked)
    # a sequential loop is timed in program order: each reduction waits for its multiply
    assert sequential > 1.5 * flat, (sequential, flat)


def test_a_loop_left_early_or_measured_still_traces(conv):
    early = FLAT.replace("affine_range(COLS):", "affine_range(COLS + 5):\n        if o >= len(nl.affine_range(COLS)):"
                                                "\n            break")
    conv(early)


def test_more_loop_iterations_than_are_recorded_leave_program_order(conv):
    """Past MAX_LOOP_EVENTS (4 million iterations) the front end sends no loop record at all: the kernel is still
    judged, timed in program order (as a sequential loop is)."""
    empty = "    for _ in nl.affine_range(4_100_000):\n        pass\n"
    assert conv(empty + FLAT) == pytest.approx(conv(SEQUENTIAL))
