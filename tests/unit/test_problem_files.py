"""Problem files (hw_runners/problemfile.py and each target's userproblems.py): the shipped examples load,
and every kind of mistake is one line naming the file and the field. Fast tier: no process is started (the
targets are used without their constructors, which probe the compiler)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from autocomp_zmq.agents.run.problemsource import ProblemSourceError, read_definition, settle
from autocomp_zmq.hw_runners.base import target_class
from autocomp_zmq.hw_runners.problemfile import DefinitionError, materialize, read, scan
from autocomp_zmq.protocols.jobs import ProblemDefinition

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "problems" / "examples"


def bare(name: str):
    """A target without its constructor: problem files and names need only its descriptor."""
    return object.__new__(target_class(name))


def toml(meta: dict) -> str:
    def value(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)
    lines = [f"{k} = {value(v)}" for k, v in meta.items() if not (isinstance(v, list) and v and isinstance(v[0], dict))]
    for k, items in meta.items():
        if isinstance(items, list) and items and isinstance(items[0], dict):
            for item in items:
                lines += ["", f"[[{k}]]"] + [f"{a} = {value(b)}" for a, b in item.items()]
    return "\n".join(lines) + "\n"


GEMM = {"name": "my-gemm", "target": "gemmini-sim", "description": "C = A x B",
        "signature": "void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J])", "family": "gemm",
        "dims": {"I": 32, "J": 48, "K": 64}, "kernel": "k.c", "reference": "ref.py",
        "inputs": [{"name": "A", "shape": ["I", "K"], "dtype": "int8"},
                   {"name": "B", "shape": ["K", "J"], "dtype": "int8"}],
        "outputs": [{"name": "C", "shape": ["I", "J"], "dtype": "int8"}]}
GEMM_REF = ("import numpy as np\n\ndef reference(A, B):\n"
            "    return np.clip(A.astype(np.int32) @ B.astype(np.int32), -128, 127).astype(np.int8)\n")
NORM = {"name": "my-norm", "target": "trainium-sim", "description": "rmsnorm", "signature": "solution(a_tensor, g_tensor)",
        "family": "rmsnorm", "dims": {"M": 128, "N": 512}, "kernel": "k.py", "reference": "ref.py",
        "inputs": [{"name": "a_tensor", "shape": ["M", "N"], "dtype": "float32", "range": [-2.0, 2.0]},
                   {"name": "g_tensor", "shape": ["N"], "dtype": "float32", "range": [0.5, 1.5]}],
        "outputs": [{"name": "out", "shape": ["M", "N"], "dtype": "float32"}]}
NORM_REF = ("import numpy as np\n\ndef reference(a_tensor, g_tensor):\n    a = a_tensor.astype(np.float64)\n"
            "    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g_tensor[None, :]\n")


def write(tmp: Path, meta: dict, ref: str | None = GEMM_REF, kernel: str = "// mine\n") -> Path:
    (tmp / "my.toml").write_text(toml(meta))
    if ref is not None:
        (tmp / "ref.py").write_text(ref)
    (tmp / meta.get("kernel", "k.c")).write_text(kernel)
    return tmp / "my.toml"


def load(path: Path, target: str = "gemmini-sim"):
    return bare(target).problem_from_definition(read(path))


def edited(base: dict, **changes) -> dict:
    meta = json.loads(json.dumps(base))
    for key, value in changes.items():
        if value is None:
            meta.pop(key)
        else:
            meta[key] = value
    return meta


def test_the_shipped_examples_load_with_their_family_and_definition():
    g = load(EXAMPLES / "gemmini-sim" / "my_gemm.toml")
    assert (g.name, g.family, g.dims) == ("my-gemm", "gemm", {"I": 256, "J": 192, "K": 320})
    assert set(g.kernels) == {"start", "naive", "baseline", "tuned", "hwloop"}
    assert "numpy reference (my_gemm_reference.py)" in g.description and "checked exactly" in g.description
    assert g.definition.path == "my_gemm.toml" and set(g.definition.files) == {
        "my_gemm.toml", "my_gemm.c", "my_gemm_reference.py"}
    t = load(EXAMPLES / "trainium-sim" / "my_rmsnorm.toml", "trainium-sim")
    assert (t.family, t.dims, sorted(t.kernels)) == ("rmsnorm", {"M": 384, "N": 2048}, ["naive", "start", "tuned"])
    assert t.kernel_source("start").startswith('"""My starting kernel')


def test_a_file_without_a_family_is_its_own():
    meta = edited(GEMM, family=None, name="relu-gemm")
    p = load(write_tmp(meta))
    assert p.family == "own:relu-gemm" and set(p.kernels) == {"start"}


def write_tmp(meta, **kw):
    import tempfile
    return write(Path(tempfile.mkdtemp(prefix="problem-file-test-")), meta, **kw)


GEMMINI_ERRORS = [
    (edited(GEMM, inputs=[GEMM["inputs"][0], {**GEMM["inputs"][1], "dtype": "int7"}]),
     "my.toml: inputs[1].dtype: 'int7' is not one of int8, int32"),
    (edited(GEMM, signature=None), "my.toml: signature: missing"),
    (edited(GEMM, inputs=[{**GEMM["inputs"][0], "shape": ["I", "Q"]}, GEMM["inputs"][1]]),
     "my.toml: inputs[0].shape[1]: 'Q' is not a dim of this problem (dims: I, J, K)"),
    (edited(GEMM, family=None, signature="void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J], "
                                         "int8_t D[I][J])",
            outputs=GEMM["outputs"] + [{"name": "D", "shape": ["I", "J"], "dtype": "int8"}]),
     "my.toml: outputs: gemmini-sim's harness checks exactly one output array; this file declares 2 (C, D)"),
    (edited(GEMM, dims={"I": 32, "J": 48, "K": 0}), "my.toml: dims.K: must be an integer >= 1, not 0"),
    (edited(GEMM, colour="red"), "my.toml: colour: unknown key"),
    (edited(GEMM, target="trainium-sim"), "my.toml: target: the file is for 'trainium-sim', not gemmini-sim"),
    (edited(GEMM, family="fft"), "my.toml: family: 'fft' is not a gemmini-sim family (gemm, conv3x3, tinympc_u, "
                                  "tinympc_forward, tinympc_backward)"),
    (edited(GEMM, family="conv3x3"), "my.toml: dims: family 'conv3x3' has the dims P, C; this file declares I, J, K"),
    (edited(GEMM, signature="void solution(int8_t A[I][K], int32_t B[K][J], int8_t C[I][J])"),
     "my.toml: signature: B is int32[64, 48] here but int8[64, 48] in inputs"),
    (edited(GEMM, signature="void solution(int8_t A[I][K], int8_t C[I][J])"),
     "my.toml: signature: B is declared but is not a parameter of solution()"),
    (edited(GEMM, dims={"I": 32, "J": 48, "K": 64, "DIM": 2}), "my.toml: dims.DIM: dims become C macros"),
    (edited(GEMM, dims={"I": 32, "J": 48, "K": 64, "A": 2}), "my.toml: dims.A: dims become C macros"),
    (edited(GEMM, dims={"I": 16384, "J": 48, "K": 2048}),
     "my.toml: inputs[0].shape: 33,554,432 elements; at most 16,777,216 per array"),
    (edited(GEMM, tolerance={"atol": -1}), "my.toml: tolerance.atol: must be a number >= 0, not -1"),
    (edited(GEMM, family=None, reference=None), "my.toml: reference: missing"),
    (edited(GEMM, flops="I * Z"), "my.toml: flops: 'I * Z' is not a formula over the dims"),
]


@pytest.mark.parametrize("meta, message", GEMMINI_ERRORS, ids=[m.split(": ")[1] + "-" + str(i)
                                                             for i, (_, m) in enumerate(GEMMINI_ERRORS)])
def test_gemmini_file_errors_name_the_file_and_the_field(tmp_path, meta, message):
    with pytest.raises(DefinitionError) as err:
        load(write(tmp_path, meta))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("ref, message", [
    ("raise ZeroDivisionError('no')\n", "my.toml: reference: ref.py does not import: ZeroDivisionError: no"),
    ("def refrence(A, B):\n    return A\n", r"my.toml: reference: ref.py defines no function reference\(...\)"),
    ("import numpy as np\ndef reference(A, B):\n    return np.zeros((3, 3), np.int8)\n",
     r"my.toml: reference: reference\(\) returned C with shape \[3, 3\], not \[32, 48\]"),
    ("import numpy as np\ndef reference(A, B):\n    return A.astype(np.int32) @ B.astype(np.int32)\n",
     "my.toml: reference: reference\\(\\) returned C values that are not int8"),
    ("import numpy as np\ndef reference(A, B):\n    return (A.astype(np.int32) @ B.astype(np.int32) // 256)"
     ".astype(np.int8)\n", "my.toml: reference: disagrees with the built-in gemm family's reference"),
    ("def reference(A, B):\n    return A @\n", "my.toml: reference: ref.py does not import: SyntaxError"),
    ("def make_inputs(rng):\n    return {}\ndef reference(A, B):\n    return A\n",
     r"my.toml: reference: ref.py: make_inputs must take \(rng, shapes\)"),
])
def test_a_broken_reference_is_one_line(tmp_path, ref, message):
    with pytest.raises(DefinitionError, match="^" + message):
        load(write(tmp_path, GEMM, ref=ref))


def test_unreadable_files_are_named(tmp_path):
    path = write(tmp_path, GEMM)
    (tmp_path / "ref.py").unlink()
    with pytest.raises(DefinitionError, match=r"^my.toml: reference: cannot read .*ref.py: No such file"):
        read(path)
    (tmp_path / "ref.py").write_bytes(b"\xff\xfe")
    with pytest.raises(DefinitionError, match="^my.toml: reference: ref.py is not UTF-8 text"):
        read(path)
    (tmp_path / "ref.py").write_text("x" * 70_000)
    with pytest.raises(DefinitionError, match="^my.toml: reference: ref.py is 70,000 bytes; at most 65,536"):
        read(path)
    path.write_text("name = \n")
    with pytest.raises(DefinitionError, match="^my.toml: not valid TOML"):
        read(path)
    path.write_text(toml(edited(GEMM, reference="../ref.py")))        # outside the folder: read if it is there
    with pytest.raises(DefinitionError, match=r"^my.toml: reference: cannot read .*ref.py: No such file"):
        read(path)
    (tmp_path.parent / "ref.py").write_text("def reference(A, B):\n    return A @ B\n")
    try:
        stored = [name for name in read(path).files if name.endswith("ref.py")]
        assert len(stored) == 1 and stored[0].startswith("_outside/"), stored
    finally:
        (tmp_path.parent / "ref.py").unlink()
    with pytest.raises(DefinitionError, match="^nope.toml: cannot read"):
        read(tmp_path / "nope.toml")


TRAINIUM_ERRORS = [
    (edited(NORM, inputs=[{**NORM["inputs"][0], "dtype": "float8"}, NORM["inputs"][1]]),
     "my.toml: inputs[0].dtype: 'float8' is not one of "),
    (edited(NORM, family=None, signature="solution(a_tensor, eps, g_tensor)"),
     "my.toml: call: missing: parameter eps is not an input tensor"),
    (edited(NORM, signature="solution(g_tensor)", family=None), "my.toml: inputs[0]: a_tensor is not passed"),
    (edited(NORM, signature="solution(a_tensor g_tensor)"), "my.toml: signature: must be the kernel's parameters"),
    (edited(NORM, family="softmax"), "my.toml: family: 'softmax' is not a trainium-sim family with sizes as dims "
                                     "(gemm, layernorm, rmsnorm, transpose)"),
    (edited(NORM, outputs=[{"name": "y", "shape": ["M", "N"], "dtype": "float32"}]),
     "my.toml: outputs: family 'rmsnorm' has outputs out float32['M', 'N']"),
    (edited(NORM, dims={"M": 128}), "my.toml: inputs[0].shape[1]: 'N' is not a dim"),
    (edited(NORM, dims={"M": 16384, "N": 32768}), "my.toml: inputs[0].shape: 536,870,912 elements; at most "
                                                   "268,435,456 per tensor"),
    (edited(NORM, dims={"M": 8192, "N": 32768}), "my.toml: inputs: the inputs and outputs hold 2.00 GiB; at most 2 "
                                                 "GiB"),
]


@pytest.mark.parametrize("meta, message", TRAINIUM_ERRORS, ids=[str(i) for i in range(len(TRAINIUM_ERRORS))])
def test_trainium_file_errors_name_the_file_and_the_field(tmp_path, meta, message):
    with pytest.raises(DefinitionError) as err:
        load(write(tmp_path, meta, ref=NORM_REF, kernel="# mine\n"), "trainium-sim")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_trainium_tensor_past_64_mi_elements_is_accepted_within_the_memory_bound(tmp_path):
    # Autocomp's Llama logits kernels need 131 Mi elements in one tensor; before, 64 Mi was the cap
    logits = edited(NORM, dims={"M": 128256, "N": 1024}, family=None, signature="solution(a_tensor)",
                    inputs=[{**NORM["inputs"][0], "dtype": "bfloat16"}],
                    outputs=[{"name": "out", "shape": ["M", "N"], "dtype": "bfloat16"}])
    problem = load(write(tmp_path, logits, ref="def reference(a_tensor):\n    return a_tensor\n", kernel="# mine\n"),
                   "trainium-sim")
    assert problem.semantics.inputs[0].shape == (128256, 1024)


def test_trainium_reference_must_agree_with_its_family(tmp_path):
    wrong = NORM_REF.replace("* g_tensor[None, :]", "")
    with pytest.raises(DefinitionError, match="^my.toml: reference: disagrees with the built-in rmsnorm reference"):
        load(write(tmp_path, NORM, ref=wrong, kernel="# mine\n"), "trainium-sim")
    p = load(write(tmp_path, NORM, ref=NORM_REF, kernel="# mine\n"), "trainium-sim")
    spec = p.semantics
    inputs = spec.make_inputs(1)
    assert -2 <= inputs["a_tensor"].min() and inputs["a_tensor"].max() <= 2 and inputs["g_tensor"].min() >= 0.5


def test_a_problems_dir_finds_files_by_name_and_refuses_duplicates(tmp_path):
    write(tmp_path, GEMM)
    (tmp_path / "other.toml").write_text(toml(edited(GEMM, name="other")))
    assert sorted(scan(tmp_path)) == ["my-gemm", "other"]
    assert read_definition(None, tmp_path, "other").path == "other.toml"
    with pytest.raises(ProblemSourceError, match="has no problem 'mine'; it has my-gemm, other$"):
        read_definition(None, tmp_path, "mine")
    with pytest.raises(ProblemSourceError, match="give --problem-file or --problems-dir, not both"):
        read_definition(tmp_path / "my.toml", tmp_path, "other")
    (tmp_path / "again.toml").write_text(toml(edited(GEMM, name="other")))
    with pytest.raises(DefinitionError, match="^other.toml: name: 'other' is also the name in again.toml"):
        scan(tmp_path)


def test_a_file_sets_problem_and_target_unless_told_otherwise(tmp_path):
    definition = read(write(tmp_path, NORM, ref=NORM_REF))
    options = {"problem": "gemm-512x512x512", "target": "gemmini-sim"}
    settle(options, {}, definition)
    assert options == {"problem": "my-norm", "target": "trainium-sim"}
    with pytest.raises(ProblemSourceError, match="--target gemmini-sim conflicts with my.toml, which is for trainium-sim"):
        settle({}, {"target": "gemmini-sim"}, definition)
    with pytest.raises(ProblemSourceError, match="--problem x conflicts with my.toml, which defines 'my-norm'"):
        settle({}, {"problem": "x"}, definition)


def test_definitions_are_written_privately_and_never_outside(tmp_path):
    definition = read(write(tmp_path, GEMM))
    where = materialize(definition)
    assert (where / "ref.py").read_text() == GEMM_REF and where != tmp_path
    with pytest.raises(DefinitionError, match="bad name '../x.py'"):
        materialize(ProblemDefinition(path="a.toml", files={"a.toml": "", "../x.py": ""}))


def test_a_family_file_without_a_reference_uses_the_family_s(tmp_path):
    ranged = load(write(tmp_path, edited(NORM, reference=None), ref=None, kernel="# mine\n"), "trainium-sim")
    a = ranged.semantics.make_inputs(3)["a_tensor"]
    assert -2 <= a.min() and a.max() <= 2                  # its declared ranges
    plain = edited(NORM, reference=None, name="plain",
                   inputs=[{k: v for k, v in t.items() if k != "range"} for t in NORM["inputs"]])
    p = load(write(tmp_path, plain, ref=None, kernel="# mine\n"), "trainium-sim")
    assert abs(p.semantics.make_inputs(3)["a_tensor"]).max() > 2    # the rmsnorm reference's rows of other scales
    assert "against the built-in rmsnorm family's reference" in p.description


def test_trainium_arrays_pass_as_tuples_and_list_tables_as_lists(tmp_path):
    # Autocomp's conv2d harness passes padding and stride as tuples and the perms as lists, and its kernel
    # compares in_perm == [0, 1, 2, 3]: a tuple there took the wrong branch (AssertionError)
    meta = edited(NORM, call=["a_tensor", "g_tensor", [[0, 0], [1, 1]], {"list": [0, 1, 2, 3]}], family=None,
                  signature="solution(a_tensor, g_tensor, padding, in_perm)")
    problem = load(write(tmp_path, meta, ref=NORM_REF.replace("g_tensor):", "g_tensor, padding, in_perm):"),
                         kernel="# mine\n"), "trainium-sim")
    assert problem.semantics.call[2:] == (((0, 0), (1, 1)), [0, 1, 2, 3])


def test_the_paper_problems_are_defined_as_autocomps_harnesses_define_them():
    """So that Autocomp's starting kernels run unchanged: its conv2d harness passes rhs_dilation and NCHW perms
    (lists), its csa harness declares l and m float32 (before: an AssertionError, and 'output l must be a new HBM
    tensor bfloat16')."""
    from autocomp_zmq.hw_runners.trainium_sim.workloads import load_specs
    specs = load_specs(Path(__file__).resolve().parents[2] / "hw_runners" / "trainium_sim" / "problems")
    for name in ("conv2d", "conv2d-small"):
        kw = specs[name].kwargs
        assert kw["in_perm"] == kw["kern_perm"] == kw["out_perm"] == [0, 1, 2, 3] and kw["rhs_dilation"] == (1, 1)
    for name in ("csa-2048", "csa-4096", "csa-16384"):
        dtypes = {t.name: t.dtype for t in specs[name].outputs}
        assert dtypes == {"o": "bfloat16", "l": "float32", "m": "float32"}, name
