"""--isa fine on gemmini-sim: the loop FSMs and Gemmini's software library are rejected with a clear
message (by name before compiling, and by the trusted replayer's count of FSM-issued instructions
whatever the source looks like), the hardware loop is reported as the upper bound, the menu and the
prompt pack show only what the profile allows, and runs start from the compiler-style kernel."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from autocomp_zmq.agents.workers.llm.prompts import pack
from autocomp_zmq.hw_runners.pack import for_profile
from autocomp_zmq.agents.run.execute import RunConfig, RunError, execute
from autocomp_zmq.agents.run.runstart import menu_of
from autocomp_zmq.hw_runners import get_target
from tests.system.runkit import ROOT
from autocomp_zmq.hw_runners.base import IsaProfile, UnknownIsaError, target_info
from autocomp_zmq.hw_runners.gemmini_sim.target import GemminiSim
from .simkit import PROBLEM_DIR, assert_correct, conv, gemm

FSM_MENU_OPTIONS = {"loop-ws", "loop-ws-blocks", "loop-conv-ws", "conv-flatten-loop-ws"}
# (file, the call it makes, a small problem of its family)
FORBIDDEN = [("gemm_hwloop.c", "gemmini_loop_ws", gemm(64, 64, 64)),
             ("conv_hwloop.c", "gemmini_loop_conv_ws", conv(16, 16)),
             ("gemm_library.c", "tiled_matmul_auto", gemm(64, 64, 64)),
             ("conv_library.c", "tiled_conv_auto", conv(16, 16))]


def fine(problem):
    return dataclasses.replace(problem, isa="fine")


@pytest.mark.parametrize("file, call, problem", FORBIDDEN, ids=[f[1] for f in FORBIDDEN])
def test_fine_rejects_the_loop_fsms_and_library_calls_by_name(sim, file, call, problem):
    code = (PROBLEM_DIR / file).read_text()
    r = sim.judge(fine(problem), code)
    assert not r.correct and r.error_kind == "policy"
    assert f"{call} is not available under --isa fine" in r.error
    assert "kernels issue mvin, preload, compute and mvout" in r.error      # the profile's own description
    line = int(r.error.split("line ")[1].split(":")[0])
    assert call in code.splitlines()[line - 1]          # the message points at the call


@pytest.mark.system
def test_the_same_kernels_are_accepted_under_the_full_profile(sim):
    assert_correct(sim.evaluate(gemm(64, 64, 64), (PROBLEM_DIR / "gemm_hwloop.c").read_text()))


def test_names_in_comments_and_strings_are_not_uses(sim):
    code = (PROBLEM_DIR / "gemm_baseline.c").read_text().replace(
        "void solution(", '// gemmini_loop_ws would be faster\nstatic const char *note = "tiled_matmul_auto";\n'
                          "void solution(")
    from autocomp_zmq.hw_runners.isa_check import first_use
    assert first_use(code, target_info("gemmini-sim").isa_profile("fine").forbid, "c") is None


@pytest.mark.system
def test_fsm_work_is_rejected_by_the_trusted_replayer_whatever_the_source_says(sim, monkeypatch):
    """A profile whose name list misses the call the kernel uses (here the shim's own entry point) still
    rejects the kernel: the replayer counts the instructions the loop FSMs issued."""
    info = target_info("gemmini-sim")
    narrow = IsaProfile("fsm-free", forbid=("gemmini_loop_ws", "gemmini_loop_conv_ws"))
    monkeypatch.setattr(GemminiSim, "info", classmethod(
        lambda cls: dataclasses.replace(info, isa_profiles=(*info.isa_profiles, narrow))))
    code = (PROBLEM_DIR / "gemm_library.c").read_text()
    mainline = get_target("gemmini-sim", timing={"library_hwloop": 1})   # every tile on the loop FSM
    r = mainline.evaluate(dataclasses.replace(gemm(64, 64, 64), isa="fsm-free"), code)
    assert not r.correct and r.error_kind == "policy"
    assert "were issued by the loop FSMs, which --isa fsm-free does not allow" in r.error


@pytest.mark.system
def test_feedback_reports_the_hardware_loop_as_the_upper_bound(sim):
    p = gemm(64, 64, 64)
    hw = sim.evaluate(p, (PROBLEM_DIR / "gemm_hwloop.c").read_text())
    r = sim.evaluate(fine(p), (PROBLEM_DIR / "gemm_tuned.c").read_text())
    assert_correct(r)
    bound = r.feedback["upper_bound"]
    assert bound["name"] == "the hardware loop" and bound["cycles"] == hw.latency
    assert bound["fraction"] == pytest.approx(hw.latency / r.latency)
    assert f"the hardware loop takes {hw.latency:,} cycles on this problem; this kernel is at " \
           f"{hw.latency / r.latency:.1%} of the hardware loop" in r.feedback_text
    assert "upper_bound" not in sim.evaluate(p, (PROBLEM_DIR / "gemm_tuned.c").read_text()).feedback


@pytest.mark.system
@pytest.mark.parametrize("problem", [gemm(64, 128, 32), conv(16, 32)], ids=["gemm", "conv"])
def test_the_compiler_style_baseline_is_correct_and_distinct_from_naive(sim, problem):
    family = "gemm" if problem.family == "gemm" else "conv"
    base = (PROBLEM_DIR / f"{family}_baseline.c").read_text()
    naive = (PROBLEM_DIR / f"{family}_naive.c").read_text()
    r = sim.evaluate(fine(problem), base)
    assert_correct(r)
    n = sim.evaluate(problem, naive)
    # a config per load, as a compiler emits them, and no reuse: every tile is loaded once per use
    assert r.feedback["instructions"]["config"] >= r.feedback["instructions"]["mvin"]
    assert r.feedback["instructions"]["config"] > 10 * n.feedback["instructions"]["config"]
    assert r.feedback["traffic_ratio"] >= n.feedback["traffic_ratio"]


def test_every_problem_has_a_baseline_kernel():
    for p in get_target("gemmini-sim").problems():
        assert "baseline" in p.kernels and "void solution(" in p.kernel_source("baseline")


def test_menu_and_prompt_pack_show_only_what_the_profile_allows():
    sim = get_target("gemmini-sim")
    info = sim.info()
    full, fine_menu = (menu_of(sim, info.isa_profile(n)) for n in ("full", "fine"))
    assert FSM_MENU_OPTIONS <= {o.id for o in full}
    assert not FSM_MENU_OPTIONS & {o.id for o in fine_menu}
    assert {o.id for o in full} - {o.id for o in fine_menu} == FSM_MENU_OPTIONS
    assert not [o.id for o in fine_menu if any(w in o.title + o.description for w in ("loop_", "tiled_"))]
    p_full, p_fine = (pack("gemmini-sim", n, "gemm")["prefix"] for n in ("full", "fine"))
    isa_full, isa_fine = (t.split("# Rules every kernel must follow")[0] for t in (p_full, p_fine))
    rules_full, rules_fine = (t.split("# Rules every kernel must follow")[1].split("# Optimization menu")[0]
                              for t in (p_full, p_fine))
    examples_full, examples_fine = (t.split("# Examples of correct kernels")[1] for t in (p_full, p_fine))
    assert "## 7. Hardware loop FSMs" in isa_full and "## 7. Hardware loop FSMs" not in isa_fine
    assert "## 8. Gemmini's software library" not in isa_fine
    assert "gemmini_loop_ws(" in examples_full and "gemmini_loop_ws(" not in examples_fine
    assert "## ISA profile: fine" in isa_fine and "## ISA profile: fine" not in isa_full
    assert "Under --isa fine" in rules_fine and "Under --isa fine" not in rules_full
    assert "<!--" not in p_fine + p_full
    assert pack("gemmini-sim", "", "gemm") == pack("gemmini-sim", "full", "gemm")   # the default profile is full


def test_under_fine_no_rule_offers_what_rule_19_forbids():
    rules = pack("gemmini-sim", "fine", "gemm")["prefix"].split("# Rules every kernel must follow")[1]
    rules = rules.split("# Optimization menu")[0]
    before_19 = rules.split("## Under --isa fine")[0]
    for name in ("gemmini_loop_ws", "gemmini_loop_conv_ws", "tiled_matmul", "tiled_conv", "loop FSMs ("):
        assert name not in before_19, name
    numbers = [int(n) for n in __import__("re").findall(r"^(\d+)\. ", rules, __import__("re").M)]
    assert numbers == list(range(1, 20))            # one rule 6, 11 and 17 each, numbered as before
    full = pack("gemmini-sim", "full", "gemm")["prefix"].split("# Rules every kernel must follow")[1]
    assert "23 for `gemmini_loop_ws`" in full and "loop-FSM\n    arguments" in full


def test_menu_options_are_offered_to_their_problem_families():
    sim = get_target("gemmini-sim")
    profile = sim.info().isa_profile("full")
    gemm, conv = ({o.id for o in menu_of(sim, profile, f)} for f in ("gemm", "conv3x3"))
    assert {"loop-conv-ws", "conv-flatten-loop-ws", "bias-broadcast", "conv-input-reuse"} & gemm == set()
    assert {"loop-ws", "loop-ws-blocks"} & conv == set() and {"loop-conv-ws", "bias-broadcast"} <= conv
    assert {"tile-sizes", "double-buffer-spad", "weight-reuse"} <= gemm & conv
    prefix = pack("gemmini-sim", "full", "gemm")["prefix"]
    assert "- loop-ws: " in prefix and "- loop-conv-ws: " not in prefix


def test_for_profile_drops_marked_list_items():
    text = "## R\n1. a\n2. b <!-- isa: full -->\n   more b\n2. b' <!-- isa: fine -->\n   more b'\n3. c\n"
    assert for_profile(text, "full") == "## R\n1. a\n2. b\n   more b\n3. c\n"
    assert for_profile(text, "fine") == "## R\n1. a\n2. b'\n   more b'\n3. c\n"


def test_for_profile_drops_a_marked_section_with_its_subsections():
    text = "# T\nintro\n## A\n<!-- isa: full -->\na\n### A.1\na1\n## B\nb\n### C\n<!-- isa: fine, x -->\nc\n"
    assert for_profile(text, "fine") == "# T\nintro\n## B\nb\n### C\nc\n"
    assert for_profile(text, "full") == "# T\nintro\n## A\na\n### A.1\na1\n## B\nb\n"


def test_an_unknown_profile_is_one_clear_error():
    with pytest.raises(UnknownIsaError, match="target 'gemmini-sim' has no ISA profile 'fast'; it has full, fine"):
        get_target("gemmini-sim").problem("gemm-512x512x512", "fast")
    with pytest.raises(RunError, match="--isa: target 'gemmini-sim' has no ISA profile 'fast'"):
        execute(RunConfig.of(isa="fast", evaluators=0), out=None)
    # trainium-sim declares its NKI dialects as profiles, v1 the default (tests/trainium_sim/test_nki2_profile.py)
    assert [p.name for p in target_info("trainium-sim").isa_profiles] == ["nki1", "nki2"]


@pytest.mark.system
def test_eval_cli_judges_under_the_profile(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "launch.py", "eval", *args, "--json"], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)
    out = cli("builtin:hwloop", "-p", "gemm-256x256x256", "--isa", "fine")
    assert out.returncode == 1
    r = json.loads(out.stdout)
    assert r["error_kind"] == "policy" and "gemmini_loop_ws is not available under --isa fine" in r["error"]
    out = cli("builtin:baseline", "-p", "gemm-256x256x256", "--isa", "fine")
    assert out.returncode == 0 and json.loads(out.stdout)["feedback"]["upper_bound"]["name"] == "the hardware loop"


@pytest.mark.system
def test_a_fine_run_starts_from_the_baseline_and_reports_the_bound(tmp_path):
    s = execute(RunConfig.of(problem="gemm-64x1024x1024", isa="fine", iterations=1, beam=1, plans=1, codes=1,
                          evaluators=1), out=tmp_path / "run", live=False, progress=False)
    from autocomp_zmq.agents.store import RunStore
    store = RunStore(tmp_path / "run" / "run.db")
    assert store.meta("initial_code") == (PROBLEM_DIR / "gemm_baseline.c").read_text()
    assert store.meta("config")["task"]["isa"] == "fine"
    assert s["isa"] == "fine" and s["best_upper_bound"]["name"] == "the hardware loop"
    assert 0 < s["best_upper_bound"]["fraction"] < 1
    plans = store.db.execute("SELECT menu FROM plans").fetchall()
    assert plans and not any(o in row[0] for row in plans for o in FSM_MENU_OPTIONS)


def test_kernel_builtin_role_names_the_roles_there_are(tmp_path):
    with pytest.raises(RunError, match="has no built-in kernel 'nope'; it has builtin:naive, builtin:baseline"):
        execute(RunConfig.of(kernel="builtin:nope", evaluators=0), out=tmp_path / "run")
