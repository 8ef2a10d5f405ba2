"""The target table: every target's name and where its class is, found without importing any target.

Three sources, one table (the product's plug-in mechanism, plugins.py): the folders of hw_runners/ whose
target.toml names its class (`class = "module:Class"`); command targets, folders whose target.toml has a
[command] table (hostcpu/, and the folders in $AUTOCOMP_TARGET_PATH); and the `autocomp_zmq.targets`
entry-point group of installed packages (`name = "module:Class"`), which may replace a built-in name. A
target's module is imported the first time the target is used; its class then learns its name if it does not
declare one (its home, unless it sets one, is its module's folder: base.home_of)."""
from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path

from autocomp_zmq import plugins
from autocomp_zmq.hw_runners.base import Target, UnknownTargetError

HERE = Path(__file__).resolve().parent
# a command target's class is made for its folder by the command/ package
COMMAND_TARGET = "autocomp_zmq.hw_runners.command:folder_target"


def _descriptor(folder: Path) -> dict | None:
    try:
        return tomllib.loads((folder / "target.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None          # not a target folder (a listed target's bad descriptor fails when it is used)


def command_folders(target_path: str | None = None) -> list[Path]:
    """Every folder that declares a command target: built-in first, then those of $AUTOCOMP_TARGET_PATH
    (colon-separated; each a target folder or a folder of them)."""
    if target_path is None:
        target_path = os.environ.get("AUTOCOMP_TARGET_PATH", "")
    roots = [p for p in sorted(HERE.iterdir()) if p.is_dir() and not (p / "__init__.py").exists()]
    for item in filter(None, target_path.split(os.pathsep)):
        path = Path(item).resolve()
        if (path / "target.toml").exists():
            roots.append(path)
        elif path.is_dir():
            roots += sorted(p for p in path.iterdir() if p.is_dir())
    return [folder for folder in roots if "command" in (_descriptor(folder) or {})]


@functools.lru_cache(maxsize=8)
def _table(target_path: str) -> tuple[dict[str, plugins.Entry], dict[str, Path]]:
    """(name -> entry, command target name -> its folder) for one value of $AUTOCOMP_TARGET_PATH."""
    builtin, folders = {}, {}
    for folder in sorted(p for p in HERE.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        meta = _descriptor(folder) or {}
        if "class" in meta:
            builtin[meta.get("target") or folder.name] = meta["class"]
    for folder in command_folders(target_path):
        name = (_descriptor(folder) or {}).get("target") or folder.name
        builtin[name], folders[name] = COMMAND_TARGET, folder
    entries = plugins.table("targets", builtin)
    folders = {name: folder for name, folder in folders.items() if entries[name].path == COMMAND_TARGET}
    for name, folder in folders.items():
        origin = "built-in (command folder)" if folder.parent == HERE else f"command folder {folder}"
        entries[name] = plugins.Entry(name, COMMAND_TARGET, origin)
    return entries, folders


def _current() -> tuple[dict[str, plugins.Entry], dict[str, Path]]:
    return _table(os.environ.get("AUTOCOMP_TARGET_PATH", ""))


def target_names() -> list[str]:
    return sorted(_current()[0])


def entries() -> dict[str, plugins.Entry]:
    """name -> where its class comes from, for `launch.py plugins`. Nothing is imported."""
    return dict(_current()[0])


def target_class(name: str) -> type[Target]:
    table, folders = _current()
    if name not in table:
        raise UnknownTargetError(f"unknown target {name!r}; available: {', '.join(sorted(table))}")
    try:
        return _load(table[name], folders.get(name))
    except plugins.PluginError as exc:       # callers report an unusable target the way they report an unknown one
        raise UnknownTargetError(str(exc)) from exc


@functools.cache
def _load(entry: plugins.Entry, folder: Path | None) -> type[Target]:
    found = plugins.load(entry, "targets")
    cls = found(folder) if folder is not None else found
    if not (isinstance(cls, type) and issubclass(cls, Target)):
        raise plugins.PluginError(f"target {entry.name!r} ({entry.origin}: {entry.path!r}) is not a subclass "
                                  "of autocomp_zmq.sdk.Target")
    declared = cls.__dict__.get("name")
    if declared is None:
        cls.name = entry.name
    elif declared != entry.name:
        raise plugins.PluginError(f"target {entry.name!r} ({entry.origin}): its class {cls.__qualname__} calls "
                                  f"itself {declared!r}")
    return cls
