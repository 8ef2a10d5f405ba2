"""Command targets: a target whose evaluation is the user's own command, declared by a folder with no Python.

A folder holding a target.toml with a [command] table (spec.py), a prompt pack and problems/<name>/problem.toml
is a target: the built-in ones are the folders of hw_runners/ without an __init__.py (hostcpu/), others are
the folders named in $AUTOCOMP_TARGET_PATH (colon-separated; each a target folder or a folder of them).
Each is registered here as a CommandTarget (target.py) under the name its target.toml gives; its offline
heuristic, if it names heuristic.py's VariantHeuristic, replays the problems' listed schedule variants."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from autocomp_zmq.hw_runners.base import register
from autocomp_zmq.hw_runners.command.target import CommandTarget

_BUILTIN = Path(__file__).resolve().parent.parent


def target_folders() -> list[Path]:
    """Every folder that declares a command target: built-in first, then $AUTOCOMP_TARGET_PATH's."""
    roots = [p for p in sorted(_BUILTIN.iterdir()) if p.is_dir() and not (p / "__init__.py").exists()]
    for entry in filter(None, os.environ.get("AUTOCOMP_TARGET_PATH", "").split(os.pathsep)):
        path = Path(entry).resolve()
        if (path / "target.toml").exists():
            roots.append(path)
        elif path.is_dir():
            roots += sorted(p for p in path.iterdir() if p.is_dir())
    found = []
    for folder in roots:
        try:
            if "command" in tomllib.loads((folder / "target.toml").read_text()):
                found.append(folder)
        except (OSError, tomllib.TOMLDecodeError):
            continue        # not a target folder (a bad descriptor of a listed one fails when the target is used)
    return found


def register_folder(folder: Path) -> type[CommandTarget]:
    meta = tomllib.loads((folder / "target.toml").read_text())
    name = meta.get("target") or folder.name
    cls = type(f"CommandTarget_{name}", (CommandTarget,), {"home": folder, "__doc__": meta.get("description")})
    return register(name)(cls)


for _folder in target_folders():
    register_folder(_folder)

__all__ = ["CommandTarget", "register_folder", "target_folders"]
