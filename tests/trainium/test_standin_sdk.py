"""Whole evaluations on the trainium target against a stand-in Neuron SDK that holds the runner to what AWS
documents (standin/README.md): NKI v1 on SDK 2.29 and NKI v2 on SDK 2.30 run through the runtime's C library
(libnrt), NKI v2 on SDK 2.32 through nrtpy, and the mismatches between a kernel's dialect and the host's SDK.
Each runs the real harness scripts in sandboxed processes."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.trainium import metrics
from autocomp_zmq.hw_runners.trainium import target as trn_target
from tests.trainium.sdk import Host, make_host
from tests.trainium.test_real_runner import GOOD_KERNEL, PROBLEM_TOML, REFERENCE

pytestmark = pytest.mark.system     # every test runs the harness in sandboxed processes
ROOT = Path(__file__).resolve().parents[2]

V2_KERNEL = """import numpy as np
import nki
import nki.language as nl
@nki.jit
def solution(a, b, scale, dtype, eps=0.0, pad=None):
    assert pad == ((0, 0), (1, 1)) and dtype == "bfloat16"
    return (a + b) * scale + eps
"""


@pytest.fixture
def world_readable_tmp():
    """A directory nobody can read (the sandbox may run the kernel as nobody; pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="trainium-standin-"))
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def write_problems(root: Path) -> Path:
    """scaled-add (a bf16 and an fp32 input) and scaled-add-f32 (both fp32: NKI v2 takes bf16 arrays from
    ml_dtypes, which the SDK's environment has and ours does not)."""
    for name, toml in (("scaled-add", PROBLEM_TOML),
                       ("scaled-add-f32", PROBLEM_TOML.replace('"scaled-add"', '"scaled-add-f32"')
                        .replace('dtype = "bfloat16"', 'dtype = "float32"'))):
        d = root / "problems" / name
        d.mkdir(parents=True)
        (d / "problem.toml").write_text(toml)
        (d / "reference.py").write_text(REFERENCE)
    return root / "problems"


def trainium(host: Host, problems: Path, monkeypatch, **options):
    """A trainium target on the stand-in host, with NeuronCores 0 and 1."""
    monkeypatch.setattr(trn_target, "host_cores", lambda lnc=None: (0, 1))
    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES", raising=False)
    monkeypatch.setattr(trn_target, "_CLAIMS", {})
    limits = sandbox.Limits(wall_s=60, cpu_s=60, mem_bytes=0, nofile=256, isolate_net=False, drop_root=False)
    monkeypatch.setenv("PATH", f"{host.bin}:{os.environ['PATH']}")     # the profiler, as on the host
    defaults = dict(python=str(host.python), nrtpy_python=str(host.nrtpy) if host.nrtpy else None,
                    libnrt=str(host.libnrt) if host.libnrt else "/nonexistent/libnrt.so.1",
                    problems_dir=problems, lock_dir=host.root / "locks", limits=limits, warmup=2, iters=5,
                    compile_cache=host.root / "neff-cache")
    return get_target("trainium", **{**defaults, **options})


@pytest.fixture
def sdk229(tmp_path, monkeypatch):
    host = make_host(tmp_path / "host", "2.29", nrtpy=False)
    return host, trainium(host, write_problems(tmp_path), monkeypatch)


@pytest.fixture
def sdk230(tmp_path, monkeypatch):
    host = make_host(tmp_path / "host", "2.30", nrtpy=False)
    return host, trainium(host, write_problems(tmp_path), monkeypatch)


@pytest.fixture
def sdk232(tmp_path, monkeypatch):
    host = make_host(tmp_path / "host", "2.32")
    return host, trainium(host, write_problems(tmp_path), monkeypatch)


# -- NKI v1 on Neuron SDK 2.29 -------------------------------------------------------------------------------

DEVICE_US = 20      # the stand-in libnrt's least time per execution (standin/libnrt/libnrt.c)


def test_v1_on_sdk_229_is_compiled_once_then_run_and_timed_through_libnrt(sdk229, tmp_path):
    host, target = sdk229
    trace = tmp_path / "trace.ntff"
    r = target.evaluate(target.problem("scaled-add"), GOOD_KERNEL, trace_path=trace)
    assert r.correct, r.error
    lat = r.feedback["latency_us"]
    assert r.latency_unit == "us" and r.latency == lat["p50"] and DEVICE_US <= lat["p50"] <= lat["p99"]
    assert (r.feedback["dialect"], r.feedback["timer"], r.feedback["core"], r.feedback["neff"]) == \
        ("v1", "libnrt", "0", "compiled")
    assert r.feedback["sdk"] == "Neuron SDK 2.29 (neuronx-cc 2.24.8799.0, nki 0.3.0)"
    assert r.feedback["profile"]["engine_busy"]["tensor"] == pytest.approx(0.75)   # neuron-profile capture + view
    assert 0 < r.utilization < 1 and 0 < r.roofline_fraction <= 1 and r.bound == "memory"
    first = r.feedback_text.splitlines()[0]
    assert "libnrt host timing: 100 runs" not in first and "libnrt host timing: 5 runs after 2 warm-up" in first
    assert "nrt_execute call on the host's clock" in first and "TensorE 75%" in r.feedback_text
    assert trace.read_text() == "trace of kernel.neff on NeuronCore 0\n" and trace.with_suffix(".neff").exists()
    assert set(r.feedback["seconds"]) >= {"compile_import", "compile_run", "device_run", "benchmark"}
    assert r.stdout == ""
    assert host.compiles() == ["baremetal nki1"]      # no nki.benchmark: it compiled the kernel a second time


def test_a_v1_kernel_is_compiled_once_and_its_neff_reused(sdk229):
    """Each v1 evaluation compiled the kernel twice (nki.baremetal for the outputs, then nki.benchmark for the
    times) and kept nothing."""
    host, target = sdk229
    problem = target.problem("scaled-add")
    first, again = target.evaluate(problem, GOOD_KERNEL), target.evaluate(problem, GOOD_KERNEL)
    assert first.correct and again.correct, (first.error, again.error)
    assert (first.feedback["neff"], again.feedback["neff"]) == ("compiled", "cached")
    assert first.feedback["input_seed"] != again.feedback["input_seed"]
    assert host.compiles() == ["baremetal nki1"]


def test_the_v1_compile_step_never_sees_the_inputs_it_is_judged_on(sdk229, tmp_path):
    """nki.baremetal used to run the kernel's Python on the very inputs it was judged on, in the process whose
    result file the verdict read."""
    _, standin = sdk229
    target = type(standin)()
    work_root = tmp_path / "work"
    work_root.mkdir()
    target.options = dataclasses.replace(standin.options, keep_workdir=True, work_root=work_root)
    spy = GOOD_KERNEL.replace("    return", "    import glob, numpy\n    open('seen.txt', 'a').write("
                                          "'%s %s\\n' % (sorted(glob.glob('in_*.npy')), bool(numpy.any(b))))\n    return")
    r = target.evaluate(target.problem("scaled-add"), spy)
    assert r.correct, r.error
    work = next(work_root.iterdir())
    assert (work / "seen.txt").read_text() == "[] False\n"      # compiled on zeros, no input files there


def test_the_reported_percentile_is_chosen_and_the_feedback_says_what_the_time_includes(sdk229):
    """The paper reported P99 (of 10 runs after 2 warm-ups); the runner reported P50 only and called the
    host-device transfer that neuron-bench times "launch overhead"."""
    _, standin = sdk229
    target = type(standin)()
    target.options = dataclasses.replace(standin.options, latency_percentile=99, warmup=2, iters=10)
    r = target.evaluate(target.problem("scaled-add"), GOOD_KERNEL)
    assert r.correct, r.error
    lat = r.feedback["latency_us"]
    assert r.latency == lat["p99"] == r.feedback["p99_us"] and r.feedback["p50_us"] == lat["p50"]
    assert r.feedback["percentile"] == 99
    assert set(lat) == {f"p{p}" for p in metrics.PERCENTILES}
    first = r.feedback_text.splitlines()[0]
    assert first.startswith(f"latency P99 {lat['p99']:.1f} us (P50 {lat['p50']:.1f} us, P99 {lat['p99']:.1f} us; "
                            "libnrt host timing: 10 runs after 2 warm-up")
    assert "the runtime's launch" in first and "launch overhead" not in first
    with pytest.raises(ValueError, match="latency_percentile must be one of"):
        get_target("trainium", latency_percentile=95)


def test_a_kernel_is_timed_alone_on_its_chip_unless_told_otherwise(sdk229, tmp_path, monkeypatch):
    """The cores of a chip share its HBM; every core used to be timed at once."""
    _, standin = sdk229
    monkeypatch.setattr(trn_target, "cores_per_device", lambda: 2)
    work_root = tmp_path / "work"
    work_root.mkdir()
    for exclusive, lock_state, timing in ((True, "held", "alone on chip 0"), (False, None, "beside the chip")):
        target = type(standin)()
        target.options = dataclasses.replace(standin.options, exclusive_timing=exclusive, keep_workdir=True,
                                             work_root=work_root)
        r = target.evaluate(target.problem("scaled-add"), GOOD_KERNEL)
        assert r.correct, r.error
        assert r.feedback["timing"].startswith(timing) and timing in r.feedback_text.splitlines()[0]
        newest = max(work_root.iterdir(), key=lambda p: p.stat().st_mtime_ns) / "run"
        result = json.loads((newest / "result.json").read_text())
        recorded = (newest / "standin_chip_lock").read_text() if (newest / "standin_chip_lock").exists() else None
        assert recorded == lock_state       # the stand-in libnrt checks the job's lock at every execution
        assert ("chip_wait" in result["seconds"]) == exclusive
    assert (standin.options.lock_dir / "chip-0.lock").exists()


def test_each_evaluation_draws_fresh_inputs(sdk229):
    _, target = sdk229
    seeds = {target.evaluate(target.problem("scaled-add"), GOOD_KERNEL).feedback["input_seed"] for _ in range(2)}
    assert len(seeds) == 2


def test_a_wrong_kernel_is_a_wrong_result_naming_the_worst_element(sdk229):
    _, target = sdk229
    r = target.evaluate(target.problem("scaled-add"), GOOD_KERNEL.replace("* scale", "* scale * 1.1"))
    assert (r.correct, r.error_kind) == (False, "wrong_result")
    assert "elements of c are outside the tolerance" in r.error and r.latency >= DEVICE_US


@pytest.mark.parametrize("code, kind, words", [
    (GOOD_KERNEL.replace("return", "return undefined_name +"), "compile", "NameError: name 'undefined_name'"),
    ("def solution(:\n", "compile", "kernel.py failed to import: SyntaxError"),
    ("import os\ndef solution(*a, **k):\n    os._exit(3)\n", "crash", "exited with status 3"),
    (GOOD_KERNEL.replace("return (a + b)", "return (a + b)[:64]"), "wrong_result", "shape [64, 256]"),
    ("def solution(*a, **k):\n    return 'text'\n", "compile", "returns the HBM tensors it wrote"),
])
def test_kernel_failures_are_reported_with_their_kind(sdk229, code, kind, words):
    _, target = sdk229
    r = target.evaluate(target.problem("scaled-add"), code)
    assert (r.correct, r.error_kind) == (False, kind)
    assert words in r.error


def test_a_kernel_that_never_returns_times_out(sdk229):
    _, target = sdk229
    code = "import time\ndef solution(*a, **k):\n    time.sleep(60)\n"
    r = target.evaluate(target.problem("scaled-add"), code, time_limit_s=1.5)
    assert (r.correct, r.error_kind) == (False, "timeout"), r.error


# -- NKI v2 on Neuron SDK 2.32, nrtpy in its own environment ------------------------------------------------

V2_F32 = V2_KERNEL.replace('dtype == "bfloat16"', 'dtype == "bfloat16" and a.dtype == np.float32')


def test_v2_on_sdk_232_is_compiled_then_run_and_timed_by_nrtpy(sdk232, tmp_path):
    host, target = sdk232
    trace = tmp_path / "trace.ntff"
    r = target.evaluate(target.problem("scaled-add-f32"), V2_F32, trace_path=trace)
    assert r.correct, r.error
    # nrtpy's device run times 10.0, 10.1, ... 10.4 us: percentiles are computed from them
    assert (r.latency, r.feedback["p99_us"]) == (pytest.approx(10.2), pytest.approx(10.396))
    assert (r.feedback["dialect"], r.feedback["timer"], r.feedback["neff"]) == ("v2", "nrtpy", "compiled")
    assert r.feedback["sdk"] == "Neuron SDK 2.32 (neuronx-cc 2.27.5334.0, nki 0.6.0)"
    first = r.feedback_text.splitlines()[0]
    assert "nrtpy device timing: 5 runs after 2 warm-up runs" in first and "the device's alone" in first
    assert r.feedback["profile"]["engine_busy"]["tensor"] == pytest.approx(0.75)    # neuron-explorer's summary
    assert trace.read_text().startswith("trace of kernel on NeuronCore 0") and trace.with_suffix(".neff").exists()
    assert {"compile_run", "device_run", "benchmark"} <= set(r.feedback["seconds"])
    assert host.compiles() == ["compile nki2"]


def test_a_v2_kernel_is_compiled_once_and_its_neff_reused(sdk232):
    """Each v1 evaluation compiled twice (nki.baremetal, then nki.benchmark), and nothing was kept."""
    host, target = sdk232
    problem = target.problem("scaled-add-f32")
    first, again = target.evaluate(problem, V2_F32), target.evaluate(problem, V2_F32)
    assert first.correct and again.correct, (first.error, again.error)
    assert (first.feedback["neff"], again.feedback["neff"]) == ("compiled", "cached")
    assert first.feedback["input_seed"] != again.feedback["input_seed"]
    assert host.compiles() == ["compile nki2"]
    other = target.evaluate(problem, V2_F32.replace("* scale", "* scale * 1.0"))
    assert other.correct and other.feedback["neff"] == "compiled" and len(host.compiles()) == 2


def test_the_v2_compile_step_never_sees_the_inputs_it_is_judged_on(sdk232, tmp_path):
    host, standin = sdk232
    target = type(standin)()
    work_root = tmp_path / "work"
    work_root.mkdir()
    target.options = dataclasses.replace(standin.options, keep_workdir=True, work_root=work_root)
    spy = V2_F32.replace("    return", "    import glob, os\n    open('seen.txt', 'a').write("
                                       "'%s %s\\n' % (sorted(glob.glob('in_*.npy')), bool(np.any(a))))\n    return")
    r = target.evaluate(target.problem("scaled-add-f32"), spy)
    assert r.correct, r.error
    work = next(work_root.iterdir())
    assert (work / "seen.txt").read_text() == "[] False\n"          # compiled on zeros, no input files
    assert sorted(p.name for p in (work / "run").glob("in_*.npy")) == ["in_0.npy", "in_1.npy"]


def test_v2_kernel_failures_are_reported_with_their_kind(sdk232):
    _, target = sdk232
    problem = target.problem("scaled-add-f32")
    wrong = target.evaluate(problem, V2_F32.replace("* scale", "* scale * 1.1"))
    assert (wrong.correct, wrong.error_kind) == (False, "wrong_result") and wrong.latency == pytest.approx(10.2)
    broken = target.evaluate(problem, V2_F32.replace("return", "return undefined_name +"))
    assert (broken.error_kind, "compiling or running the kernel failed" in broken.error) == ("compile", True)
    assert "NameError: name 'undefined_name'" in broken.error


def test_the_runtime_and_the_kernel_agree_on_the_logical_core_config(sdk232, monkeypatch):
    """trn2's runtime default is LNC=2 and a kernel called as kernel(...) is LNC=1: NKI 0.7's compiler refuses the
    mismatch (NCC_EVRF066). The harness sets the runtime's to the lnc option and launches kernel[lnc](...)."""
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    _, standin = sdk232
    results = []
    for lnc in (1, 2):
        target = type(standin)()
        target.options = dataclasses.replace(standin.options, lnc=lnc, platform="trn2")
        results.append(target.evaluate(target.problem("scaled-add-f32"), V2_F32))
    one, two = results
    assert one.correct and two.correct, (one.error, two.error)
    assert one.latency == two.latency and two.utilization == pytest.approx(one.utilization / 2)   # two cores' peak


def test_the_kernel_is_compiled_for_the_platform_the_options_name(sdk232):
    host, standin = sdk232
    target = type(standin)()
    target.options = dataclasses.replace(standin.options, platform="trn3")
    r = target.evaluate(target.problem("scaled-add-f32"), V2_F32)
    assert r.correct and r.feedback["platform"] == "trn3", r.error
    neff = json.loads(next((host.root / "neff-cache").glob("*/kernel.neff")).read_text())
    assert (neff["platform"], neff["lnc"]) == ("trn3", 1)


# -- a kernel's dialect against the host's SDK ---------------------------------------------------------------

def test_a_v1_kernel_on_sdk_232_is_a_setup_error_naming_the_sdk_not_a_compile_error(sdk232):
    """SDK 2.30 made neuronxcc.nki inside a kernel a compile error: every v1 kernel used to come back to the
    planner as its own compile failure."""
    host, target = sdk232
    r = target.evaluate(target.problem("scaled-add"), GOOD_KERNEL)
    assert (r.correct, r.error_kind) == (False, "setup")
    assert "NKI v1 (neuronxcc.nki)" in r.error and "Neuron SDK 2.32" in r.error and "\n" not in r.error
    assert host.compiles() == []


def test_without_nrtpy_or_libnrt_a_kernel_is_a_setup_error_saying_how_to_get_either(tmp_path, monkeypatch):
    host = make_host(tmp_path / "host", "2.29", nrtpy=False, libnrt=False)
    target = trainium(host, write_problems(tmp_path), monkeypatch)
    r = target.evaluate(target.problem("scaled-add-f32"), V2_F32)
    assert (r.correct, r.error_kind) == (False, "setup")
    assert "Neuron SDK 2.29" in r.error and "/nonexistent/libnrt.so.1" in r.error
    assert "pip install nrtpy" in r.error and "AUTOCOMP_NRTPY_PYTHON" in r.error and "AUTOCOMP_LIBNRT" in r.error
    assert host.compiles() == []
    target.options = dataclasses.replace(target.options, runtime="nrtpy")
    assert "runtime=nrtpy" in target.evaluate(target.problem("scaled-add-f32"), V2_F32).error


def test_v2_on_sdk_230_without_nrtpy_runs_through_libnrt(sdk230):
    """nrtpy ships from SDK 2.32: on 2.30 and 2.31 every NKI v2 kernel was a setup error."""
    host, target = sdk230
    problem = target.problem("scaled-add-f32")
    r = target.evaluate(problem, V2_F32)
    assert r.correct, r.error
    assert (r.feedback["dialect"], r.feedback["timer"], r.feedback["neff"]) == ("v2", "libnrt", "compiled")
    assert r.feedback["sdk"] == "Neuron SDK 2.30 (neuronx-cc 2.25.4012.0, nki 0.4.0)"
    assert r.latency >= DEVICE_US and r.feedback["profile"]["engine_busy"]["tensor"] == pytest.approx(0.75)
    wrong = target.evaluate(problem, V2_F32.replace("* scale", "* scale * 1.1"))
    assert (wrong.correct, wrong.error_kind) == (False, "wrong_result")
    assert host.compiles() == ["compile nki2"] * 2


def test_runtime_libnrt_is_used_when_asked_even_beside_nrtpy(sdk232):
    host, standin = sdk232
    target = type(standin)()
    target.options = dataclasses.replace(standin.options, runtime="libnrt")
    r = target.evaluate(target.problem("scaled-add-f32"), V2_F32)
    assert r.correct and r.feedback["timer"] == "libnrt", r.error
    with pytest.raises(ValueError, match="runtime must be auto, nrtpy or libnrt"):
        get_target("trainium", runtime="neuron-bench")


LEFT_BEHIND = """import os, subprocess, sys, time
# at import, in the compile step: a process in a session of its own that waits for the run step's directory and
# would overwrite the outputs the verdict reads
if os.environ.get("NKI_ARTIFACTS_DIR"):
    subprocess.Popen([sys.executable, "-c", "import os, time  # left-behind\\nopen('../left.pid', 'w').write('1')\\n"
                      "while True:\\n    time.sleep(0.02)\\n    if os.path.isdir('run'): open('run/tampered', 'w').write('x')"],
                     start_new_session=True, cwd=os.getcwd())
    while not os.path.exists("../left.pid"):
        time.sleep(0.01)
"""


@pytest.mark.parametrize("release", ["2.29", "2.32"])
def test_a_process_the_compile_step_leaves_behind_is_gone_before_the_run_step(tmp_path, monkeypatch, release):
    """No PID namespace: a process the kernel's compile step started in a new session outlived it and ran beside
    the run step, in the directory holding the inputs and the outputs the verdict reads."""
    import psutil
    host = make_host(tmp_path / "host", release, nrtpy=release == "2.32")
    standin = trainium(host, write_problems(tmp_path), monkeypatch)
    target = type(standin)()
    work_root = tmp_path / "work"
    work_root.mkdir()
    target.options = dataclasses.replace(standin.options, keep_workdir=True, work_root=work_root,
                                         limits=dataclasses.replace(standin.options.limits, pid_ns=True))
    kernel = LEFT_BEHIND + (GOOD_KERNEL if release == "2.29" else V2_F32)
    r = target.evaluate(target.problem("scaled-add" if release == "2.29" else "scaled-add-f32"), kernel)
    assert r.correct, r.error
    work = next(p for p in work_root.iterdir() if p.is_dir())
    assert (work_root / "left.pid").exists()           # it did start
    def alive():
        return [p for p in psutil.process_iter(["cmdline", "status"])
                if "# left-behind" in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]
    deadline = time.monotonic() + 5           # SIGKILLed when the namespace's pid 1 ended; reaped a moment later
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive()
    assert not (work / "run" / "tampered").exists()
    assert "pid isolated" in r.sandbox


def test_the_trainium_sandbox_has_a_pid_namespace_by_default():
    assert get_target("trainium").options.limits.pid_ns


def test_a_kernel_mixing_both_dialects_is_a_setup_error(sdk232):
    _, target = sdk232
    r = target.evaluate(target.problem("scaled-add-f32"), "import neuronxcc.nki.language as nl\n" + V2_F32)
    assert (r.error_kind, "imports both" in r.error) == ("setup", True)


# -- launch.py eval on each SDK layout -----------------------------------------------------------------------

RMSNORM = """import numpy as np
{imports}
@nki.jit
def solution(a_tensor, g_tensor):
    return a_tensor / np.sqrt(np.mean(a_tensor * a_tensor, axis=1, keepdims=True)) * g_tensor[None, :]
"""


@pytest.mark.parametrize("release, imports", [("2.29", "import neuronxcc.nki as nki"), ("2.32", "import nki")])
def test_launch_eval_runs_on_each_sdk_layout(world_readable_tmp, release, imports):
    """`launch.py eval --target trainium` end to end on a built-in problem, with no flag for the dialect (the
    kernel's imports choose its ISA profile): the host's cores from its neuron-ls, the SDK and nrtpy from the
    environment. (The stand-in's Python is this interpreter, which nobody may not be
    allowed to run: the evaluation keeps its user, through --target-option.)"""
    host = make_host(world_readable_tmp / "host", release, nrtpy=release == "2.32")
    (host.bin / "neuron-ls").write_text("#!/bin/sh\necho '[{\"neuron_device\": 0, \"nc_count\": 2, "
                                        "\"neuroncore_ids\": [0, 1]}]'\n")
    (host.bin / "neuron-ls").chmod(0o755)
    path = world_readable_tmp / "kernel.py"
    path.write_text(RMSNORM.format(imports=imports))
    path.chmod(0o644)
    env = {**os.environ, "PATH": f"{host.bin}:{os.environ['PATH']}", "AUTOCOMP_NEURON_PYTHON": str(host.python),
           "AUTOCOMP_LIBNRT": str(host.libnrt), "XDG_CACHE_HOME": str(world_readable_tmp / "cache")}
    if host.nrtpy:
        env["AUTOCOMP_NRTPY_PYTHON"] = str(host.nrtpy)
    env.pop("NEURON_RT_VISIBLE_CORES", None)
    out = subprocess.run([sys.executable, "launch.py", "eval", "--target", "trainium", "--problem", "rmsnorm",
                          "--target-option", "limits.drop_root=false", "--json", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["correct"] and report["feedback"]["sdk"].startswith(f"Neuron SDK {release}")
    assert report["feedback"]["timer"] == ("libnrt" if release == "2.29" else "nrtpy")


def test_the_isa_profile_names_the_dialect_on_hardware_as_on_the_simulator(sdk232):
    """--isa nki2 judges NKI v2 kernels and the default nki1 NKI v1 ones, on both trainium targets."""
    host, target = sdk232
    r = target.judge(target.problem("scaled-add-f32"), V2_F32)       # the default profile: NKI v1
    assert (r.correct, r.error_kind) == (False, "policy") and "--isa nki2" in r.error
    assert host.compiles() == []
