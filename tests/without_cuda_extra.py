"""A pytest plugin that makes a test run behave like an install without the `cuda` extra (`pip install -e '.[test]'`,
no PyTorch, no Triton), whatever this environment has:

    python -m pytest -p tests.without_cuda_extra tests/cuda

torch, triton and their submodules cannot be imported (ModuleNotFoundError, as when they are not installed) in the test
process and in every Python it starts:

* in this process, by a finder on sys.meta_path, installed when the plugin is loaded (before any conftest);
* in children that inherit the environment (`sys.executable` with os.environ: launch.py runs, check_many), by a
  sitecustomize.py on PYTHONPATH that installs the same finder;
* in the cuda target's children, which get a bare environment (hw_runners/cuda/environment.py: probe passes only
  PATH and HOME): AUTOCOMP_TORCH_PYTHON names a wrapper that starts this Python with that PYTHONPATH. Its probe
  then reports what it reports where the extra is missing ("PyTorch in ... (ModuleNotFoundError: No module named
  'torch')"), so unmet_requirements() is not empty and an evaluation fails with "the cuda target cannot run here".
  Blocking the test process only would leave the judge's children their torch: a test that forgot its skip would
  still pass here, and fail on a real install without the extra.

tests/system/test_cuda_without_extra.py runs tests/cuda this way in CI."""
from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BLOCKED = ("torch", "triton")
_UNMET = pytest.StashKey[list]()
# the finder, as source: run here and written into the children's sitecustomize.py (it must not import this file).
# It stands in for the path finder, which finds installed packages, and finds nothing of torch and triton there:
# `import torch` raises ModuleNotFoundError("No module named 'torch'") and importlib.util.find_spec("torch") is None,
# as where they are not installed (a finder that raised instead would break skips that ask find_spec).
FINDER = f'''
import importlib.machinery
import sys

BLOCKED = {BLOCKED!r}


class WithoutCudaExtra:
    """sys.meta_path's path finder, without {" and ".join(BLOCKED)} (their submodules and distributions)."""

    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            return None
        return self.inner.find_spec(name, path, target)

    def find_distributions(self, *args, **kwargs):       # importlib.metadata.version("torch") and the like
        name = getattr(args[0] if args else kwargs.get("context"), "name", None)
        if name and name.lower().replace("-", "_") in BLOCKED:
            return iter(())
        return self.inner.find_distributions(*args, **kwargs)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


sys.meta_path[:] = [WithoutCudaExtra(f) if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
'''

_already = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
if _already:
    raise RuntimeError(f"tests/without_cuda_extra.py is loaded too late: {', '.join(_already)} already imported "
                       "(load it with -p on the command line)")
exec(compile(FINDER, "<tests/without_cuda_extra.py: FINDER>", "exec"), {"__name__": "without_cuda_extra_finder"})

# the children: a sitecustomize.py that installs the finder, on PYTHONPATH, and a Python that always has it
_HOME = Path(tempfile.mkdtemp(prefix="without-cuda-extra-"))
(_HOME / "site").mkdir()
(_HOME / "site" / "sitecustomize.py").write_text("# written by tests/without_cuda_extra.py\n" + FINDER)
_PYTHON = _HOME / "python"
_PYTHON.write_text("#!/bin/sh\n"
                   f'PYTHONPATH={shlex.quote(str(_HOME / "site"))}"${{PYTHONPATH:+:$PYTHONPATH}}" '
                   f'exec {shlex.quote(sys.executable)} "$@"\n')
_PYTHON.chmod(0o755)
_HOME.chmod(0o755)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_HOME / "site"), os.environ.get("PYTHONPATH")) if p)
os.environ["AUTOCOMP_TORCH_PYTHON"] = str(_PYTHON)


def _reach() -> list[str]:
    """What shows the block holds here and reaches the Pythons this run starts: a child with this environment cannot
    import torch, and the cuda target (whose children get a bare one) reports it cannot run here for the lack of
    PyTorch."""
    from autocomp_zmq.hw_runners import get_target
    found = {name: importlib.util.find_spec(name) for name in BLOCKED}
    if any(found.values()):
        raise RuntimeError(f"another finder than the path finder finds them here: {found}")
    child = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, timeout=120)
    if child.returncode == 0 or "No module named 'torch'" not in child.stderr:
        raise RuntimeError(f"a child Python imports torch ({child.returncode}): {child.stderr[-500:]}")
    unmet = get_target("cuda", device="cpu").unmet_requirements()
    if not any("No module named 'torch'" in line for line in unmet):
        raise RuntimeError(f"the cuda target's Python has PyTorch: unmet_requirements() = {unmet}")
    return unmet


def pytest_configure(config):
    try:
        config.stash[_UNMET] = _reach()
    except Exception as exc:
        raise pytest.UsageError(f"tests/without_cuda_extra.py: the block's reach is not shown: {exc}") from exc


def pytest_report_header(config):
    return [f"without the cuda extra (tests/without_cuda_extra.py): {' and '.join(BLOCKED)} cannot be imported here "
            f"nor in the Pythons this run starts (AUTOCOMP_TORCH_PYTHON={_PYTHON})",
            "the cuda target's unmet_requirements(): " + "; ".join(config.stash.get(_UNMET, []))]


def pytest_unconfigure(config):
    shutil.rmtree(_HOME, ignore_errors=True)
