"""NKI v2 (the nki2 ISA profile) for the mamba and conv2d families: their naive_nki2 / tuned_nki2 kernels on trn2,
the offline heuristic writing them in NKI v2, and short offline nki2 runs. (Every schedule's v2 render is judged by
test_nki2_profile.test_v2_schedules_render_correct_kernels, which covers each family of BODIES_V2.)"""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import FAMILIES, render
from autocomp_zmq.protocols.jobs import Problem as WireProblem
from tests.system.runkit import finish, launch
from tests.trainium_sim.simkit import explain

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def sim():
    target = get_target("trainium-sim")
    yield target
    target.close()


# conv2d-small shares conv2d's kernels (like = "conv2d"); conv2d itself takes long to simulate
@pytest.mark.parametrize("name", ["mamba", "conv2d-small"])
def test_v2_kernels_are_correct_on_trn2_and_tuned_beats_naive(sim, name):
    problem = sim.problem(name, "nki2")
    assert {"naive_nki2", "tuned_nki2"} <= set(problem.kernels)
    sources = {r: problem.kernel_source(r) for r in ("naive_nki2", "tuned_nki2")}
    for code in sources.values():
        assert "import nki.isa as nisa" in code and "neuronxcc" not in code
    naive, tuned = (sim.judge(problem, sources[r]) for r in ("naive_nki2", "tuned_nki2"))
    assert naive.correct, explain(naive)
    assert tuned.correct, explain(tuned)
    assert naive.feedback["platform"] == tuned.feedback["platform"] == "trn2"
    assert tuned.latency < naive.latency, (tuned.latency, naive.latency)


def test_the_heuristic_writes_mamba_and_conv2d_in_v2():
    def wire(name, isa):
        p = get_target("trainium-sim").problem(name, isa)
        return WireProblem(target="trainium-sim", name=p.name, family=p.family, dims=p.dims, isa=isa)
    agent = TrainiumHeuristic()
    for name in ("mamba", "conv2d", "conv2d-small"):
        assert agent.supports(wire(name, "nki2")) is None, name
        assert agent.supports(wire(name, "")) is None, name
    # the same schedule in both dialects: the v2 kernel keeps the v1 kernel's frame (loops, steps, issue order)
    for family, knobs in (("mamba", dict(hoist=True, rows=True, bcast="tensor", acc="psum", chunk=512, skew=2)),
                          ("conv2d", dict(rows=4, bf16=True, hoist=True, chunked=True, prefetch=True))):
        s = FAMILIES[family].Schedule(**knobs)
        v1, v2 = render(s, {}), render(s, {}, "v2")
        assert "neuronxcc" in v1 and "neuronxcc" not in v2 and "par_dim" not in v2 and "arange" not in v2
        frame = [ln for ln in v1.splitlines() if re.match(r"\s*(for |if |def |return )", ln)]
        v2_lines = v2.splitlines()
        assert [ln for ln in frame if ln not in v2_lines] == [], family


@pytest.mark.parametrize("problem", ["mamba", "conv2d-small"])
def test_a_short_offline_v2_run_improves_on_its_start(tmp_path, problem):
    run = tmp_path / "run"
    out = finish(launch("run", "--target", "trainium-sim", "--isa", "nki2", "--problem", problem, "--out", str(run),
                        "-T", "3", "--evaluators", "2"))
    speedup = float(re.search(r"Speedup: ([0-9.]+)x", out).group(1))
    assert speedup > 1.05, out
    best = (run / "best.py").read_text()
    assert "import nki.isa as nisa" in best and "neuronxcc" not in best
