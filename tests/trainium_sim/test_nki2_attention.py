"""NKI v2 (the nki2 ISA profile) for the attention and sd-attention families: the sd-attention kernels' causal mask,
and the heuristic's v2 renderer sharing the v1 renderer's loops. Their kernels and short offline runs are in
test_nki2_profile, with every family's, and every schedule's v2 render is judged by its
test_v2_schedules_render_correct_kernels."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners.trainium_sim.heuristic import attention, attention_body, attention_v2
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import BODIES_V2
from tests.trainium_sim.simkit import SimKit, explain
from tests.trainium_sim.test_heuristic import CASES

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

PROBLEMS = Path(__file__).resolve().parents[2] / "hw_runners" / "trainium_sim" / "problems"


CAUSAL_REFERENCE = """
def reference(q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q_ref, k_ref, v_ref))
    s = 0.125 * q @ k.T
    s = np.where(np.arange(s.shape[0])[None, :] <= np.arange(s.shape[0])[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v
"""


def test_the_sd_attention_v2_kernels_apply_the_causal_mask(tmp_path):
    # the problem calls them unmasked; like the v1 kernels, they also take use_causal_mask=True. The tolerance is
    # the problem's 1e-2 widened to 3e-2: a masked row's first queries see only a few keys, so their bf16
    # probabilities' rounding does not average out (at 1e-2 about 1 hidden set in 20 failed, v1's naive kernel
    # as often); a mask off by one key is still wrong by ~1 on 5% of the elements
    kit = SimKit(tmp_path, platform="trn2")
    case = CASES["sd-attention"]
    problem = kit.problem(inputs=case["inputs"], outputs=case["outputs"], reference=CAUSAL_REFERENCE,
                          make_inputs=case["make_inputs"], kwargs={"use_causal_mask": True, "mixed_precision": True},
                          atol=3e-2, rtol=3e-2)
    for role in ("naive_nki2", "tuned_nki2"):
        r = kit.sim.evaluate(problem, (PROBLEMS / "sd-attention" / f"{role}.py").read_text())
        assert r.correct, f"{role}\n{explain(r)}"


def _loops(code: str) -> list[str]:
    return re.findall(r"^ *(?:for|def) .*?:", code, re.M)


def test_the_v2_renderer_keeps_the_loops_of_v1_and_writes_no_v1():
    # both dialects render one loop structure (attention_body); only the statements differ
    assert BODIES_V2["attention"] is BODIES_V2["sd-attention"] is attention_v2.body
    grid = dict(kres=(False, True), qres=(False, True), vres=(False, True), bigdma=(False, True),
                qt=("once", "matmul"), kw=(128, 512), softmax=attention.SOFTMAX, pt=("transpose", "direct"),
                ones=(False, True), fold=(False, True), group=(1, 4), evict=("copy", "alternate"),
                mdt=("f32", "bf16"), ahead=(0, 2), skew=(False, True))
    seen = 0
    for cls, dims in ((attention.HmSchedule, CASES["attention"]["dims"]),
                      (attention.SmSchedule, CASES["sd-attention"]["dims"])):
        for values in itertools.product(*grid.values()):
            s = cls(**dict(zip(grid, values)))
            if not attention.fits(s, dims):
                continue
            v1, v2 = attention_body.body(s), attention_v2.body(s)
            assert _loops(v1) == _loops(v2), s
            code = re.sub(r"#.*", "", v2)
            assert not re.search(r"nl\.(par_dim|load|store|arange|copy|matmul|max|sum)\(|\+=|\[\.\.\.\]", code), s
            seen += 1
    assert seen > 1000
