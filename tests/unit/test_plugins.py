"""The one plug-in mechanism (plugins.py) and the SDK plug-ins import (sdk.py): tables of "module:Class" that
import nothing until a name is used, entry points that add or replace entries, errors that name the entry, a
chosen policy's options as flags, and plug-ins that need nothing but the SDK."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autocomp_zmq import plugins, sdk
from autocomp_zmq.agents.run.runconfig import ConfigError
from autocomp_zmq.agents.run.runflags import policy_flags
from autocomp_zmq.agents.workers import registry as agents
from autocomp_zmq.hw_runners import registry as targets

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a plug-in package as pip leaves one (a dist-info with entry points) on this process's path."""
    def install(dist: str, entry_points: str) -> None:
        info = tmp_path / f"{dist}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(entry_points)
        monkeypatch.syspath_prepend(str(tmp_path))
    return install


def test_an_entry_is_imported_only_when_loaded_and_every_failure_names_it(tmp_path, monkeypatch):
    assert plugins.load(plugins.Entry("dumps", "json:dumps", "built-in"), "policies")([1]) == "[1]"
    (tmp_path / "broken_at_import.py").write_text("raise RuntimeError('no licence server')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for path, says in [("json", 'write "module:Class"'), ("json:", 'write "module:Class"'),
                       ("no_such_module_here:X", "cannot import no_such_module_here"),
                       ("json:NoSuchThing", "json has no NoSuchThing"),
                       ("broken_at_import:X", "RuntimeError: no licence server")]:
        with pytest.raises(plugins.PluginError) as caught:
            plugins.load(plugins.Entry("mine", path, "demo (plug-in)"), "targets")
        assert says in str(caught.value) and "target 'mine' (demo (plug-in)" in str(caught.value), caught.value


def test_entry_points_add_entries_and_may_replace_a_built_in_one(installed):
    installed("demo_agents", "[autocomp_zmq.agents]\nplanner.tiny = tests.tiny_target.agent:TinyAgent\n"
                             "coder.heuristic = tests.tiny_target.agent:TinyAgent\n")
    planners, coders = agents.entries("planner"), agents.entries("coder")
    assert planners["tiny"].origin == "demo_agents (plug-in)" and planners["heuristic"].origin == "built-in"
    assert coders["heuristic"].path == "tests.tiny_target.agent:TinyAgent"
    assert agents.load("planner", "tiny").__name__ == "TinyAgent"


def test_built_in_targets_are_found_by_their_descriptors_and_know_their_names():
    found = targets.entries()
    assert {"gemmini-sim", "trainium-sim", "trainium", "cuda", "hostcpu"} <= set(found)
    assert found["gemmini-sim"].path == "autocomp_zmq.hw_runners.gemmini_sim.target:GemminiSim"
    assert found["hostcpu"].origin == "built-in (command folder)"
    for name in found:
        cls = targets.target_class(name)
        assert cls.name == name and cls.info().name == name and (cls.info().home / "target.toml").exists()


def test_a_subclass_of_a_built_in_target_keeps_its_descriptor():
    parent = targets.target_class("trainium-sim")
    bench_like = type("TracingSim", (parent,), {"__module__": __name__})     # defined elsewhere, as a bench's is
    assert bench_like.info().home == parent.info().home and bench_like.name == "trainium-sim"


def test_a_command_folder_on_the_target_path_is_a_target(monkeypatch):
    monkeypatch.setenv("AUTOCOMP_TARGET_PATH", str(TESTS / "command_target"))
    assert targets.entries()["fake-command"].origin == f"command folder {TESTS / 'command_target'}"
    assert targets.target_class("fake-command").home == TESTS / "command_target"
    monkeypatch.delenv("AUTOCOMP_TARGET_PATH")
    assert "fake-command" not in targets.target_names()


def test_a_chosen_policy_takes_its_own_options_as_flags(installed):
    installed("demo_policy", "[autocomp_zmq.policies]\ngreedy = tests.greedy_policy:GreedySearch\n")
    assert policy_flags(["--menu-size", "3"], "greedy") == {"menu_size": 3}
    assert policy_flags(["--menu-size=4"], "greedy") == {"menu_size": 4}
    for args, says in [(["--menu-sise", "3"], "did you mean --menu-size?"), (["--menu-size"], "needs a value"),
                       (["--beam", "2"], "search policy 'greedy' takes --menu-size"),
                       (["stray"], "no such option: stray")]:
        with pytest.raises(ConfigError, match=says.replace("?", r"\?")):
            policy_flags(args, "greedy")
    with pytest.raises(ConfigError, match="no such option: --menu-size .*run --help"):
        policy_flags(["--menu-size", "3"], None)          # the default policy's own options are declared flags
    with pytest.raises(ConfigError, match="unknown search policy 'hill'"):
        policy_flags(["--x"], "hill")


def test_the_sdk_offers_every_name_it_lists_and_refuses_others():
    assert sorted(dir(sdk)) == sorted(sdk.__all__)
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None, name
    assert sdk.Target.__module__ == "autocomp_zmq.hw_runners.base" and sdk.ProblemRef.__name__ == "ProblemRef"
    with pytest.raises(AttributeError, match="autocomp_zmq.sdk has no 'Coordinator'"):
        sdk.Coordinator       # noqa: B018


@pytest.mark.parametrize("plugin", ["tiny_target", "greedy_policy"])
def test_the_example_plug_ins_import_nothing_of_the_product_but_the_sdk(plugin):
    used = set()
    for path in (TESTS / plugin).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autocomp_zmq"):
                used.add(node.module)
            elif isinstance(node, ast.Import):
                used |= {a.name for a in node.names if a.name.startswith("autocomp_zmq")}
    assert used == {"autocomp_zmq.sdk"}
