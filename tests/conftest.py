"""Shared fixtures. The product is imported as autocomp_zmq (installed with `pip install -e .`, or bound here)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest
import zmq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:         # tests/ (tests.tiny_target, tests.system.runkit) is imported from here
    sys.path.insert(0, str(ROOT))
if importlib.util.find_spec("autocomp_zmq") is None:
    # not installed: the checkout is the autocomp_zmq package, as `python launch.py` binds it (subprocesses
    # started by these tests then need the install: .ci/run and the README do `pip install -e .`)
    _package = types.ModuleType("autocomp_zmq")
    _package.__path__ = [str(ROOT)]
    sys.modules["autocomp_zmq"] = _package

from autocomp_zmq.hw_runners import get_target  # noqa: E402


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


def _whole_module_is_system(path: Path) -> bool:
    """A test module whose module-level `pytestmark` carries the system marker (read as text: not imported)."""
    try:
        text = path.read_text()
    except OSError:
        return False
    return any(line.startswith("pytestmark") and "pytest.mark.system" in line for line in text.splitlines())


def pytest_ignore_collect(collection_path, config):
    """The fast tier (-m "not system") neither imports nor collects a module whose every test is a system test:
    what it would deselect after importing it (torch, the sandbox, a cluster kit) it never loads."""
    if config.getoption("markexpr", "").replace(" ", "") == "notsystem" and collection_path.suffix == ".py" \
            and collection_path.name.startswith("test_") and _whole_module_is_system(collection_path):
        return True
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A timeout that fires while the test is inside a finalizer (a weakref callback, __del__) is swallowed
    there: Python prints it as 'Exception ignored' and the test went on to pass. Such a test fails here."""
    swallowed = []
    previous = sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, pytest.fail.Exception) and "pytest-timeout" in str(unraisable.exc_value):
            swallowed.append(str(unraisable.exc_value))
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        result = yield
    finally:
        sys.unraisablehook = previous
    if swallowed:
        pytest.fail(f"{swallowed[0]} It fired inside a finalizer, which swallowed it; the test ran past its limit.",
                    pytrace=False)
    return result


def pytest_unconfigure(config):
    shutil.rmtree(os.environ.get("AUTOCOMP_SCHEDULE_LIBRARY", ""), ignore_errors=True)


@pytest.fixture(autouse=True)
def fast_tier_starts_nothing(request, monkeypatch):
    """The fast tier's promise, enforced: a test not marked `system` that starts a process or opens a socket
    (TCP/UDP/Unix, or ZeroMQ) fails at that call, saying so."""
    if request.node.get_closest_marker("system"):
        yield
        return

    def refuse(what: str):
        def refused(*args, **kwargs):
            raise AssertionError(f"a fast-tier test {what}: mark it pytest.mark.system, or keep it in process")
        return refused

    for owner, name in ((subprocess.Popen, "__init__"), (os, "fork"), (os, "forkpty"), (os, "posix_spawn"),
                        (os, "posix_spawnp"), (os, "system"), (os, "execv"), (os, "execve")):
        monkeypatch.setattr(owner, name, refuse(f"started a process ({owner.__name__}.{name})"))
    monkeypatch.setattr(socket.socket, "__init__", refuse("opened a socket"))
    monkeypatch.setattr(zmq.Context, "socket", refuse("opened a ZeroMQ socket"))
    yield
