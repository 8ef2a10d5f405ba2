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


def latency_number(value: float, unit: str) -> str:
    """A latency's number as people read it: whole cycles with thousands separators, 4 significant digits
    otherwise (29.41 us, not 29)."""
    return f"{value:,.0f}" if unit == "cycles" else f"{value:,.4g}"


def latency_text(value: float, unit: str) -> str:
    return f"{latency_number(value, unit)} {unit}"


def duration_text(seconds: float | None) -> str:
    """A duration as people read it: 42 s, 3 min 05 s, 2 h 07 min ("-" when unknown)."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


# what a no-op proposal is, wherever one is counted (the run's last lines, show)
NOOP_NOTE = "plans the offline heuristic could not make: no menu option that survived dropout changes the " \
            "schedule; not failures"
