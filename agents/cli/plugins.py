"""`plugins`: what can be plugged in and where each comes from: every target, search policy and agent
implementation by name, its "module:Class", whether it is built in or which installed package declares it, and
each policy's own options as the flags `run` takes. Nothing is imported but the policies (to read their
options); a policy that cannot be loaded is listed with its error."""
from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from autocomp_zmq import plugins
from autocomp_zmq.agents.engine.policy import POLICIES, UnknownPolicyError
from autocomp_zmq.agents.run.runconfig import flag_of, policy_options
from autocomp_zmq.agents.workers import registry as agents
from autocomp_zmq.hw_runners import registry as targets
from autocomp_zmq.protocols.jobs import ROLES


def _policy_flags(name: str) -> str:
    try:
        return ", ".join(flag_of(option) for option in policy_options(name)) or "-"
    except UnknownPolicyError as exc:
        return f"cannot be loaded: {exc}"


def rows() -> list[dict]:
    """One row per plug-in: kind, name, path, origin (and a policy's flags)."""
    out = [{"kind": "target", "name": e.name, "path": e.path, "origin": e.origin} for e in targets.entries().values()]
    out += [{"kind": "policy", "name": e.name, "path": e.path, "origin": e.origin, "flags": _policy_flags(e.name)}
            for e in plugins.table("policies", POLICIES).values()]
    out += [{"kind": "agent", "name": f"{role}.{name}", "path": e.path, "origin": e.origin}
            for role in ROLES for name, e in agents.entries(role).items()]
    return out


def register(app: typer.Typer, console: Console) -> None:
    @app.command(name="plugins")
    def plugins_command(as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False) -> None:
        """List the targets, search policies and agent implementations, built in and installed, and the flags of
        each policy's own options."""
        found = rows()
        if as_json:
            for row in found:
                print(json.dumps(row))
            return
        table = Table(title="plug-ins (`name = \"module:Class\"` in the entry-point groups autocomp_zmq.targets, "
                            ".policies, .agents)")
        for col in ("kind", "name", "module:Class", "from", "own flags (policies)"):
            table.add_column(col, overflow="fold")
        for row in found:
            table.add_row(row["kind"], row["name"], row["path"], row["origin"], row.get("flags", ""))
        console.print(table)
