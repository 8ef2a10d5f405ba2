"""KernelBench as it is published, for the cuda target: problem files whose reference lies anywhere on disk, `small`
read and checked, flops and bytes counted when a problem leaves them out, `builtin:start` for a problem file's
kernel, and `launch.py problems --kernelbench` importing a level folder unchanged (names, counted work, small sizes
derived for the CPU check, each failure's reason), whose written problem files `eval` then judges.

The KernelBench-format files below are this test's own (not KernelBench's): a ReLU at large sizes, a matmul, a
convolution whose bias shape is computed from a size, a loss with a scalar output, a linear layer with a float
constant whose forward needs real data (.item(): not on the meta device), and a broken one."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.cuda import kernelbench as kb
from autocomp_zmq.hw_runners.cuda.kbcount import int_constants
from autocomp_zmq.hw_runners.cuda.problems import ProblemSpecError, read_spec, with_small_sizes
from autocomp_zmq.hw_runners.definition_files import DefinitionError, materialize, read

ROOT = Path(__file__).resolve().parents[2]
HEAD = "import torch\nimport torch.nn as nn\n\n"
LEVEL = {
    "1_ReLU.py": HEAD + '''class Model(nn.Module):
    """Applies ReLU."""
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
''',
    "2_Matmul.py": HEAD + '''class Model(nn.Module):
    """C = A @ B."""
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)

M = 256 * 2
K = 1024
N = 512

def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]

def get_init_inputs():
    return []
''',
    "3_ConvBias.py": HEAD + '''class Model(nn.Module):
    """A convolution plus a per-channel bias."""
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return self.conv(x) + self.bias

batch_size = 16
in_channels = 3
out_channels = 64
height = width = 128
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
''',
    "4_MSELoss.py": HEAD + '''class Model(nn.Module):
    """Mean squared error: a scalar."""
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)

batch_size = 1024
dim = 2048

def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
''',
    "5_ScaledLinear.py": HEAD + '''class Model(nn.Module):
    """A linear layer scaled by a float constant over its largest output (data-dependent)."""
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.scale = scale

    def forward(self, x):
        y = self.linear(x)
        return y * (self.scale / max(1.0, y.abs().max().item()))

batch_size = 256
in_features = 4096
out_features = 1024
scale = 0.5

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, scale]
''',
    "10_Broken.py": HEAD + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) + self.offset

size = 64

def get_inputs():
    return [torch.rand(size, size)]

def get_init_inputs():
    return []
''',
}
NAMES = ["kb-L1-1_ReLU", "kb-L1-2_Matmul", "kb-L1-3_ConvBias", "kb-L1-4_MSELoss", "kb-L1-5_ScaledLinear",
         "kb-L1-10_Broken"]
NO_ROOT = ["--target-option", "limits.drop_root=false"]       # the test venv's Python is private to root
needs_torch = pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"),
                                 reason="counting runs PyTorch (pip install -e '.[cuda]')")


@pytest.fixture(scope="module")
def level(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kb") / "level1"
    folder.mkdir()
    for name, text in LEVEL.items():
        (folder / name).write_text(text)
    (folder / "README.md").write_text("not a problem\n")
    return folder


def problem_file(directory: Path, reference: str, kernel: str, extra: str = "") -> Path:
    path = directory / "mine.toml"
    path.write_text(f'name = "mine"\ntarget = "cuda"\nreference = {json.dumps(reference)}\n'
                    f'kernel = {json.dumps(kernel)}\n{extra}')
    return path


# -- finding 1: a reference anywhere on disk ------------------------------------------------------------------------
def test_a_reference_outside_the_problem_files_folder_is_read_and_stored_under_a_safe_name(level, tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "start.py").write_text(kb.starting_kernel(LEVEL["2_Matmul.py"]))
    (tmp_path / "files").mkdir()
    path = problem_file(tmp_path / "files", str(level / "2_Matmul.py"), "../kernels/start.py", "flops = 1\nbytes = 1\n")
    definition = read(path)
    stored = sorted(k for k in definition.files if k != "mine.toml")
    assert all(k.startswith("_outside/") and ".." not in k for k in stored), stored
    root = materialize(definition)
    assert all((root / k).resolve().is_relative_to(root.resolve()) for k in stored)
    p = get_target("cuda").problem_from_definition(definition)
    assert p.semantics.reference.read_text() == LEVEL["2_Matmul.py"]
    assert "ModelNew = Model" in p.kernel_source("start")
    for bad, words in (("", "must be the path of a file"), (str(level / "nope.py"), "cannot read")):
        problem_file(tmp_path / "files", bad, "../kernels/start.py", "flops = 1\nbytes = 1\n")
        with pytest.raises(DefinitionError, match=f"^mine.toml: reference: .*{words}"):
            read(path)


# -- finding 2: small, read and checked -----------------------------------------------------------------------------
def test_small_is_read_into_the_spec_and_names_the_references_integer_constants(level, tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "reference.py").write_text(LEVEL["5_ScaledLinear.py"])
    (d / "problem.toml").write_text('flops = 1\nbytes = 1\nsmall = {batch_size = 8, in_features = 64}\n')
    assert read_spec(d).small == {"batch_size": 8, "in_features": 64}
    for small, words in (("{scale = 1}", "small.scale: not a module-level integer constant of reference.py "
                                         "(its constants: batch_size, in_features, out_features)"),
                         ("{batch_size = 0}", "small.batch_size: must be an integer >= 1")):
        (d / "problem.toml").write_text(f'flops = 1\nbytes = 1\nsmall = {small}\n')
        with pytest.raises(ProblemSpecError, match="problem.toml: " + words.replace("(", r"\(").replace(")", r"\)")):
            read_spec(d)
    path = problem_file(tmp_path, str(level / "5_ScaledLinear.py"), str(level / "5_ScaledLinear.py"),
                        "flops = 1\nbytes = 1\nsmall = {dim = 3}\n")
    with pytest.raises(DefinitionError, match="^mine.toml: small.dim: not a module-level integer constant of "
                                              "5_ScaledLinear.py"):
        get_target("cuda").problem_from_definition(read(path))


def test_small_sizes_are_written_where_they_are_assigned_so_values_computed_from_them_follow():
    source = LEVEL["3_ConvBias.py"]
    assert int_constants(source) == {"batch_size": 16, "in_channels": 3, "out_channels": 64, "height": 128,
                                     "width": 128, "kernel_size": 3}
    small = with_small_sizes(source, {"out_channels": 8, "width": 32})
    scope = {"nn": SimpleNamespace(Module=object)}      # no torch needed to read the sizes back
    exec(small.replace(HEAD, ""), scope)
    assert (scope["out_channels"], scope["height"], scope["width"], scope["bias_shape"]) == (8, 128, 32, (8, 1, 1))
    assert with_small_sizes(LEVEL["2_Matmul.py"], {"M": 64}).count("M = 64\n") == 1


# -- finding 3: builtin:start --------------------------------------------------------------------------------------
def test_builtin_start_is_a_problem_files_own_kernel_and_naive_still_names_it(level, tmp_path):
    (tmp_path / "start.py").write_text(kb.starting_kernel(LEVEL["2_Matmul.py"]))
    p = get_target("cuda").problem_from_definition(read(problem_file(tmp_path, str(level / "2_Matmul.py"), "start.py",
                                                                     "flops = 1\nbytes = 1\n")))
    assert list(p.kernels)[0] == "start" and p.kernels["start"] == p.kernels["naive"]
    assert p.start_role(get_target("cuda").info().isa_profile()) == "start"


# -- finding 5: a folder of KernelBench files is not a --problems-dir -------------------------------------------
def test_problems_dir_of_kernelbench_files_is_one_error_line_pointing_at_kernelbench(level, tmp_path):
    from autocomp_zmq.launch import app
    out = CliRunner().invoke(app, ["problems", "--problems-dir", str(level)])
    assert out.exit_code == 2 and out.output.count("\n") == 1, out.output
    assert out.output.startswith(f"error: {level} has no problem files (*.toml); it holds 6 KernelBench problem "
                                 f"files: import them with `launch.py problems --kernelbench {level}")
    out = CliRunner().invoke(app, ["problems", "--problems-dir", str(tmp_path)])
    assert (out.exit_code, out.output.strip()) == (2, f"error: {tmp_path} has no problem files (*.toml)")


def test_a_level_folder_is_its_numbered_files_in_order_named_after_level_and_file(level):
    files = kb.kernelbench_files([level])
    assert [kb.problem_name(f) for f in files] == NAMES
    assert kb.problem_name(Path("/x/My Problems/7_A+B.py")) == "kb-7_A_B"
    with pytest.raises(kb.KernelBenchError, match="no KernelBench problem files"):
        kb.kernelbench_files([level.parent])


# -- findings 2, 4 and 5 through processes: counting, importing, judging -------------------------------------------
@pytest.mark.system
@needs_torch
@pytest.mark.timeout(300)
def test_flops_and_bytes_left_out_are_counted_in_a_child_and_marked_counted(level, tmp_path):
    target = get_target("cuda", limits={"drop_root": False})
    reference = str(level / "2_Matmul.py")
    p = target.problem_from_definition(read(problem_file(tmp_path, reference, reference)))
    spec = p.semantics
    assert (spec.flops, spec.bytes, spec.counted) == (2 * 512 * 1024 * 512, 4 * (512 * 1024 * 2 + 512 * 512),
                                                      ("flops", "bytes"))
    assert "counted by PyTorch's FLOP counter" in p.description and "meta device" in p.description


@pytest.fixture(scope="module")
def imported(level, tmp_path_factory):
    pytest.importorskip("torch", reason="importing runs PyTorch (pip install -e '.[cuda]')")
    out_dir = tmp_path_factory.mktemp("written")
    done = subprocess.run([sys.executable, "launch.py", "problems", "--kernelbench", str(level), "--write",
                           str(out_dir), "--json", *NO_ROOT], cwd=ROOT, capture_output=True, text=True, timeout=280)
    rows = {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}
    return done, rows, out_dir


@pytest.mark.system
@pytest.mark.timeout(300)
def test_a_level_folder_is_imported_each_file_with_its_work_small_sizes_or_reason(imported):
    done, rows, out_dir = imported
    assert done.returncode == 1 and list(rows) == NAMES, done.stdout + done.stderr
    assert [r["imported"] for r in rows.values()] == [True] * 5 + [False]
    relu, matmul, conv, loss, linear, broken = rows.values()
    assert (relu["bytes"], relu["counted"]) == (2 * 4 * 4096 * 393216, "meta")
    assert relu["outputs"] == [{"shape": [4096, 393216], "dtype": "float32"}]
    assert 2 * relu["small"]["batch_size"] * relu["small"]["dim"] <= 1 << 20
    assert matmul["flops"] == 2 * 512 * 1024 * 512 and matmul["small"] == {"K": 512}
    assert {"out_channels", "height"} <= set(conv["small"])        # bias_shape followed out_channels
    assert loss["outputs"] == [{"shape": [], "dtype": "float32"}]
    assert "scale" not in linear["small"] and "counted approximately, on the CPU" in linear["status"]
    assert (linear["flops"], linear["counted"]) == (2 * 256 * 4096 * 1024, "scaled")
    assert broken["status"].startswith("not imported: the reference does not run on the CPU") and \
        "offset" in broken["status"]
    assert sorted(p.name for p in out_dir.iterdir()) == sorted([f"{n}.toml" for n in NAMES[:5]]
                                                               + [f"{n}_start.py" for n in NAMES[:5]])
    assert f'reference = "{Path(relu["file"])}"' in (out_dir / "kb-L1-1_ReLU.toml").read_text()


@pytest.mark.system
@pytest.mark.timeout(300)
def test_an_imported_problem_is_listed_and_its_starting_kernel_judged_correct_on_the_cpu(imported):
    pytest.importorskip("triton", reason="the judge runs Triton (pip install -e '.[cuda]')")
    done, rows, out_dir = imported
    listed = subprocess.run([sys.executable, "launch.py", "problems", "--problems-dir", str(out_dir), "--json",
                             *NO_ROOT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == sorted(NAMES[:5]), listed.stderr
    out = subprocess.run([sys.executable, "launch.py", "eval", "--problems-dir", str(out_dir), "--problem",
                          "kb-L1-2_Matmul", "builtin:start", "--target-option", 'device="cpu"', *NO_ROOT,
                          "--target-option", "iters=5", "--target-option", "warmup=1", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=240)
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["correct"], out.stdout + out.stderr
