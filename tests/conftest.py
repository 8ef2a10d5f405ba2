"""Shared fixtures. Tests run with the repository root importable (PYTHONPATH=. or not)."""
from __future__ import annotations

import sys
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
    config.addinivalue_line("markers", "system: starts real processes or sockets (compilers, sandboxes, runs, "
                                       "agents); deselect with -m 'not system' for the fast tier")
