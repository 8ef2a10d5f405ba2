"""The cuda target's built-in problems as data: each loads, declares its work, and has a naive and a tuned kernel;
every inline CUDA launch is on PyTorch's current stream (the judge times captured CUDA graphs, which a launch on the
legacy default stream would break); the inline-CUDA reader; and, where PyTorch and Triton are installed, each
problem's Triton kernel judged correct on the CPU (Triton's interpreter) at the small sizes its problem.toml gives."""
from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from pathlib import Path

import pytest

from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.cuda.cudasrc import SourceError, inline_cuda
from autocomp_zmq.hw_runners.cuda.problems import load_specs

PROBLEMS = Path(__file__).resolve().parents[2] / "hw_runners/cuda/problems"
SPECS = load_specs(PROBLEMS)
LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)


def test_thirteen_problems_of_kernelbench_kinds_with_their_work_declared():
    assert len(SPECS) >= 12
    families = {s.family for s in SPECS.values()}
    assert {"gemm", "conv", "norm", "softmax", "attention", "reduction", "elementwise"} <= families
    for spec in SPECS.values():
        assert spec.flops > 0 and spec.bytes > 0 and spec.atol > 0 and spec.rtol > 0, spec.name
        for role in ("naive", "tuned"):
            assert (spec.directory / f"{role}.py").is_file(), (spec.name, role)
    tags = {t for p in get_target("cuda").problems() for t in p.tags}
    assert {"level1", "level2", "tensor-core", "bandwidth"} <= tags


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_inline_cuda_launch_is_on_the_current_stream(name):
    for role in ("naive", "tuned"):
        for source in inline_cuda((SPECS[name].directory / f"{role}.py").read_text()):
            for config in LAUNCH.findall(source):
                args = [a for a in config.split(",") if a.strip()]
                assert len(args) == 4 and "getCurrentCUDAStream" in args[3], (name, role, config)


def test_the_inline_cuda_reader_follows_names_and_concatenations():
    code = ('from torch.utils.cpp_extension import load_inline\nHEAD = "#include <x>\\n"\nBODY = HEAD + "k();"\n'
            'ext = load_inline(name="a", cpp_sources="", cuda_sources=[BODY, "other();"])\n')
    assert inline_cuda(code) == ["#include <x>\nk();", "other();"]
    assert inline_cuda("import torch\n") == []
    with pytest.raises(SourceError, match="not a string literal"):
        inline_cuda("from torch.utils.cpp_extension import load_inline\nload_inline(name='a', cuda_sources=make())\n")


def small_problem(root: Path, name: str, sizes: dict) -> None:
    """A copy of problem `name` whose reference's module-level sizes are overridden (get_inputs and
    get_init_inputs read them when called)."""
    spec = SPECS[name]
    d = root / name
    d.mkdir()
    overrides = "".join(f"{k} = {v!r}\n" for k, v in sizes.items())
    (d / "reference.py").write_text(spec.reference.read_text() + "\n# smaller sizes for the CPU check\n" + overrides)
    shutil.copy(spec.directory / "tuned.py", d / "tuned.py")
    (d / "problem.toml").write_text(f'name = "{name}"\nfamily = "{spec.family}"\nflops = 1\nbytes = 1\n'
                                    f'dtype = "{spec.dtype}"\ntolerance = {{atol = {spec.atol}, rtol = {spec.rtol}}}\n')


# Triton 3.9's interpreter multiplies bf16 tl.dot operands as raw 16-bit integers, so bf16 GEMMs cannot be checked
# on the CPU (their outputs come back ~1e11 off); they are checked on a GPU (test_on_gpu.py)
CHECKED = sorted(n for n, s in SPECS.items() if "small" in tomllib.loads((s.directory / "problem.toml").read_text())
                 and not (s.dtype == "bfloat16" and s.family in ("gemm", "attention")))


@pytest.mark.system
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", CHECKED)
def test_the_tuned_triton_kernel_is_correct_on_the_cpu_at_small_sizes(name):
    pytest.importorskip("torch", reason="needs PyTorch (pip install -e '.[cuda]')")
    pytest.importorskip("triton", reason="needs Triton (pip install -e '.[cuda]')")
    code = (SPECS[name].directory / "tuned.py").read_text()
    if "triton" not in code:
        pytest.skip(f"{name}'s tuned kernel is CUDA: compiled with nvcc, run on a GPU")
    root = Path(tempfile.mkdtemp(prefix="cuda-small-"))
    root.chmod(0o755)
    try:
        small = tomllib.loads((SPECS[name].directory / "problem.toml").read_text())["small"]
        small_problem(root, name, small)
        target = get_target("cuda", device="cpu", problems_dir=root, warmup=1, iters=5, limits={"drop_root": False})
        r = target.evaluate(target.problem(name), code)
        assert r.correct, r.error
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.system
@pytest.mark.timeout(900)
def test_a_naive_kernels_inline_cuda_compiles_with_nvcc():
    """One naive kernel's CUDA (softmax's: each takes about a minute on 2 cores, so the others were compiled once,
    by hand, with the same call) through nvcc for sm_90 against PyTorch's headers, where nvcc is installed."""
    import shutil
    import sysconfig
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    cpp_extension = pytest.importorskip("torch.utils.cpp_extension", reason="needs PyTorch's headers")
    from autocomp_zmq.hw_runners.cuda.cudasrc import compile_check
    includes = cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]
    code = (SPECS["softmax"].directory / "naive.py").read_text()
    assert compile_check(code, includes, timeout_s=800) == []
    assert compile_check(code.replace("fmaxf(m, in[j])", "fmaxf(m, in[j]"), includes, timeout_s=800)[0]
