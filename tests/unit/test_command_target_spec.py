"""Command targets as data (fast tier, nothing started): the [command] table's schema errors, the JSON line's
schema errors, and the hostcpu folder registered as a target with its problems and schedule variants."""
from __future__ import annotations

import json

import pytest

from autocomp_zmq.hw_runners.base import DescriptorError, target_info
from autocomp_zmq.hw_runners.command.spec import expand, load_command, load_problem
from autocomp_zmq.hw_runners.command.verdict import MalformedVerdict, read_verdict, to_report
from autocomp_zmq.hw_runners import get_target

GOOD = '[command]\nargv = ["{python}", "{home}/judge.py", "{candidate}"]\ncandidate = "kernel.c"\n'


def _load(tmp_path, text):
    (tmp_path / "target.toml").write_text(text)
    return load_command(tmp_path)


def test_a_good_command_table_expands_its_placeholders(tmp_path):
    spec = _load(tmp_path, GOOD + "timeout_s = 30\nenv = {OMP_NUM_THREADS = \"1\"}\n")
    assert spec.timeout_s == 30 and spec.env == {"OMP_NUM_THREADS": "1"}
    assert expand(spec.argv, {"python": "py", "home": "/h", "candidate": "/w/kernel.c"}) == \
        ["py", "/h/judge.py", "/w/kernel.c"]


@pytest.mark.parametrize("text, says", [
    ('target = "x"\n', "no [command] table"),
    ('[command]\nargv = "judge.sh"\ncandidate = "k.c"\n', "Expected `array`, got `str` - at `$.argv`"),
    ('[command]\nargv = ["judge.sh"]\n', "missing required field `candidate`"),
    ('[command]\nargv = []\ncandidate = "k.c"\n', "argv is empty"),
    ('[command]\nargv = ["judge.sh", "{problem_dir}"]\ncandidate = "k.c"\n', "unknown placeholders ['problem_dir']"),
    (GOOD + "timeout_s = 0\n", "timeout_s must be a positive number"),
    (GOOD + 'timeout_s = "ten"\n', "Expected `float`, got `str` - at `$.timeout_s`"),
    (GOOD + "timeout = 10\n", "unknown field `timeout`"),
    ('[command]\nargv = ["judge.sh"]\ncandidate = "../k.c"\n', "candidate must be a plain file name"),
    ('[command\n', "unreadable"),
])
def test_schema_errors_of_the_command_table_are_one_line_naming_the_file(tmp_path, text, says):
    with pytest.raises(DescriptorError) as err:
        _load(tmp_path, text)
    assert says in str(err.value) and str(tmp_path / "target.toml") in str(err.value)
    assert "\n" not in str(err.value)


def test_a_problem_naming_a_missing_variant_is_refused(tmp_path):
    (tmp_path / "naive.c").write_text("")
    (tmp_path / "problem.toml").write_text('family = "f"\ndescription = "d"\nstart = "naive.c"\n'
                                           '[[variant]]\nfile = "fast.c"\noptions = ["unroll"]\n')
    with pytest.raises(DescriptorError, match="names kernels that are not there: fast.c"):
        load_problem(tmp_path)


def _line(**fields) -> str:
    return json.dumps(fields) + "\n"


@pytest.mark.parametrize("stdout, says", [
    ("", "printed nothing on stdout"),
    ("compiling...\n" + _line(correct=True, latency=3.0, unit="us"), "printed 2 lines on stdout"),
    ("latency: 3 us\n", "not a JSON line"),
    (_line(latency=3.0, unit="us"), "missing required field `correct`"),
    (_line(correct="yes"), "Expected `bool`, got `str` - at `$.correct`"),
    (_line(correct=True, unit="us"), "said correct with latency None"),
    (_line(correct=True, latency=-1.0, unit="us"), "said correct with latency -1.0"),
    (_line(correct=True, latency=3.0, unit="cycles"), "its latency is in 'cycles'; the target's unit is 'us'"),
    (_line(correct=True, latency=3.0, unit="us", speedup=9), "unknown field `speedup`"),
    (_line(correct=False, error_kind="excellent"), "Invalid enum value 'excellent' - at `$.error_kind`"),
])
def test_every_malformed_verdict_is_named(stdout, says):
    with pytest.raises(MalformedVerdict) as err:
        read_verdict(stdout, "us")
    assert says in str(err.value)


def test_a_wellformed_verdict_becomes_a_report_with_its_noise():
    ok = to_report(read_verdict(_line(correct=True, latency=812.5, unit="us", noise={"reps": 9, "mad": 2.0},
                                      feedback={"gflops": 41.0}), "us"), "us", "warnings")
    assert ok.correct and ok.latency == 812.5 and ok.latency_unit == "us" and ok.stderr == "warnings"
    assert ok.feedback == {"gflops": 41.0, "noise": {"reps": 9, "mad": 2.0}}
    bad = to_report(read_verdict(_line(correct=False, error="output[3] = 1, expected 2", error_kind="wrong_result"),
                                 "us"), "us", "")
    assert not bad.correct and bad.error_kind == "wrong_result" and bad.error == "output[3] = 1, expected 2"


def test_hostcpu_is_a_command_target_declared_by_its_folder_alone():
    info = target_info("hostcpu")
    assert not (info.home / "__init__.py").exists() and info.latency_unit == "us"
    assert info.heuristic == "autocomp_zmq.hw_runners.command.heuristic:VariantHeuristic"
    target = get_target("hostcpu")
    assert target.command().candidate == "kernel.c"
    problems = {p.name: p for p in target.problems()}
    assert set(problems) == {"gemm-256x256x256", "softmax-1024x1024", "sum-16m"}
    for problem in problems.values():
        folder, spec = target.problem_spec(problem)
        assert "void solution" in problem.kernel_source() or "float solution" in problem.kernel_source()
        assert len(spec.variant) >= 2 and (folder / "entry.c").exists()
        assert spec.harness["reference"] in ("gemm", "softmax", "sum")


def test_the_target_path_names_target_folders_or_folders_of_them(monkeypatch, tmp_path):
    from autocomp_zmq.hw_runners.registry import command_folders
    from tests.conftest import ROOT
    fake = ROOT / "tests" / "command_target"
    monkeypatch.setenv("AUTOCOMP_TARGET_PATH", f"{tmp_path / 'missing'}:{fake.parent}")
    found = command_folders()
    assert found[0].name == "hostcpu" and fake in found       # built-in first; tests/ holds one target folder
    monkeypatch.setenv("AUTOCOMP_TARGET_PATH", str(fake))
    assert command_folders()[1:] == [fake]
