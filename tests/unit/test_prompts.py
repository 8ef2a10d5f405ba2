"""Prompts built for caching and worded for their target: plan, code and repair prompts of a run share one
long stable prefix (what providers cache) and everything that varies comes after it; the words about
correctness and the machine are the target's own."""
from __future__ import annotations

import os

import msgspec
import pytest

from autocomp_zmq.agents.workers.llm.prompts import render
from autocomp_zmq.protocols.jobs import CodeRequest, PlanRequest, RepairRequest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBLEMS = {
    "gemmini-sim": ({"target": "gemmini-sim", "name": "gemm-512x512x512", "family": "gemm",
                     "dims": {"I": 512, "J": 512, "K": 512}, "description": "int8 GEMM"},
                    "hw_runners/gemmini_sim/problems/gemm_baseline.c"),
    "trainium-sim": ({"target": "trainium-sim", "name": "rmsnorm", "family": "rmsnorm", "latency_unit": "us",
                      "description": "RMSNorm"}, "hw_runners/trainium_sim/problems/rmsnorm/naive.py"),
}


def requests(target: str):
    problem, kernel = PROBLEMS[target]
    code = open(os.path.join(ROOT, kernel)).read()
    parent = {"id": "p", "code": code, "latency": 1000, "feedback_text": "the load queue was full 40% of the time"}
    plan = {"text": "Keep the B panel resident and double-buffer A.", "option_id": "panel-reuse"}
    common = {"problem": problem, "model": "m", "seed": 1}
    return {"plan": msgspec.convert({**common, "parent": parent, "iteration": 2, "iterations": 8,
                                     "menu": [{"id": "panel-reuse", "title": "Reuse a panel"}]}, PlanRequest),
            "code": msgspec.convert({**common, "parent": parent, "plan": plan}, CodeRequest),
            "repair": msgspec.convert({**common, "plan": plan, "code": code, "error": "compile error: x"},
                                      RepairRequest)}


@pytest.mark.parametrize("target", PROBLEMS)
def test_plan_code_and_repair_prompts_share_a_long_stable_prefix(target):
    prompts = {kind: render(kind, req) for kind, req in requests(target).items()}
    prefixes = {p.prefix for p in prompts.values()}
    assert len(prefixes) == 1                      # one prefix for every role: one cache entry
    prefix = prefixes.pop()
    for kind, p in prompts.items():
        text = p.text
        assert text.startswith(prefix)
        # the first text that differs between calls comes after most of the prompt
        assert len(prefix) / len(text) > 0.75, (kind, len(prefix), len(text))
        for varying in ("the load queue was full", "Keep the B panel resident", "compile error: x"):
            assert varying not in prefix
    assert "# Optimization menu" in prefix and "- panel-reuse: " in prefix or target != "gemmini-sim"


def test_correctness_and_machine_are_worded_for_the_target():
    gem = {k: p.text for k, p in ((k, render(k, r)) for k, r in requests("gemmini-sim").items())}
    trn = {k: p.text for k, p in ((k, render(k, r)) for k, r in requests("trainium-sim").items())}
    assert "bit for bit" in gem["code"] and "bit for bit" in gem["repair"]
    assert all("bit for bit" not in t for t in trn.values())
    assert "within the problem's tolerance" in trn["code"] and "within the problem's tolerance" in trn["repair"]
    assert trn["plan"].startswith("You are an expert performance engineer for an AWS Trainium NeuronCore (simulated)")
    assert gem["plan"].startswith("You are an expert performance engineer for Gemmini, a systolic-array accelerator")
