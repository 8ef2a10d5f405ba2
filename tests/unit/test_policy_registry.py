"""Search policies are found by name (--search), and the run store provides everything a policy records."""
from __future__ import annotations

import inspect

import pytest

from autocomp_zmq.agents.engine import policy
from autocomp_zmq.agents.store import RunStore
from autocomp_zmq.agents.engine.search import BeamSearch


def test_beam_is_built_in_and_an_unknown_name_lists_the_known_ones():
    assert policy.policy_class("beam") is BeamSearch
    with pytest.raises(policy.UnknownPolicyError, match="unknown search policy 'nope'; available: beam"):
        policy.policy_class("nope")


def test_the_run_store_implements_the_run_record_with_the_same_parameters():
    recorded = [name for name, _ in inspect.getmembers(policy.RunRecord, inspect.isfunction) if not name.startswith("_")]
    assert set(recorded) == {"add_job", "finished_job", "add_candidate", "add_eval", "add_plan", "set_beam"}
    for name in recorded:
        want = list(inspect.signature(getattr(policy.RunRecord, name)).parameters)
        have = list(inspect.signature(getattr(RunStore, name)).parameters)
        assert have == want, name
