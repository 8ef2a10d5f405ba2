"""NKI v2 (the nki2 ISA profile) for the csa and mha families (causal attention returning flash statistics):
the offline heuristic writing them in NKI v2. Their kernels and short offline runs are in test_nki2_profile, with
every family's, and every schedule's v2 render is judged by its test_v2_schedules_render_correct_kernels."""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import FAMILIES, render
from autocomp_zmq.protocols.jobs import ProblemRef
from tests.trainium_sim.test_heuristic import CASES, FEATURES, schedules_to_check

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_the_heuristic_writes_csa_and_mha_in_v2():
    def wire(name, isa):
        p = get_target("trainium-sim").problem(name, isa)
        return ProblemRef(target="trainium-sim", name=p.name, family=p.family, dims=p.dims, isa=isa)
    agent = TrainiumHeuristic()
    for name in ("csa-2048", "csa-4096", "csa-16384", "mha"):
        assert agent.supports(wire(name, "nki2")) is None, name
        assert agent.supports(wire(name, "")) is None, name
    # the same schedule in both dialects: the v2 kernel keeps the v1 kernel's loops and functions, without
    # the v1-only forms (comments aside: a few v2 lines say what differs), and takes the causal mask NKI v2's
    # definition passes
    for family in ("csa", "mha"):
        fam = FAMILIES[family]
        dims = CASES[family]["dims"]
        for s in schedules_to_check(family, dims) + [fam.Schedule(**k) for k in FEATURES[family]]:
            v1, v2 = render(s, dims), render(s, dims, "v2")
            assert "neuronxcc" in v1 and "neuronxcc" not in v2
            for v1_only in ("par_dim", "arange", "nl.load(", "nl.store(", "mask=", "+=", "nl.zeros("):
                assert v1_only not in v2, (v1_only, s)
            v2_lines = [ln.split("#")[0].rstrip() for ln in v2.splitlines()]
            frame = [ln.split("#")[0].rstrip() for ln in v1.splitlines() if re.match(r"\s*(for |def )", ln)]
            sig = "def solution(q, k, v, kernel_dtype"
            assert frame[0].startswith(sig), frame[0]
            frame[0] = frame[0].replace(sig, "def solution(q, k, v, causal_mask, kernel_dtype")
            assert [ln for ln in frame if ln not in v2_lines] == [], s
