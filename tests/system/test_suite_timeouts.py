"""The suite's own guard (tests/conftest.py): a pytest-timeout that fires while a test is inside a finalizer is
swallowed by Python ('Exception ignored') and the test used to pass; it must fail the test it interrupted."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.system.runkit import ROOT

pytestmark = pytest.mark.system


def test_a_timeout_swallowed_by_a_finalizer_fails_the_test(tmp_path):
    (tmp_path / "test_slow_finalizer.py").write_text(textwrap.dedent("""
        import time
        import weakref

        import pytest


        class Holder:
            pass


        @pytest.mark.timeout(1)
        def test_finalizer_outlives_the_timeout():
            held = Holder()
            weakref.finalize(held, time.sleep, 3)
            del held          # the finalizer runs here, inside the test, when the timeout fires


        def test_an_ordinary_test_still_passes():
            assert True
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                          "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert "1 failed, 1 passed" in out.stdout, out.stdout + out.stderr
    assert "It fired inside a finalizer, which swallowed it" in out.stdout


def test_the_fast_tier_never_imports_a_whole_system_module(tmp_path):
    """-m "not system" skips a module whose module-level pytestmark is the system marker without importing it
    (collecting the fast tier used to import every system module: torch, the sandbox kits, ~8 s)."""
    (tmp_path / "test_whole_system.py").write_text(textwrap.dedent("""
        import pytest
        pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]
        raise RuntimeError("a system module was imported")


        def test_system():
            pass
    """))
    (tmp_path / "test_mixed.py").write_text(textwrap.dedent("""
        import pytest


        def test_fast():
            pass


        @pytest.mark.system
        def test_slow():
            pass
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def collect(marks: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-p", "tests.conftest", "-m", marks, str(tmp_path)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
    fast = collect("not system")
    assert fast.returncode == 0 and "test_mixed.py::test_fast" in fast.stdout, fast.stdout + fast.stderr
    assert "imported" not in fast.stdout + fast.stderr
    everything = collect("system or not system")
    assert "a system module was imported" in everything.stdout + everything.stderr
