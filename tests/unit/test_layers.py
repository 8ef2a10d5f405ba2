"""The layers: every product module's imports of the product (at the top of a file or inside a function) follow
the rule table in import_rules.toml, which docs/architecture.md explains. A new package needs its row there."""
from __future__ import annotations

import ast
import tomllib
from graphlib import TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = tomllib.loads((Path(__file__).with_name("import_rules.toml")).read_text())
FOLDERS = ("agents", "bus", "protocols", "sandbox", "hw_runners", "cluster")
# code that runs in another world, not the product's: the traced kernel's front end, the sandboxed child, the
# SDK side of a device, and the kernels that are a target's problems (data, read by the target)
SEPARATE = ("hw_runners/trainium_sim/frontend", "hw_runners/trainium_sim/sandboxed", "hw_runners/trainium/sdk_side",
            "hw_runners/cuda/child")
DATA = "problems"


def _product_files() -> list[Path]:
    files = [ROOT / "launch.py", ROOT / "plugins.py", ROOT / "sdk.py"]
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if not rel.as_posix().startswith(SEPARATE) and DATA not in rel.parts[:-1]:
                files.append(path)
    return files


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_of(p) for p in _product_files()}


def unit(module: str) -> str:
    """The rule-table row a module (autocomp_zmq. prefix removed) falls under: a subpackage of agents/ or
    hw_runners/, a module directly in agents/ (agents.console), else its top-level package."""
    parts = module.split(".")
    if len(parts) > 1 and parts[0] in ("agents", "hw_runners"):
        if (ROOT / parts[0] / parts[1] / "__init__.py").exists() or parts[0] == "agents":
            return ".".join(parts[:2])
    return parts[0]


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for each product module the file imports: `from autocomp_zmq.x import y` counts as
    importing x.y when y is a module, else x."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}".removeprefix("autocomp_zmq.") in MODULES
                     else node.module for a in node.names]
        else:
            continue
        found += [(node.lineno, n.removeprefix("autocomp_zmq.")) for n in names if n.startswith("autocomp_zmq.")]
    return found


def _allowed(importer: str) -> set[str] | None:
    table = RULES["may_import"]
    if importer in table:
        return set(table[importer])
    if importer.startswith("hw_runners."):
        return set(table["hw_runners.*"])
    return None


def _edges():
    for path in _product_files():
        importer = unit(_module_of(path))
        for line, module in imports(path):
            yield f"{path.relative_to(ROOT)}:{line}", importer, unit(module), module


EXCEPTIONS = {(e["importer"], e["imported"]) for e in RULES["exception"]}


def test_every_import_follows_the_layers():
    offenders = [f"{where} ({importer} imports {module})" for where, importer, imported, module in _edges()
                 if imported != importer and imported not in (_allowed(importer) or set())
                 and (importer, imported) not in EXCEPTIONS]
    assert not offenders, "imports the layers refuse (tests/unit/import_rules.toml): " + "; ".join(offenders)


def test_every_unit_has_a_row():
    units = {unit(m) for m in MODULES}
    assert not [u for u in units if _allowed(u) is None], "packages without a row in import_rules.toml"


def test_every_exception_is_still_needed_and_explained():
    used = {(importer, imported) for _, importer, imported, _ in _edges()}
    assert all(e["why"].strip() for e in RULES["exception"])
    assert EXCEPTIONS <= used, f"exceptions nothing needs any more: {sorted(EXCEPTIONS - used)}"


def test_the_checker_sees_imports_inside_functions_and_from_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from autocomp_zmq.agents import store\n"
                      "def f():\n    from autocomp_zmq.agents.run.runconfig import RunConfig\n"
                      "    import autocomp_zmq.bus.router\n")
    found = [m for _, m in imports(source)]
    assert found == ["agents.store", "agents.run.runconfig", "bus.router"]
    assert [unit(m) for m in found] == ["agents.store", "agents.run", "bus"]
    assert unit("hw_runners.trainium_sim.heuristic.agent") == "hw_runners.trainium_sim"
    assert unit("hw_runners.base") == "hw_runners" and unit("agents.console") == "agents.console"


def test_every_agents_package_says_what_it_owns():
    packages = [p for p in (ROOT / "agents").rglob("__init__.py") if "__pycache__" not in p.parts]
    missing = [str(p.relative_to(ROOT)) for p in packages if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"packages without a docstring: {missing}"


def test_the_rules_are_layers_without_a_cycle():
    """Each unit only below the units that may import it: a cycle in the table would let two packages import
    each other again."""
    graph = {importer: set(imported) - {importer} for importer, imported in RULES["may_import"].items()}
    TopologicalSorter(graph).prepare()      # raises CycleError naming the cycle
