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
