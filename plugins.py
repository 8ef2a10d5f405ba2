"""How the product finds what can be plugged into it: targets, search policies and agent implementations.

One mechanism for all three kinds. A kind is a table NAME -> "module:Class": the product's own entries, then
those installed packages declare in the kind's entry-point group (a plug-in may replace a built-in name). A
name is a string until it is asked for: only then is its module imported, so `launch.py targets` or a worker
never loads a plug-in (or an SDK) it does not use, and a broken plug-in fails where it is named, with its name,
not every command. Plug-ins import what they build on from `autocomp_zmq.sdk`.

    [project.entry-points."autocomp_zmq.targets"]
    mytarget = "my_pkg.target:MyTarget"
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points

GROUPS = {"targets": "autocomp_zmq.targets", "policies": "autocomp_zmq.policies", "agents": "autocomp_zmq.agents"}


class PluginError(LookupError):
    """A name nothing provides, a malformed "module:Class", or a module or class that cannot be loaded."""


@dataclass(frozen=True)
class Entry:
    name: str
    path: str            # "module:Class"
    origin: str          # "built-in", or the distribution whose entry point declared it


def table(kind: str, builtin: dict[str, str]) -> dict[str, Entry]:
    """Every entry of a kind: the built-in ones, then the installed packages' (which may replace a built-in).
    Nothing is imported."""
    out = {name: Entry(name, path, "built-in") for name, path in builtin.items()}
    for ep in entry_points(group=GROUPS[kind]):
        dist = getattr(ep, "dist", None)
        out[ep.name] = Entry(ep.name, ep.value, f"{dist.name} (plug-in)" if dist is not None else "plug-in")
    return out


def load(entry: Entry, kind: str) -> object:
    """Import the object an entry names. Errors name the entry, where it came from and what to write."""
    module, sep, attr = entry.path.partition(":")
    what = f"{kind[:-1]} {entry.name!r} ({entry.origin}: {entry.path!r})"
    if not sep or not module or not attr:
        raise PluginError(f"{what}: write \"module:Class\"")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:      # a plug-in's own import-time failure too: named here, not a traceback elsewhere
        raise PluginError(f"{what}: cannot import {module}: {type(exc).__name__}: {exc}") from exc
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise PluginError(f"{what}: {module} has no {attr}") from None
