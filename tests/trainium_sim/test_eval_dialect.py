"""`launch.py eval` needs no flag for either NKI dialect: a kernel evaluated on its own is judged under the ISA
profile of the dialect it imports (nki1 for neuronxcc.nki, nki2 for `import nki`); a profile named with --isa
still refuses a kernel in the other dialect."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners import get_target

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "hw_runners" / "trainium_sim" / "problems"


@pytest.mark.system     # building trainium-sim asks the compiler for its paths
def test_each_trainium_target_names_the_profile_of_a_kernels_dialect():
    v1, v2 = ((PROBLEMS / "rmsnorm" / f).read_text() for f in ("naive.py", "naive_nki2.py"))
    for name in ("trainium-sim", "trainium"):
        target = get_target(name)
        assert (target.profile_for(v1), target.profile_for(v2)) == ("nki1", "nki2")
        assert target.profile_for("import numpy\n") is None and target.profile_for(v1 + "\nimport nki\n") is None


@pytest.mark.system     # launch.py in a child process
def test_eval_judges_a_v2_kernel_without_a_flag_and_refuses_it_under_nki1(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text((PROBLEMS / "rmsnorm" / "naive_nki2.py").read_text())

    def evaluate(*extra):
        out = subprocess.run([sys.executable, "launch.py", "eval", "--target", "trainium-sim", "--problem", "rmsnorm",
                              "--json", *extra, str(kernel)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        return json.loads(out.stdout)

    plain = evaluate()
    assert plain["correct"] and plain["feedback"]["platform"] == "trn2", plain
    refused = evaluate("--isa", "nki1")
    assert refused["error_kind"] == "policy" and "--isa nki2" in refused["error"]


@pytest.mark.system     # a whole run: coordinator, evaluators and the offline agents
def test_a_run_from_a_v2_kernel_file_takes_the_nki2_profile(tmp_path):
    from tests.system.runkit import finish, launch
    kernel, run = tmp_path / "start.py", tmp_path / "run"
    kernel.write_text((PROBLEMS / "rmsnorm" / "naive_nki2.py").read_text())
    out = finish(launch("run", "--target", "trainium-sim", "--problem", "rmsnorm-256x2048", "--kernel", str(kernel),
                        "--out", str(run), "-T", "1", "--evaluators", "2"))
    assert "Speedup:" in out, out
    assert json.loads((run / "config.json").read_text())["task"]["isa"] == "nki2"
    assert "neuronxcc" not in (run / "best.py").read_text()
