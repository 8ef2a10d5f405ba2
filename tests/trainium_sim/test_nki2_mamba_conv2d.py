"""NKI v2 (the nki2 ISA profile) for the mamba and conv2d families: the offline heuristic writing them in NKI
v2. Their kernels and short offline runs are in test_nki2_profile, with every family's, and every schedule's v2
render is judged by its test_v2_schedules_render_correct_kernels."""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import FAMILIES, render
from autocomp_zmq.protocols.jobs import ProblemRef

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_the_heuristic_writes_mamba_and_conv2d_in_v2():
    def wire(name, isa):
        p = get_target("trainium-sim").problem(name, isa)
        return ProblemRef(target="trainium-sim", name=p.name, family=p.family, dims=p.dims, isa=isa)
    agent = TrainiumHeuristic()
    for name in ("mamba", "conv2d", "conv2d-small"):
        assert agent.supports(wire(name, "nki2")) is None, name
        assert agent.supports(wire(name, "")) is None, name
    # the same schedule in both dialects: the v2 kernel keeps the v1 kernel's frame (loops, steps, issue order),
    # taking the inputs NKI v2's definition passes (pre-broadcast B and C, the pre-transposed filter)
    for family, knobs, sig in (
            ("mamba", dict(hoist=True, rows=True, bcast="tensor", acc="psum", chunk=512, skew=2),
             ("def solution(delta, u, A, B, C):", "def solution(delta, u, A, B_exp, C_exp):")),
            ("conv2d", dict(rows=4, bf16=True, hoist=True, chunked=True, prefetch=True),
             ("def solution(img_ref, filter_ref, **kwargs):", "def solution(img_ref, filter_T_ref, **kwargs):"))):
        s = FAMILIES[family].Schedule(**knobs)
        v1, v2 = render(s, {}), render(s, {}, "v2")
        assert "neuronxcc" in v1 and "neuronxcc" not in v2 and "par_dim" not in v2 and "arange" not in v2
        assert sig[0] in v1 and sig[1] in v2
        frame = [ln.replace(*sig) for ln in v1.splitlines() if re.match(r"\s*(for |if |def |return )", ln)]
        # v1's per-tap weight transposes (weights()) have nothing to do on a pre-transposed filter
        frame = [ln for ln in frame if ln not in ("        for a in nl.static_range(HF):",
                                                  "            for b in nl.static_range(WF):")]
        v2_lines = v2.splitlines()
        assert [ln for ln in frame if ln not in v2_lines] == [], family
