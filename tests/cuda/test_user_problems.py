"""A user's own cuda problem through the product's problem-file mechanism (--problem-file): a KernelBench-style
reference and starting kernel named by a TOML file, each bad field one line naming the file and the field, and the
problem judged like a built-in one (on the CPU check here)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.definition_files import DefinitionError, read

ROOT = Path(__file__).resolve().parents[2]
TOML = """name = "my-softmax"
target = "cuda"
description = "softmax of a (B, D) float32 matrix over D"
reference = "my_ref.py"
kernel = "my_kernel.py"
dims = {B = 64, D = 512}
flops = "5 * B * D"
bytes = "2 * 4 * B * D"
dtype = "float32"
"""


@pytest.fixture
def problem_file():
    d = Path(tempfile.mkdtemp(prefix="cuda-user-"))
    reference = (ROOT / "hw_runners/cuda/problems/softmax/reference.py").read_text()
    (d / "my_ref.py").write_text(reference.replace("B, D = 4096, 8192", "B, D = 64, 512"))
    (d / "my_kernel.py").write_text((ROOT / "hw_runners/cuda/problems/softmax/tuned.py").read_text())
    (d / "my-softmax.toml").write_text(TOML)
    for path in (d, *d.iterdir()):              # the sandbox may read them as nobody
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield d / "my-softmax.toml"
    shutil.rmtree(d, ignore_errors=True)


def test_a_problem_file_becomes_a_problem(problem_file):
    p = get_target("cuda").problem_from_definition(read(problem_file))
    assert (p.name, p.family, p.dims) == ("my-softmax", "own:my-softmax", {"B": 64, "D": 512})
    assert p.semantics.flops == 5 * 64 * 512 and p.semantics.bytes == 8 * 64 * 512 and p.semantics.atol == 1e-3
    assert "class Model" in p.description and "ModelNew" in p.kernel_source("naive")
    assert p.kernel_source("start") == p.kernel_source("naive") and p.semantics.small == {}


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace('dtype = "float32"', 'dtype = "int7"'), "my-softmax.toml: dtype: 'int7' is not one of"),
    (lambda t: t.replace('flops = "5 * B * D"\n', 'counted = ["flops"]\n'),
     "my-softmax.toml: counted: must list which of the given flops and bytes were counted"),
    (lambda t: t + "small = {B = 8, E = 4}\n",
     "my-softmax.toml: small.E: not a module-level integer constant of my_ref.py"),
    (lambda t: t.replace('kernel = "my_kernel.py"\n', ''), "my-softmax.toml: kernel: missing"),
    (lambda t: t.replace('"5 * B * D"', '"5 * B * E"'), "my-softmax.toml: flops: '5 * B * E' is not a formula"),
    (lambda t: t + "signature = 'x'\n", "my-softmax.toml: signature: not a field of a cuda problem file"),
])
def test_each_bad_field_is_one_line_naming_it(problem_file, edit, words):
    problem_file.write_text(edit(TOML))
    with pytest.raises(DefinitionError) as err:
        get_target("cuda").problem_from_definition(read(problem_file))
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.system
@pytest.mark.timeout(300)
def test_eval_of_a_problem_file_on_the_cpu_check(problem_file):
    pytest.importorskip("torch", reason="needs PyTorch (pip install -e '.[cuda]')")
    pytest.importorskip("triton", reason="needs Triton (pip install -e '.[cuda]')")
    out = subprocess.run([sys.executable, "launch.py", "eval", "--target", "cuda", "--problem-file", str(problem_file),
                          "--target-option", 'device="cpu"', "--target-option", "limits.drop_root=false",
                          "--target-option", "iters=5", "--target-option", "warmup=1", "--json", "builtin:naive"],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["correct"], out.stdout + out.stderr
    assert report["feedback"]["device"] == "cpu" and report["feedback"]["sets"] == 4
