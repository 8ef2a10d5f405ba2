"""Imported first by every bench script, so that `python bench/<script>.py` runs from any directory in a checkout
that was never installed, as `python launch.py` does: there the checkout's folder is bound as the autocomp_zmq
package (agents/ is autocomp_zmq.agents) and the runs a script starts start their workers by launch.py's path
(agents/run/localagents.py: worker_argv). Where autocomp_zmq is installed (`pip install -e .`), that install is used.
The repository root goes on sys.path too, for the scripts' `tests.*` and `bench.*` imports.

A script imports it as `_checkout` when run as a file (its folder, bench/, is sys.path[0]) and as `bench._checkout`
when it is itself imported as `bench.<script>` (tests/system/test_bus_hardening.py) or run with `python -m`."""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
if "autocomp_zmq" not in sys.modules and importlib.util.find_spec("autocomp_zmq") is None:
    _package = types.ModuleType("autocomp_zmq")
    _package.__path__ = [str(ROOT)]
    _package.__checkout__ = True
    sys.modules["autocomp_zmq"] = _package
