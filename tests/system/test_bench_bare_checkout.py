"""Every script in bench/ starts from a checkout that was never installed, as `python launch.py` does (bench/_checkout.py
binds the checkout as the autocomp_zmq package): each is run from another directory with the environment's packages
but without the project's install (Python's -S: no site processing, so no .pth file puts the editable install on the
path), and must get past its imports to its --help."""
from __future__ import annotations

import site
import subprocess
import sys

import pytest

from tests.system.runkit import ROOT

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))


def bare(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": site.getsitepackages()[0]}
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_project_is_not_importable_that_way(tmp_path):
    found = bare("-c", "import importlib.util; print(importlib.util.find_spec('autocomp_zmq'))", cwd=tmp_path)
    assert found.stdout.strip() == "None", found.stdout + found.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bench_script_runs_from_a_bare_checkout(tmp_path, script):
    done = bare(str(ROOT / "bench" / script), "--help", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    # the scripts with options print their usage; published_references.py and trainium_quality.py are helpers
    # other scripts import, which print nothing
    assert "usage" in done.stdout.lower() or script in ("published_references.py", "trainium_quality.py"), done.stdout
