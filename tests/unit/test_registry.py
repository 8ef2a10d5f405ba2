"""One table of agent implementations; each constructor takes only its own options."""
from __future__ import annotations

import pytest

from autocomp_zmq.agents.workers import registry
from autocomp_zmq.agents.workers.registry import RegistryError


def test_every_role_lists_its_builtin_implementations_and_has_a_default():
    assert set(registry.implementations("planner")) >= {"heuristic", "llm", "synthetic"}
    assert set(registry.implementations("repairer")) >= {"heuristic", "llm", "synthetic"}
    assert set(registry.implementations("evaluator")) >= {"target", "synthetic"}
    assert "heuristic" not in registry.implementations("evaluator")
    assert registry.load("evaluator").__name__ == "TargetEvaluator"
    assert registry.load("coder").__name__ == "HeuristicAgent"


def test_unknown_roles_and_implementations_are_named_with_the_choices():
    with pytest.raises(RegistryError, match="unknown role 'judge'; choose from planner, coder, repairer, evaluator"):
        registry.implementations("judge")
    with pytest.raises(RegistryError, match="role planner has no implementation 'nope'; choose from .*heuristic"):
        registry.load("planner", "nope")


@pytest.mark.parametrize("key", sorted(registry.BUILTIN))
def test_builtin_constructors_declare_their_options(key):
    role, _, name = key.partition(".")
    assert registry.accepts(registry.load(role, name)) is not None, f"{key} takes **options"


def test_construct_passes_only_what_the_class_takes_and_refuses_given_options_it_does_not():
    cls = registry.load("planner", "synthetic")
    offered = {"target": "gemmini-sim", "models": [], "latency_s": 0.25, "jitter": 0.0, "latency_dist": "uniform"}
    agent = registry.construct(cls, offered, {"latency_s": "--latency"})
    assert agent.latency_s == 0.25
    heuristic = registry.load("planner", "heuristic")
    registry.construct(heuristic, offered)                  # offered but not given: simply not passed
    with pytest.raises(RegistryError, match="--latency is not an option of heuristic"):
        registry.construct(heuristic, offered, {"latency_s": "--latency"})


def test_an_evaluator_is_built_with_the_target_options_and_other_roles_refuse_them():
    offered = {"target": "trainium", "target_options": {"platform": "trn2", "lnc": 2}, "models": []}
    evaluator = registry.construct(registry.load("evaluator", "target"), offered, {"target_options": "--target-option"})
    assert (evaluator.target.options.platform, evaluator.target.options.lnc) == ("trn2", 2)
    with pytest.raises(RegistryError, match="--target-option is not an option of heuristic"):
        registry.construct(registry.load("planner", "heuristic"), offered, {"target_options": "--target-option"})
