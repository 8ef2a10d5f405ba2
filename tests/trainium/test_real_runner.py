"""The real-Trainium runner without Trainium: harness generation, parsing of what the Neuron tools
print, NeuronCore discovery and claiming, the missing-SDK error, and whole evaluations against a
stand-in Neuron SDK written by these tests (a `neuronxcc.nki` whose baremetal runs the kernel with
numpy and whose benchmark reports fixed latencies), which checks everything around the device."""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners import get_target
from autocomp_zmq.hw_runners.base import target_info
from autocomp_zmq.hw_runners.trainium import harness, metrics, neuron
from autocomp_zmq.hw_runners.trainium import target as trn_target
from autocomp_zmq.hw_runners.trainium_sim.workloads import load_specs

ROOT = Path(__file__).resolve().parents[2]
REAL_PROBLEMS = ROOT / "hw_runners" / "trainium_sim" / "problems"

PROBLEM_TOML = """name = "scaled-add"
description = "c = (a + b) * scale + eps"
signature = "solution(a, b, scale, dtype, eps=0.0, pad=None)"
tags = ["small"]
dims = {P = 128, F = 256}
flops = 98304
call = ["a", "b", 2.5, "nl.bfloat16"]
tolerance = {atol = 1e-2, rtol = 1e-2}
[kwargs]
eps = 1e-5
pad = [[0, 0], [1, 1]]
[[inputs]]
name = "a"
shape = [128, 256]
dtype = "bfloat16"
[[inputs]]
name = "b"
shape = [128, 256]
dtype = "float32"
[[outputs]]
name = "c"
shape = [128, 256]
dtype = "float32"
"""
REFERENCE = """import numpy as np
def make_inputs(rng):
    return {"a": rng.standard_normal((128, 256)).astype(np.float32),
            "b": rng.standard_normal((128, 256)).astype(np.float32)}
def reference(a, b, scale, dtype, eps=0.0, pad=None):
    return (a.astype(np.float64) + b) * scale + eps
"""
GOOD_KERNEL = """import neuronxcc.nki as nki
@nki.jit
def solution(a, b, scale, dtype, eps=0.0, pad=None):
    assert pad == ((0, 0), (1, 1)) and dtype == "bfloat16"
    return (a + b) * scale + eps
"""


@pytest.fixture
def problems(tmp_path) -> Path:
    d = tmp_path / "problems" / "scaled-add"
    d.mkdir(parents=True)
    (d / "problem.toml").write_text(PROBLEM_TOML)
    (d / "reference.py").write_text(REFERENCE)
    return d.parent


# -- harness generation --------------------------------------------------------------------------------

def test_the_job_calls_solution_with_the_specs_inputs_literals_dtypes_and_kwargs(problems):
    spec = load_specs(problems)["scaled-add"]
    job = harness.job(spec, warmup=3, iters=7)
    assert job["args"] == "inputs[0], inputs[1], 2.5, nl.bfloat16"
    assert job["kwargs"] == "eps=1e-05, pad=((0, 0), (1, 1))"
    assert (job["input_dtypes"], job["input_shapes"], job["output_dtypes"]) == \
        (["bfloat16", "float32"], [[128, 256], [128, 256]], ["float32"])
    assert (job["warmup"], job["iters"], job["percentiles"]) == (3, 7, list(metrics.PERCENTILES))


def test_the_scripts_run_on_the_oldest_python_a_neuron_environment_has():
    """They run in the SDK's Python, not ours: Python 3.8 syntax, and nothing of this product imported."""
    for script in sorted(harness.SDK_SIDE.glob("*.py")):
        tree = ast.parse(script.read_text(), feature_version=(3, 8))
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not any(m.startswith("autocomp_zmq") for m in modules), script.name


@pytest.mark.parametrize("name", sorted(load_specs(REAL_PROBLEMS)) if REAL_PROBLEMS.is_dir() else [])
def test_the_job_of_every_real_problem_is_python_and_passes_every_declared_argument(name):
    spec = load_specs(REAL_PROBLEMS)[name]
    job = harness.job(spec, 2, 5)
    compile(f"args = [{job['args']}]\nkwargs = dict({job['kwargs']})", f"job-{name}", "exec")
    for item in spec.call:
        names = [t.name for t in spec.inputs]
        want = f"inputs[{names.index(item)}]" if item in names else harness.literal(item, {})
        assert want in job["args"]
    assert all(f"{k}=" in job["kwargs"] for k in spec.kwargs)


KERNELS = sorted(REAL_PROBLEMS.glob("*/naive.py")) + sorted(REAL_PROBLEMS.glob("*/tuned.py"))


@pytest.mark.parametrize("path", KERNELS, ids=[f"{p.parent.name}/{p.stem}" for p in KERNELS])
def test_the_harness_call_binds_to_the_real_starting_and_tuned_kernels(path):
    """The harness passes len(call) positional and the kwargs by name: each kernel's solution() takes them."""
    spec = load_specs(REAL_PROBLEMS)[path.parent.name]
    fn = next(n for n in ast.walk(ast.parse(path.read_text()))
              if isinstance(n, ast.FunctionDef) and n.name == "solution")
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    assert len(spec.call) <= len(params) or fn.args.vararg
    rest = params[len(spec.call):] + [a.arg for a in fn.args.kwonlyargs]
    assert all(k in rest for k in spec.kwargs) or fn.args.kwarg
    required = len(params) - len(fn.args.defaults)
    assert len(spec.call) + sum(k in params[len(spec.call):required] for k in spec.kwargs) >= required


def test_literals_render_as_python_and_refuse_what_python_cannot_take():
    assert harness.literal(("a", 3, (1,), float("inf")), {"a": 0}) == "(inputs[0], 3, (1,), float('inf'))"
    assert harness.literal("nl.float32", {}) == "nl.float32" and harness.literal("nl float", {}) == "'nl float'"
    with pytest.raises(harness.HarnessError):
        harness.literal(object(), {})


# -- what the tools print ------------------------------------------------------------------------------

def test_benchmark_latencies_need_a_sane_p50_and_p99():
    assert metrics.latencies({"latency_us": {"p50": 12.5, "p99": 14, "p0": 11.0, "p90": float("nan")}}) == \
        {"p50": 12.5, "p99": 14.0, "p0": 11.0}
    for bad in ({"latency_us": {"p50": 12.5}}, {"latency_us": {"p50": -1, "p99": 3}}, {"latency_us": "12"},
                {"latency_us": {"p50": True, "p99": 2}}, [], None):
        assert metrics.latencies(bad) == {}


# The shape `neuron-profile view --output-format summary-json` prints: one object keyed by the profiled
# graph, holding seconds and fractions (values made up for this test).
PROFILE_SAMPLE = {"kernel.neff": {
    "total_time": 2.0e-5, "total_active_time": 1.8e-5,
    "tensor_engine_active_time": 1.5e-5, "tensor_engine_active_time_percent": 0.75,
    "vector_engine_active_time": 2.0e-6, "scalar_engine_active_time": 0.0,
    "gpsimd_engine_active_time_percent": 0.01, "dma_active_time": 1.0e-5,
    "mfu_estimated_percent": 0.42, "hbm_read_bytes": 2 << 20, "hbm_write_bytes": 1 << 20,
    "spill_save_bytes": 0, "spill_reload_bytes": 0}}


def test_a_profile_summary_gives_engine_busy_fractions_device_time_and_traffic(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE_SAMPLE))
    prof = metrics.profile_metrics(metrics.read_json(path, metrics.PROFILE_LIMIT))
    assert prof["engine_busy"] == pytest.approx({"tensor": 0.75, "vector": 0.1, "scalar": 0.0, "gpsimd": 0.01,
                                                 "dma": 0.5})
    assert prof["device_time_us"] == pytest.approx(20.0) and prof["mfu_estimated"] == pytest.approx(0.42)
    assert (prof["hbm_read_bytes"], prof["hbm_write_bytes"]) == (2 << 20, 1 << 20)
    # a percentage above 1 can only be on the 0-100 scale
    assert metrics.engine_busy({"vector_engine_active_time_percent": 37.5}) == {"vector": 0.375}


@pytest.mark.parametrize("doc", [None, "text", [], {}, [1, 2], {"a": {"b": "c"}}, {"total_time": "soon"},
                                 {"x": [{"y": None}]}, {"tensor_engine_active_time": "busy"}])
def test_an_odd_profile_gives_no_metrics_and_no_exception(doc):
    assert metrics.profile_metrics(doc) == {}


def test_a_profile_after_the_tools_log_lines_is_still_read(tmp_path):
    """neuron-profile's stdout is the profile file; a log line before the JSON used to lose the whole profile."""
    path = tmp_path / "profile.json"
    path.write_text("2026-Nov-24 10:00:01 INFO  [neuron-profile] loading kernel.neff {cache}\n"
                    "[warn] ntff has 1 dropped event\n" + json.dumps(PROFILE_SAMPLE, indent=1) + "\ndone\n")
    assert metrics.read_json(path, metrics.PROFILE_LIMIT) is None          # strict JSON: not a document
    prof = metrics.profile_metrics(metrics.read_json(path, metrics.PROFILE_LIMIT, after_log_lines=True))
    assert prof["engine_busy"]["tensor"] == pytest.approx(0.75)
    path.write_text("only log lines\n[not json\n")
    assert metrics.read_json(path, metrics.PROFILE_LIMIT, after_log_lines=True) is None


def test_unreadable_result_files_read_as_none(tmp_path):
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "big.json").write_text(json.dumps({"pad": "x" * 2000}))
    assert metrics.read_json(tmp_path / "a.json", 1 << 20) is None
    assert metrics.read_json(tmp_path / "big.json", 1000) is None
    assert metrics.read_json(tmp_path / "missing.json", 1000) is None


def test_bf16_rounding_is_to_nearest_even_and_keeps_specials():
    a = np.array([1.0, 1.00390625, 1.01171875, -2.5e-3, np.inf, np.nan], dtype=np.float32)
    r = metrics.round_bf16(a)
    assert r[0] == 1.0 and r[1] == 1.0 and r[2] == np.float32(1.015625)   # ties go to the even mantissa
    assert (r.view(np.uint32)[:5] & 0xFFFF == 0).all() and np.isinf(r[4]) and np.isnan(r[5])


def test_mismatch_names_the_worst_element_and_treats_nan_as_wrong():
    want = np.zeros((2, 3))
    got = want.copy()
    assert metrics.mismatch("c", got, want, 1e-2, 1e-2) is None
    got[1, 2], got[0, 0] = 0.5, np.nan
    message = metrics.mismatch("c", got, want, 1e-2, 1e-2)
    assert message.startswith("2 of 6 elements of c") and "worst at c[0][0]" in message
    assert "shape [3]" in metrics.mismatch("c", np.zeros(3), want, 1e-2, 1e-2)


# -- NeuronCores ---------------------------------------------------------------------------------------

# `neuron-ls --json-output` prints one object per device (field names as the tool prints them; this
# two-device sample is written for the test).
NEURON_LS = json.dumps([
    {"neuron_device": 0, "bdf": "10:1c.0", "connected_to": [1], "nc_count": 2, "memory_size": 34359738368,
     "neuroncore_ids": [0, 1], "neuron_processes": []},
    {"neuron_device": 1, "bdf": "10:1d.0", "connected_to": [0], "nc_count": 2, "memory_size": 34359738368,
     "neuroncore_ids": [2, 3], "neuron_processes": [{"pid": 7, "command": "python"}]}])


def test_cores_are_numbered_at_the_logical_core_config_kernels_run_at():
    """neuron-ls lists a trn2 device's cores at the runtime's default LNC=2 (4 per chip); kernels run at LNC=1,
    where the runtime numbers 8 per chip: only half of a trn2.48xlarge's cores were used."""
    trn2 = json.dumps([{"neuron_device": d, "nc_count": 4, "logical_neuroncore_config": 2,
                        "neuroncore_ids": list(range(4 * d, 4 * d + 4))} for d in range(16)])
    assert neuron.parse_neuron_ls(trn2) == list(range(64))
    assert neuron.parse_neuron_ls(trn2, lnc=2) == list(range(64))
    assert neuron.parse_neuron_ls(trn2, lnc=1) == list(range(128))


def test_cores_come_from_neuron_ls_json():
    assert neuron.parse_neuron_ls(NEURON_LS) == [0, 1, 2, 3]
    assert neuron.parse_neuron_ls(json.dumps({"instance_type": "trn1.2xlarge",
                                              "neuron_devices": [{"neuron_device": 0, "nc_count": 2}]})) == [0, 1]
    for bad in ("{}", "[1]", '[{"neuron_device": 0}]', "null"):
        with pytest.raises(ValueError):
            neuron.parse_neuron_ls(bad)


@pytest.mark.system     # runs a stand-in neuron-ls
@pytest.mark.parametrize("accepted", ["--json-output", "--output-format json"])
def test_neuron_ls_is_asked_with_the_json_flag_its_version_takes(tmp_path, accepted):
    """Neuron 2.34 drops --json-output for --output-format json: asking only the old flag lost the core list."""
    ls = tmp_path / "neuron-ls"
    layout = NEURON_LS if accepted == "--json-output" else \
        json.dumps({"instance_type": "trn2.48xlarge", "neuron_devices": json.loads(NEURON_LS)})
    ls.write_text(f"#!/bin/sh\nif [ \"$*\" = \"{accepted}\" ]; then cat <<'EOF'\n{layout}\nEOF\n"
                  "else echo \"unknown flag $*\" >&2; exit 2; fi\n")
    ls.chmod(0o755)
    assert neuron.parse_neuron_ls(neuron.neuron_ls_json(str(ls))) == [0, 1, 2, 3]
    assert neuron.neuron_ls_json(str(tmp_path / "missing")) is None


def test_without_neuron_ls_cores_are_device_files_times_cores_per_device(tmp_path):
    dev, sysfs = tmp_path / "dev", tmp_path / "sys"
    dev.mkdir()
    for name in ("neuron0", "neuron1", "neuron2", "null", "neuronx"):
        (dev / name).touch()
    assert neuron.discover_cores(None, dev, sysfs) == list(range(6))    # 2 per device when sysfs says nothing
    (sysfs / "neuron0").mkdir(parents=True)
    (sysfs / "neuron0" / "core_count").write_text("8\n")
    assert neuron.discover_cores("not json", dev, sysfs) == list(range(24))
    assert neuron.discover_cores(NEURON_LS, dev, sysfs) == [0, 1, 2, 3]
    assert neuron.discover_cores(None, tmp_path / "nodev", sysfs) == []


@pytest.mark.parametrize("override, platform", [("trn1", "trn1"), ("inf2", "trn1"), ("gen2", "trn1"),
                                                ("trn2", "trn2"), ("GEN3", "trn2"), ("trn3", "trn3"),
                                                ("gen4", "trn3")])
def test_the_platform_override_takes_every_documented_value(tmp_path, override, platform):
    """trn3/gen4 used to read as trn1 (NeuronCore-v2's peak rates for a NeuronCore-v4)."""
    environ = {"NEURON_PLATFORM_TARGET_OVERRIDE": override}
    assert neuron.platform_name(tmp_path, environ) == platform


def test_an_undocumented_platform_override_is_a_setup_error_and_the_device_name_decides_otherwise(tmp_path):
    with pytest.raises(neuron.PlatformError, match="NEURON_PLATFORM_TARGET_OVERRIDE='trn9' is not a platform"):
        neuron.platform_name(tmp_path, {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn9"})
    arch = tmp_path / "neuron0" / "info" / "architecture"
    arch.mkdir(parents=True)
    for device, platform in (("Trainium1", "trn1"), ("Trainium2", "trn2"), ("Trainium3", "trn3")):
        (arch / "device_name").write_text(device + "\n")
        assert neuron.platform_name(tmp_path, {}) == platform
    assert set(metrics.PEAKS) == {"trn1", "trn2", "trn3"}


def test_the_kernel_runs_at_the_logical_core_config_it_is_launched_with(tmp_path, monkeypatch):
    """Kernels are called as kernel(...), which is LNC=1 on trn2/trn3; a site's NEURON_LOGICAL_NC_CONFIG=2 used to
    reach the runtime (a mismatch, a runtime error per AWS) and halve the utilisation of a one-core kernel."""
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    target = get_target("trainium", platform="trn2")
    env = target._env(tmp_path, neuron.CoreClaim("0", "environment"), sys.executable)
    assert env["NEURON_LOGICAL_NC_CONFIG"] == "1" and env["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn2"
    with pytest.raises(ValueError, match="lnc .* must be 1 or 2"):
        get_target("trainium", lnc=4)
    with pytest.raises(ValueError, match="platform must be trn1, trn2 or trn3"):
        get_target("trainium", platform="trn4")


def test_core_claims_take_different_cores_and_a_released_core_is_claimable(tmp_path):
    first = neuron.claim_core([0, 1], tmp_path, environ={})
    second = neuron.claim_core([0, 1], tmp_path, environ={})
    assert (first.cores, second.cores) == ("0", "1")
    assert neuron.claim_core([0, 1], tmp_path, environ={}) is None
    assert (tmp_path / "core-0.lock").read_text() == f"{os.getpid()}\n"
    first.release()
    third = neuron.claim_core([0, 1], tmp_path, environ={})
    assert third.cores == "0"
    second.release()
    third.release()


def test_neuron_rt_visible_cores_naming_one_core_is_the_claim(tmp_path):
    claim = neuron.claim_core([0, 1], tmp_path / "locks", environ={"NEURON_RT_VISIBLE_CORES": "5"})
    assert (claim.cores, claim.source, claim.fd) == ("5", "environment", None)
    assert not (tmp_path / "locks").exists()


def test_neuron_rt_visible_cores_naming_several_cores_is_shared_out_one_per_claim(tmp_path):
    env = {"NEURON_RT_VISIBLE_CORES": "4-5"}
    claims = [neuron.claim_core([0, 1], tmp_path, environ=env) for _ in range(3)]
    assert [c.cores for c in claims[:2]] == ["4", "5"] and claims[2] is None
    assert neuron.parse_core_list("0,2,4-6") == [0, 2, 4, 5, 6]
    assert neuron.parse_core_list("3-1") is None and neuron.parse_core_list("nc0") is None
    for c in claims[:2]:
        c.release()


def test_trainium_descriptor():
    info = target_info("trainium")
    assert (info.language, info.code_fence, info.entry_point, info.latency_unit, info.evaluators) == \
        ("NKI (Python): v1 (neuronxcc.nki) or v2 (import nki)", "python", "solution", "us", "devices")
    assert info.problems == REAL_PROBLEMS and info.isa.name == "isa.md" and info.isa.parent.name == "trainium-sim"
    assert info.heuristic == "autocomp_zmq.hw_runners.trainium_sim.heuristic.agent:TrainiumHeuristic"


# -- a host without the Neuron SDK ---------------------------------------------------------------------

def _host_lacks_sdk() -> bool:
    return bool(get_target("trainium").unmet_requirements())


def test_on_a_host_without_the_sdk_an_evaluation_says_what_to_install(problems):
    if not _host_lacks_sdk():
        pytest.skip("this host has the Neuron SDK")
    tgt = get_target("trainium", problems_dir=problems)
    r = tgt.evaluate(tgt.problem("scaled-add"), GOOD_KERNEL)
    assert (r.correct, r.error_kind, r.latency_unit) == (False, "setup", "us")
    assert "neuronxcc" in r.error and "pip install neuronx-cc" in r.error and "aws-neuronx-dkms" in r.error


@pytest.mark.system     # runs the harness in a sandboxed process
def test_launch_eval_without_the_sdk_exits_1_with_the_setup_message(tmp_path):
    real = sorted(load_specs(REAL_PROBLEMS)) if REAL_PROBLEMS.is_dir() else []
    if not real:
        pytest.skip("hw_runners/trainium_sim/problems has no problems yet")
    if not _host_lacks_sdk():
        pytest.skip("this host has the Neuron SDK")
    kernel = tmp_path / "kernel.py"
    kernel.write_text(GOOD_KERNEL)
    out = subprocess.run([sys.executable, "launch.py", "eval", "--target", "trainium", "--problem", real[0],
                          str(kernel)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "failed" in text and "(setup)" in text and "neuronx-cc" in text and "Traceback" not in text
