"""Schedule reuse without processes: choosing the most similar recorded workload, clear errors for traces
that do not fit, and the planning prompt that carries a reused plan."""
from __future__ import annotations

import json

import pytest

from autocomp_zmq.agents.run import reuse
from autocomp_zmq.agents.workers.llm.prompts import plan_prompt
from autocomp_zmq.protocols.jobs import MenuOption, Parent, Plan, PlanRequest, ProblemRef


def trace(name: str, dims: dict, family: str = "gemm", isa: str = "fine", target: str = "gemmini-sim",
          recorded: float = 1.0, best: float = 100.0) -> dict:
    return {"format": reuse.TRACE_FORMAT, "target": target, "isa": isa, "recorded": recorded, "best_latency": best,
            "problem": {"name": name, "family": family, "dims": dims},
            "steps": [{"option_id": "tile-sizes", "text": f"plan for {name}", "params": {}}]}


def put(library, t: dict, file: str | None = None) -> None:
    folder = library / t["target"] / (t["isa"] or "default")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / (file or f"{t['problem']['name']}--run.json")).write_text(json.dumps(t))


def test_auto_picks_the_most_similar_shape_of_the_same_target_profile_and_family(tmp_path):
    put(tmp_path, trace("gemm-1024x1024x1024", {"I": 1024, "J": 1024, "K": 1024}))
    put(tmp_path, trace("gemm-12544x256x64", {"I": 12544, "J": 256, "K": 64}))
    put(tmp_path, trace("gemm-512x512x512", {"I": 512, "J": 512, "K": 512}, isa=""))       # other profile
    put(tmp_path, trace("conv3x3-14-128", {"P": 14, "C": 128}, family="conv3x3"))          # other family
    put(tmp_path, trace("gemm-512x512x512", {"I": 512, "J": 512, "K": 512}, target="x"))   # other target
    (tmp_path / "gemmini-sim" / "fine" / "broken.json").write_text("{not json")           # skipped
    found = reuse.find(tmp_path, "gemmini-sim", "fine", "gemm", {"I": 512, "J": 512, "K": 512})
    assert found["problem"]["name"] == "gemm-1024x1024x1024"
    found = reuse.find(tmp_path, "gemmini-sim", "fine", "gemm", {"I": 12544, "J": 128, "K": 64})
    assert found["problem"]["name"] == "gemm-12544x256x64"
    assert reuse.distance({"I": 512, "J": 512, "K": 512}, {"I": 1024, "J": 1024, "K": 1024}) == 3
    assert reuse.distance({"I": 8, "J": 8}, {"I": 8, "J": 8}) == 0


def test_equally_similar_workloads_prefer_the_newest_record(tmp_path):
    put(tmp_path, trace("gemm-256x256x256", {"I": 256, "J": 256, "K": 256}, recorded=1.0), "old.json")
    put(tmp_path, trace("gemm-256x256x256", {"I": 256, "J": 256, "K": 256}, recorded=2.0), "new.json")
    found = reuse.find(tmp_path, "gemmini-sim", "fine", "gemm", {"I": 512, "J": 512, "K": 512})
    assert found["recorded"] == 2.0


def test_an_empty_library_is_a_clear_error(tmp_path):
    with pytest.raises(reuse.ReuseError, match="holds no trace of a gemm problem on gemmini-sim --isa fine; run one "
                                                "first, or give --reuse RUN_DIR"):
        reuse.find(tmp_path, "gemmini-sim", "fine", "gemm", {"I": 16, "J": 16, "K": 16})


def test_reuse_of_a_directory_that_is_not_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(reuse.ReuseError, match="not a run directory"):
        reuse.from_run(tmp_path, "gemmini-sim", "fine", "gemm", {"I": 16, "J": 16, "K": 16})


def test_the_library_defaults_to_the_environment_then_the_user_data_dir(monkeypatch, tmp_path):
    assert reuse.library_dir(str(tmp_path)) == tmp_path
    monkeypatch.setenv(reuse.LIBRARY_ENV, str(tmp_path / "env"))
    assert reuse.library_dir() == tmp_path / "env"
    monkeypatch.delenv(reuse.LIBRARY_ENV)
    assert reuse.library_dir().parts[-2:] == ("autocomp-zmq", "schedules")


def test_the_planning_prompt_carries_the_reused_plan():
    problem = ProblemRef(target="gemmini-sim", name="gemm-512x512x512", family="gemm",
                      dims={"I": 512, "J": 512, "K": 512}, isa="fine")
    was = ProblemRef(target="gemmini-sim", name="gemm-1024x1024x1024", family="gemm",
                  dims={"I": 1024, "J": 1024, "K": 1024}, isa="fine")
    option = MenuOption(id="double-buffer-spad", title="Double-buffer", description="ping-pong")
    req = PlanRequest(problem=problem, parent=Parent(id="p", code="void solution() {}"), menu=[option],
                      model="m", iteration=1, iterations=5, seed=1,
                      prior=Plan(text="Give A two regions 0 and 4096 and alternate by parity.",
                                 option_id="double-buffer-spad"), prior_problem=was)
    text = plan_prompt(req).body
    assert "## A plan that worked on a similar workload" in text
    assert "On gemm-1024x1024x1024 (I=1024, J=1024, K=1024)" in text
    assert "Give A two regions 0 and 4096 and alternate by parity." in text
    assert "Adapt this plan to the current problem (gemm-512x512x512)" in text
    assert "## 7. Hardware loop FSMs" not in plan_prompt(req).prefix   # the fine profile's pack
    plain = plan_prompt(PlanRequest(**{**{f: getattr(req, f) for f in req.__struct_fields__}, "prior": None,
                                       "prior_problem": None})).body
    assert "similar workload" not in plain
