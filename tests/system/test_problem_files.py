"""Problem files and parametric names through the command line, with real processes: the README's examples
speed up offline on both simulators, a run keeps its problem definition (a remote evaluator needs none of the
files, a resume works after they changed), bad files and sizes are one line and create nothing, and a problem
the offline heuristic cannot optimize ends normally after its starting kernel."""
from __future__ import annotations

import json
import re
import shlex
import shutil

import pytest

from tests.system.runkit import ROOT, endpoint_of, finish, launch, query, summary

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

EXAMPLES = ROOT / "problems" / "examples"


def readme_commands(target: str) -> list[list[str]]:
    """The commands of the README's "Optimizing your own kernel" section that use the target's example."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Optimizing your own kernel"):text.index("## Workers on other hosts")]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()]
    return [shlex.split(line) for line in lines if f"problems/examples/{target}/" in line]


@pytest.mark.parametrize("target", ["gemmini-sim", "trainium-sim"])
def test_the_readme_examples_speed_up_offline(tmp_path, target):
    commands = readme_commands(target)
    assert [c[2] for c in commands if c[2] == "run"] == ["run"], commands
    for i, command in enumerate(commands):
        assert command[:2] == ["python", "launch.py"]
        args = command[2:]
        if args[0] == "run":
            args += ["--out", str(tmp_path / f"run{i}"), "--evaluators", "2"]
        proc = launch(*args)
        out = finish(proc)
        assert proc.returncode == 0, out
        if args[0] == "run":
            speedup = float(re.search(r"Speedup: ([0-9.]+)x", out).group(1))
            assert speedup > 1, out
        if args[0] == "problems":
            assert "my-gemm" in out


def copy_example(target: str, into, **replace) -> None:
    for f in (EXAMPLES / target).iterdir():
        text = f.read_text()
        for old, new in replace.items():
            text = text.replace(old, new)
        (into / f.name).write_text(text)


def test_a_run_keeps_its_problem_file(tmp_path):
    copy_example("gemmini-sim", tmp_path)
    run = tmp_path / "run"
    proc = launch("run", "--problem-file", str(tmp_path / "my_gemm.toml"), "-T", "1", "-B", "2", "-N", "2", "-K", "1",
                  "--heartbeat-s", "0.1", "--evaluators", "0", "--bind", "tcp://127.0.0.1:*", "--out", str(run))
    endpoint = endpoint_of(run)
    for f in ("my_gemm.toml", "my_gemm.c", "my_gemm_reference.py"):   # read once, when the run started
        (tmp_path / f).unlink()
    worker = launch("worker", "--role", "evaluator", "--connect", endpoint, "--secret-file", str(run / "secret"),
                    "--target", "gemmini-sim")
    out = finish(proc)
    assert proc.returncode == 0 and "Speedup:" in out, out
    finish(worker, timeout=30)
    first = summary(run)
    assert query(run, "SELECT COUNT(*) FROM evals")[0][0] == first["evaluations"] >= 2

    # the file comes back at another size: the resumed run goes on with the definition it stored
    copy_example("gemmini-sim", tmp_path, **{"I = 256": "I = 128"})
    out = finish(launch("run", "--resume", str(run), "-T", "2", "--evaluators", "2"))
    resumed = summary(run)
    assert resumed["replayed_results"] >= first["evaluations"] and resumed["best_latency"] <= first["best_latency"], out
    problem = json.loads(query(run, "SELECT value FROM meta WHERE key = 'problem'")[0][0])
    assert problem["dims"] == {"I": 256, "J": 192, "K": 320}
    assert sorted(problem["definition"]["files"]) == ["my_gemm.c", "my_gemm.toml", "my_gemm_reference.py"]


def test_bad_problem_files_and_sizes_are_one_line_and_create_nothing(tmp_path):
    copy_example("gemmini-sim", tmp_path, **{'name = "A"\nshape = ["I", "K"]\ndtype = "int8"':
                                             'name = "A"\nshape = ["I", "K"]\ndtype = "int7"'})
    (tmp_path / "my_gemm.toml").rename(tmp_path / "bad.toml")
    bad = str(tmp_path / "bad.toml")
    dtype = "error: bad.toml: inputs[0].dtype: 'int7' is not one of int8, int32, float32"
    cases = [
        (["run", "--problem-file", bad, "--out", str(tmp_path / "r1")], dtype),
        (["eval", "--problem-file", bad, "builtin:start"], dtype),
        (["problems", "--problems-dir", str(tmp_path)], dtype),
        (["run", "--problem", "gemm-0x16x16", "--out", str(tmp_path / "r2")],
         "error: gemm-0x16x16: I, J, K must each be at least 1"),
        (["run", "--target", "trainium-sim", "--problem", "rmsnorm-100x512", "--out", str(tmp_path / "r3")],
         "error: rmsnorm-100x512: trainium-sim's rmsnorm kernels need M a multiple of 128, M <= 8192, N <= 7168"),
        (["run", "--problem-file", str(EXAMPLES / "trainium-sim" / "my_rmsnorm.toml"), "--target", "gemmini-sim",
          "--out", str(tmp_path / "r4")],
         "error: --target gemmini-sim conflicts with my_rmsnorm.toml, which is for trainium-sim"),
    ]
    for args, message in cases:
        proc = launch(*args)
        out = finish(proc, timeout=60).strip()
        assert proc.returncode == 2 and out.startswith(message) and "\n" not in out, (args, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "my_gemm.c", "my_gemm_reference.py"]


def test_a_problem_without_offline_moves_ends_after_its_starting_kernel(tmp_path):
    copy_example("gemmini-sim", tmp_path, **{'family = "gemm"\n': ""})   # its own semantics: no family
    run = tmp_path / "run"
    proc = launch("run", "--problem-file", str(tmp_path / "my_gemm.toml"), "--out", str(run), "--evaluators", "1")
    out = finish(proc)
    assert proc.returncode == 0, out
    assert ("Stopped: no offline moves for this problem; use --model (the heuristic knows the gemmini-sim gemm and "
            "conv3x3 families; my-gemm declares no family); 0 iterations, 1 evaluation in ") in out
    assert "Speedup: 1.00x" in out and (run / "best.c").read_text() == (tmp_path / "my_gemm.c").read_text()
    assert query(run, "SELECT COUNT(*) FROM jobs WHERE kind != 'eval'") == [(0,)]
