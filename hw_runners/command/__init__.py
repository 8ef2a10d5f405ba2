"""Command targets: a target whose evaluation is the user's own command, declared by a folder with no Python.

A folder holding a target.toml with a [command] table (spec.py), a prompt pack and problems/<name>/problem.toml
is a target: the built-in ones are the folders of hw_runners/ without an __init__.py (hostcpu/), others are
the folders named in $AUTOCOMP_TARGET_PATH (colon-separated; each a target folder or a folder of them). The
target registry finds them (registry.command_folders) and asks folder_target for each one's class, a
CommandTarget (target.py) at home in the folder; its offline heuristic, if it names heuristic.py's
VariantHeuristic, replays the problems' listed schedule variants."""
from __future__ import annotations

from pathlib import Path

from autocomp_zmq.hw_runners.command.target import CommandTarget


def folder_target(folder: Path) -> type[CommandTarget]:
    """The target class of one command-target folder (its name is set by the registry from target.toml)."""
    return type(f"CommandTarget_{folder.name}", (CommandTarget,), {"home": folder})


__all__ = ["CommandTarget", "folder_target"]
