"""Gemmini configurations as data (configs/*.toml) and the FP32DefaultConfig machine: the fast tier checks the
data, the choice of a configuration per problem, float problem files and the fused multiply-add model used
as the bit-exact reference; the system tier evaluates a float GEMM bit-exactly against that model and within
tolerance of numpy."""
from __future__ import annotations

import dataclasses
import textwrap
import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from types import SimpleNamespace

from autocomp_zmq.hw_runners.base import Problem, get_target, target_class
from autocomp_zmq.hw_runners.gemmini_sim import configs
from autocomp_zmq.hw_runners.gemmini_sim.timing import TimingConfig
from autocomp_zmq.hw_runners.problemfile import DefinitionError, read

EXAMPLES = Path(__file__).resolve().parents[2] / "problems" / "examples" / "gemmini-sim-fp32"

# The PE model as numpy-free Python, used as a problem file's reference below: a float32 fused multiply-add
# (exact product and sum, one rounding to nearest even) and the order gemm_fp32.c makes the array add in.
FMA_MODEL = '''
from fractions import Fraction
import numpy as np

def fmaf(a, b, c):
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    f = np.float32(float(exact))      # float64 then float32 may round twice: look at the neighbours
    cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    def key(x):
        return (abs(Fraction(float(x)) - exact), int(np.array(x, np.float32).view(np.uint32)) & 1)
    return min(cands, key=key)

def gemm_tiles(A, B, dim=4, fused=True):
    """C as gemm_fp32.c computes it: per 4x4 output tile, per k tile a column sum that starts at +0 and
    meets the dim weight rows in k order (zero padded), then the accumulator's float32 add across k tiles."""
    I, K = A.shape
    J = B.shape[1]
    C = np.zeros((I, J), np.float32)
    for i in range(I):
        for j in range(J):
            acc = None
            for k0 in range(0, K, dim):
                s = np.float32(0)
                for k in range(k0, k0 + dim):
                    a = A[i, k] if k < K else np.float32(0)
                    b = B[k, j] if k < K else np.float32(0)
                    s = fmaf(a, b, s) if fused else np.float32(np.float32(a * b) + s)
                acc = s if acc is None else np.float32(acc + s)
            C[i, j] = acc
    return C

def reference(A, B):
    return gemm_tiles(A, B)
'''


def bare(**options):
    """gemmini-sim without its constructor (which asks gcc for its paths): for the fast tier."""
    t = object.__new__(target_class("gemmini-sim"))
    if options:
        t.options = SimpleNamespace(**options)
    return t


def _model():
    ns: dict = {}
    exec(FMA_MODEL, ns)   # the test's own code
    return ns


# ---- configurations as data ----------------------------------------------------------------------------------

def test_the_default_configuration_is_timing_configs_defaults():
    """int8-16x16.toml and TimingConfig's defaults describe the same machine (they cannot drift apart)."""
    int8 = configs.get("int8-16x16")
    assert int8.timing == TimingConfig()
    assert (int8.dim, int8.elem, int8.acc, int8.define) == (16, np.int8, np.int32, None)


def test_fp32_is_ConfigsFP_scala_FP32DefaultConfig():
    fp = configs.get("fp32-4x4")
    assert (fp.dim, fp.elem, fp.acc, fp.define) == (4, np.float32, np.float32, "GEMMINI_CONFIG_FP32")
    t = fp.timing
    # sp 256 KiB / 16-byte rows in 4 banks; acc 64 KiB / 16-byte rows in 1 bank; the FP config's pipeline
    assert (t.spad_rows, t.spad_banks, t.acc_rows, t.acc_banks) == (16384, 4, 4096, 1)
    assert (t.spad_read_delay, t.tile_latency, t.mesh_output_delay, t.acc_latency) == (1, 2, 0, 2)
    assert (t.mvin_scale_latency, t.acc_scale_latency, t.dma_inflight_cmds) == (4, 4, 5)
    assert fp.array_latency == 1 + 1 + 1 + 3 + 4 * 3 + 0 + 2
    for name in configs.PLATFORM:   # the SoC's parameters are the same in every configuration
        assert getattr(t, name) == getattr(TimingConfig(), name)


@pytest.mark.parametrize("name", ["int8-16x16", "fp32-4x4"])
def test_every_parameter_cites_the_scala_config(name):
    data = tomllib.loads((configs.DIRECTORY / f"{name}.toml").read_text())
    rtl = {f.name for f in dataclasses.fields(TimingConfig)} - set(configs.PLATFORM)
    assert set(data["timing"]) == rtl
    for key, entry in [*data["timing"].items(), *((k, data[k]) for k in ("dim", "elem", "acc"))]:
        assert entry["source"].strip(), key


def test_a_config_toml_without_a_source_is_refused(tmp_path, monkeypatch):
    text = (configs.DIRECTORY / "fp32-4x4.toml").read_text().replace(
        'acc_banks = { value = 1, source = "acc_banks = 1" }', "acc_banks = { value = 1 }")
    (tmp_path / "fp32-4x4.toml").write_text(text)
    with pytest.raises(ValueError, match="acc_banks must be"):
        configs._load(tmp_path / "fp32-4x4.toml")


def test_the_configuration_is_the_problems_else_the_options():
    assert configs.choose(None, None).name == "int8-16x16"
    assert configs.choose(None, "fp32-4x4").name == "fp32-4x4"
    assert configs.choose("fp32-4x4", None).name == "fp32-4x4"
    with pytest.raises(ValueError, match="runs on the int8-16x16 configuration"):
        configs.choose("int8-16x16", "fp32-4x4")
    with pytest.raises(ValueError, match="unknown gemmini-sim configuration 'fp16'"):
        configs.get("fp16")


def test_timing_overrides_apply_to_the_problems_configuration():
    sim = bare(config=None, timing=TimingConfig.from_dict({"dma_latency": 100, "acc_banks": 1}))
    float_problem = Problem(name="f", target="gemmini-sim", family="own:f", dims={}, description="", kernels={},
                            semantics=SimpleNamespace(config="fp32-4x4"))
    fp = sim.machine(float_problem)
    assert (fp.name, fp.timing.dma_latency, fp.timing.tile_latency, fp.timing.acc_banks) == ("fp32-4x4", 100, 2, 1)
    assert sim.machine(sim.parametric("gemm-16x16x16")).timing.acc_banks == 1


# ---- float problem files -------------------------------------------------------------------------------------

def _file(tmp_path: Path, *, config: str | None = "fp32-4x4", dtype: str = "float32", tolerance=None,
          ref: str | None = None, ctype: str = "float") -> Path:
    lines = ['name = "f"', 'target = "gemmini-sim"', f'signature = "void solution({ctype} A[I][K], {ctype} B[K][J], '
             f'{ctype} C[I][J])"', "dims = {I = 10, J = 12, K = 18}", 'kernel = "k.c"', 'reference = "ref.py"']
    if config:
        lines.append(f'config = "{config}"')
    if tolerance:
        lines.append(f"tolerance = {{atol = {tolerance[0]}, rtol = {tolerance[1]}}}")
    for kind, name, shape in (("inputs", "A", '["I", "K"]'), ("inputs", "B", '["K", "J"]'),
                              ("outputs", "C", '["I", "J"]')):
        lines += [f"[[{kind}]]", f'name = "{name}"', f"shape = {shape}", f'dtype = "{dtype}"']
    (tmp_path / "f.toml").write_text("\n".join(lines) + "\n")
    (tmp_path / "k.c").write_text((EXAMPLES / "gemm_fp32.c").read_text())
    (tmp_path / "ref.py").write_text(ref or (EXAMPLES / "gemm_fp32_reference.py").read_text())
    return tmp_path / "f.toml"


def test_a_float_file_loads_on_the_fp32_configuration(tmp_path):
    p = bare().problem_from_definition(read(_file(tmp_path, tolerance=(1e-5, 1e-5))))
    fam = p.semantics
    assert fam.config == "fp32-4x4" and fam.tolerance == (1e-5, 1e-5)
    assert [np.dtype(a.dtype).name for a in fam.args(p.dims)] == ["float32"] * 3
    x = fam.make_inputs(p.dims, 0, "full-range")
    assert x[0].dtype == np.float32 and np.abs(x[0]).max() <= 1


def test_elem_t_is_the_configurations_element(tmp_path):
    p = bare().problem_from_definition(read(_file(tmp_path, ctype="elem_t")))
    assert p.semantics.config == "fp32-4x4"


@pytest.mark.parametrize("config, dtype, message", [
    (None, "float32", "A is float32, but the int8-16x16 configuration's data is int8/int32"),
    ("fp32-4x4", "int8", r"signature: A is float32\[10, 18\] here but int8"),
    ("fp64", "float32", "config: 'fp64' is not one of"),
])
def test_float_files_say_what_is_wrong(tmp_path, config, dtype, message):
    with pytest.raises(DefinitionError, match=message):
        bare().problem_from_definition(read(_file(tmp_path, config=config, dtype=dtype)))


def test_the_config_option_chooses_for_a_file_that_names_none(tmp_path):
    sim = bare(config="fp32-4x4")
    assert sim.problem_from_definition(read(_file(tmp_path, config=None))).semantics.config == "fp32-4x4"


def test_the_fused_model_differs_from_separate_roundings():
    """The bit-exact check below tells a fused multiply-add from a rounded product plus a rounded sum."""
    m = _model()
    a, c = np.float32(1 + 2 ** -12), np.float32(-(1 + 2 ** -11))   # a * a = 1 + 2^-11 + 2^-24: a tie in float32
    assert m["fmaf"](a, a, c) == np.float32(2 ** -24)
    assert np.float32(np.float32(a * a) + c) == 0
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (6, 9)).astype(np.float32), rng.uniform(-1, 1, (9, 5)).astype(np.float32)
    assert not np.array_equal(m["gemm_tiles"](a, b), m["gemm_tiles"](a, b, fused=False))


# ---- the fp32 machine, evaluated ---------------------------------------------------------------------------

@pytest.mark.system
def test_a_float_gemm_is_bit_exact_to_the_fused_model(tmp_path):
    """Tolerance 0 against the fmaf model in the array's order: every output bit of 3 public and 1 hidden
    input sets (uniform, sparse, small integers) is the model's."""
    sim = get_target("gemmini-sim")
    p = sim.problem_from_definition(read(_file(tmp_path, ref=FMA_MODEL)))
    assert p.semantics.tolerance == (0.0, 0.0)
    r = sim.evaluate(p, p.kernel_source("start"))
    assert r.correct, r.error


@pytest.mark.system
def test_the_float_gemm_example_is_within_its_tolerance_of_numpy():
    sim = get_target("gemmini-sim")
    p = sim.problem_from_definition(read(EXAMPLES / "gemm_fp32.toml"))
    r = sim.evaluate(p, p.kernel_source("start"))
    assert r.correct, r.error
    assert r.feedback["dim"] == 4 and r.feedback["acc_kib_total"] == 64 and r.feedback["spad_kib_total"] == 256


@pytest.mark.system
def test_a_wrong_float_result_names_the_values(tmp_path):
    wrong = "import numpy as np\ndef reference(A, B):\n    return (A.astype(np.float64) @ B + 0.5).astype(np.float32)\n"
    sim = get_target("gemmini-sim")
    p = sim.problem_from_definition(read(_file(tmp_path, ref=wrong, tolerance=(1e-5, 1e-5))))
    r = sim.evaluate(p, p.kernel_source("start"))
    assert not r.correct and r.error_kind == "wrong_result"
    assert "expected" in r.error and "." in r.error.split("got ")[1]   # floats, not truncated to integers


@pytest.mark.system
def test_an_int8_problem_refuses_the_fp32_option():
    r = get_target("gemmini-sim", config="fp32-4x4").evaluate(
        get_target("gemmini-sim").parametric("gemm-16x16x16"), "void solution(void) {}")
    assert not r.correct and "runs on the int8-16x16 configuration" in r.error


@pytest.mark.system
def test_the_fp32_scale_units_negate_on_load_and_store(tmp_path):
    """mvin into the scratchpad and into the accumulator both multiply by config_ld's scale; mvout by
    config_st's (an fp32 multiply each: scale -1 negates exactly)."""
    kernel = textwrap.dedent("""
        void solution(float A[I][K], float B[K][J], float C[I][J]) {
          gemmini_extended_config_ex(WEIGHT_STATIONARY, NO_ACTIVATION, 0, 1, false, false);
          gemmini_extended3_config_ld(K * sizeof(float), -1.0f, false, 0);
          gemmini_extended3_config_ld(J * sizeof(float), 1.0f, false, 1);
          gemmini_extended_config_st(J * sizeof(float), NO_ACTIVATION, -1.0f);
          gemmini_extended_mvin(&A[0][0], 0, 4, 4);
          gemmini_extended_mvin2(&B[0][0], 4, 4, 4);
          gemmini_extended_preload(4, ACC_ADDR_BIT, 4, 4, 4, 4);
          gemmini_extended_compute_preloaded(0, GARBAGE_ADDR, 4, 4, 4, 4);
          gemmini_extended_mvout(&C[0][0], ACC_ADDR_BIT, 4, 4);
          gemmini_fence();
        }""")
    ref = "import numpy as np\ndef reference(A, B):\n    return (A.astype(np.float64) @ B).astype(np.float32)\n"
    path = _file(tmp_path, ref=ref, tolerance=(1e-6, 1e-6))
    path.write_text(path.read_text().replace("{I = 10, J = 12, K = 18}", "{I = 4, J = 4, K = 4}"))
    (tmp_path / "k.c").write_text(kernel)
    sim = get_target("gemmini-sim")
    p = sim.problem_from_definition(read(path))
    r = sim.evaluate(p, p.kernel_source("start"))
    assert r.correct, r.error
