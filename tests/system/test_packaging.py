"""The package as a user installs it: a wheel (not the editable checkout) gives an `autocomp` command that
runs an offline search from any directory, its prompts, problems, price table and C sources included."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.system.runkit import ROOT

pytestmark = [pytest.mark.system, pytest.mark.timeout(600)]


def test_installed_wheel_runs_a_search_outside_the_checkout(tmp_path):
    wheels, target, work = tmp_path / "wheels", tmp_path / "installed", tmp_path / "elsewhere"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT),
                    "-w", str(wheels)], check=True, cwd=tmp_path)
    wheel = next(wheels.glob("*.whl"))
    # dependencies come from this environment; the product itself only from the wheel
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, cwd=tmp_path)
    # one import name (and the console script): nothing that could shadow another package, such as `agents`
    assert sorted(p.name for p in target.iterdir()) == ["autocomp_zmq", "autocomp_zmq-0.1.0.dist-info", "bin"]
    env = {**os.environ, "PYTHONPATH": str(target), "AUTOCOMP_LOG_LEVEL": "WARNING"}
    where = subprocess.run([sys.executable, "-c", "import autocomp_zmq.agents as a, autocomp_zmq.hw_runners as h, "
                            "autocomp_zmq.launch as l; print(a.__file__, h.__file__, l.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert str(ROOT) not in where and where.count(str(target)) == 3, where
    proc = subprocess.run([str(target / "bin" / "autocomp"), "run", "--problem", "gemm-256x256x256", "-T", "1",
                           "-B", "1", "-N", "1", "-K", "1", "--evaluators", "1"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Speedup:" in proc.stdout
    runs = list((work / "runs").iterdir())       # runs/ in the working directory, not in the package
    assert len(runs) == 1 and (runs[0] / "best.c").exists()
    problems = subprocess.run([str(target / "bin" / "autocomp"), "problems"], cwd=work, env=env,
                              capture_output=True, text=True)
    assert "gemm-512x512x512" in problems.stdout
    # trainium-sim's own neuronxcc front end, subpackages included, evaluates a kernel from the wheel
    trn = subprocess.run([str(target / "bin" / "autocomp"), "eval", "--target", "trainium-sim", "--problem",
                          "rmsnorm", "builtin:naive"], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert trn.returncode == 0 and "correct" in trn.stdout.lower(), trn.stdout + trn.stderr
    # a command target (a folder with no __init__.py) and its harness, from the wheel
    cpu = subprocess.run([str(target / "bin" / "autocomp"), "eval", "--target", "hostcpu", "--problem",
                          "softmax-1024x1024", "builtin:naive"], cwd=work, env=env, capture_output=True, text=True,
                         timeout=300)
    assert cpu.returncode == 0 and cpu.stdout.startswith("correct softmax-1024x1024"), cpu.stdout + cpu.stderr


def test_offline_workers_do_not_load_the_llm_sdks():
    """A heuristic planner or an evaluator imports only its own implementation's dependencies."""
    probe = ("import sys\n"
             "import autocomp_zmq.launch\n"
             "from autocomp_zmq.agents.workers import registry\n"
             "for role, impl in (('planner', 'heuristic'), ('coder', 'heuristic'), ('repairer', 'heuristic'),\n"
             "                   ('evaluator', 'target')):\n"
             "    registry.load(role, impl)\n"
             "print(sorted(m for m in ('openai', 'anthropic', 'httpx') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # the probe can see an SDK when one is loaded (the llm agent imports one when a client for its provider is made)
    llm = probe.replace("    registry.load(role, impl)\n", "    registry.load(role, impl)\n"
                        "from autocomp_zmq.agents.workers.llm.providers import sdk\nsdk('openai')\n")
    out = subprocess.run([sys.executable, "-c", llm], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "openai" in out
