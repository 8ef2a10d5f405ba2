"""Target descriptors (target.toml): what the product reads from them, and one-line errors for bad ones."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.base import DescriptorError, TargetInfo, target_info

GOOD = """language = "L"
code_fence = "c"
latency_unit = "us"
evaluators = "devices"
sandbox = "none"
problems = "probs"
heuristic = "pkg.mod:Cls"
[pack]
isa = "isa.md"
menu = "menu.toml"
rules = "rules.md"
examples = ["ex/a.c"]
"""


def test_a_descriptor_resolves_its_paths_against_its_home(tmp_path):
    (tmp_path / "target.toml").write_text(GOOD)
    info = TargetInfo.load(tmp_path, "t")
    assert (info.latency_unit, info.evaluators, info.entry_point, info.heuristic) == ("us", "devices", "solution",
                                                                                    "pkg.mod:Cls")
    assert info.problems == (tmp_path / "probs").resolve() and info.examples == (tmp_path / "ex" / "a.c",)
    assert info.menu == tmp_path / "menu.toml"


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace('latency_unit = "us"\n', ""), "does not declare 'latency_unit'"),
    (lambda s: s.replace('"devices"', '"gpus"'), "evaluators must be one of cores, devices, not 'gpus'"),
    (lambda s: s + "= broken", "has no usable descriptor"),
])
def test_a_bad_descriptor_is_one_clear_error(tmp_path, edit, message):
    (tmp_path / "target.toml").write_text(edit(GOOD))
    with pytest.raises(DescriptorError, match=message):
        TargetInfo.load(tmp_path, "t")
    with pytest.raises(DescriptorError, match="no usable descriptor"):
        TargetInfo.load(tmp_path / "missing", "t")


def test_gemmini_sim_declares_what_the_product_reads():
    info = target_info("gemmini-sim")
    assert (info.code_fence, info.entry_point, info.latency_unit, info.evaluators) == ("c", "solution", "cycles",
                                                                                       "cores")
    assert (info.problems / "problems.toml").is_file() and info.isa.is_file() and info.menu.is_file()
    assert all(e.is_file() for e in info.examples) and info.heuristic == "autocomp_zmq.hw_runners.gemmini_sim.heuristic.agent:GemminiHeuristic"
