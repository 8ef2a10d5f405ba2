"""NKI v2 (the nki2 ISA profile) for the csa and mha families (causal attention returning flash statistics):
their naive_nki2 / tuned_nki2 kernels on trn2, the offline heuristic writing them in NKI v2, and short offline
nki2 runs. (Every schedule's v2 render is judged by test_nki2_profile.test_v2_schedules_render_correct_kernels,
which covers each family of BODIES_V2.)"""
from __future__ import annotations

import re

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import FAMILIES, render
from autocomp_zmq.protocols.jobs import Problem as WireProblem
from tests.system.runkit import finish, launch
from tests.trainium_sim.simkit import explain
from tests.trainium_sim.test_heuristic import CASES, FEATURES, schedules_to_check

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def sim():
    target = get_target("trainium-sim")
    yield target
    target.close()


# csa-4096 shares csa-2048's kernels (like = "csa-2048"); csa-16384 does too but takes ~35 s to simulate
@pytest.mark.parametrize("name", ["csa-2048", "csa-4096", "mha"])
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


def test_the_heuristic_writes_csa_and_mha_in_v2():
    def wire(name, isa):
        p = get_target("trainium-sim").problem(name, isa)
        return WireProblem(target="trainium-sim", name=p.name, family=p.family, dims=p.dims, isa=isa)
    agent = TrainiumHeuristic()
    for name in ("csa-2048", "csa-4096", "csa-16384", "mha"):
        assert agent.supports(wire(name, "nki2")) is None, name
        assert agent.supports(wire(name, "")) is None, name
    # the same schedule in both dialects: the v2 kernel keeps the v1 kernel's loops and functions, without
    # the v1-only forms (comments aside: a few v2 lines say what differs)
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
            assert [ln for ln in frame if ln not in v2_lines] == [], s


# mha evaluations trace 8 heads x 16 query tiles (~4 s each): its run stops after 10 evaluations (in its second
# iteration) to take about a minute
@pytest.mark.parametrize("problem, budget", [("csa-2048", []), ("mha", ["--max-evals", "10"])])
def test_a_short_offline_v2_run_improves_on_its_start(tmp_path, problem, budget):
    run = tmp_path / "run"
    out = finish(launch("run", "--target", "trainium-sim", "--isa", "nki2", "--problem", problem, "--out", str(run),
                        "-T", "3", "--evaluators", "2", *budget))
    speedup = float(re.search(r"Speedup: ([0-9.]+)x", out).group(1))
    assert speedup > 1.05, out
    best = (run / "best.py").read_text()
    assert "import nki.isa as nisa" in best and "neuronxcc" not in best
