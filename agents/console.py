"""Rich consoles for people: never hard-wrapped when piped (paths and code stay whole in logs and
files), soft-wrapped by the terminal otherwise. Program text is printed with markup off by the callers."""
from __future__ import annotations

import sys

from rich.console import Console

PIPED_WIDTH = 1000    # wide enough that tables never squeeze or wrap a cell when written to a file


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPED_WIDTH
    # no emoji codes either: ":x:" in a model spec must stay ":x:"
    return Console(stderr=stderr, soft_wrap=True, width=width, emoji=False, highlight=False)


def latency_text(value: float, unit: str) -> str:
    """A latency as people read it: whole cycles with thousands separators, 4 significant digits otherwise."""
    return f"{value:,.0f} {unit}" if unit == "cycles" else f"{value:,.4g} {unit}"
