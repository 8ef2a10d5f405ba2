"""Shared fixtures. Tests run with the repository root importable (PYTHONPATH=. or not)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hw_runners import get_target  # noqa: E402


@pytest.fixture(scope="session")
def sim():
    """The gemmini-sim target with its default options."""
    return get_target("gemmini-sim")


def pytest_configure(config):
    # every run records its optimization trace in the schedule library: never the user's own during tests
    # (the variable reaches the runs' subprocesses too)
    os.environ["AUTOCOMP_SCHEDULE_LIBRARY"] = tempfile.mkdtemp(prefix="autocomp-test-schedules-")
    config.addinivalue_line("markers", "system: starts real processes or sockets (compilers, sandboxes, runs, "
                                       "agents); deselect with -m 'not system' for the fast tier")


def pytest_unconfigure(config):
    shutil.rmtree(os.environ.get("AUTOCOMP_SCHEDULE_LIBRARY", ""), ignore_errors=True)
