"""One import namespace: the product is autocomp_zmq.*, and nothing imports its folders as top-level names
(an install adds only autocomp_zmq, so such an import would work in a checkout and fail installed)."""
from __future__ import annotations

import ast
import importlib.util
import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("agents", "bus", "protocols", "sandbox", "problems", "prompts", "hw_runners", "cluster")
TOP_LEVEL = set(FOLDERS) | {"launch"}
# the traced kernel's own world: trainium-sim's front end and the sandboxed child are not product imports
SEPARATE = ("hw_runners/trainium_sim/frontend", "hw_runners/trainium_sim/sandboxed")


def _python_files():
    for folder in (*FOLDERS, "bench", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(SEPARATE):
                yield path
    yield ROOT / "launch.py"


def test_no_module_imports_a_folder_as_a_top_level_package():
    offenders = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                          if n.split(".")[0] in TOP_LEVEL]
    assert not offenders, "import these through autocomp_zmq: " + ", ".join(offenders)


def test_every_code_package_is_installed():
    """A folder of product code that setup.py's package discovery missed would be missing from a wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"autocomp_zmq": "."} and "packages" not in config   # found, not listed
    spec = importlib.util.spec_from_file_location("autocomp_setup", ROOT / "setup.py")
    setup_py = importlib.util.module_from_spec(spec)
    cwd = os.getcwd()
    os.chdir(ROOT)                              # find_packages(".") looks at the checkout
    try:
        spec.loader.exec_module(setup_py)
        listed = set(setup_py.packages())
    finally:
        os.chdir(cwd)
    code = {"autocomp_zmq." + init.parent.relative_to(ROOT).as_posix().replace("/", ".")
            for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")
            if not init.parent.relative_to(ROOT).as_posix().startswith(SEPARATE)}
    assert code <= listed, f"setup.py does not find: {sorted(code - listed)}"


def test_all_sql_is_in_the_store_module():
    """agents/store/ owns every table: the readers (show, report, runs, summaries) call its queries."""
    offenders = []
    for path in _python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/", "bench/", "agents/store/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("execute", "executemany", "executescript") and node.args \
                    and (isinstance(node.args[0], (ast.JoinedStr, ast.BinOp))      # SQL text
                         or isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, "SQL outside agents/store/: " + ", ".join(offenders)
