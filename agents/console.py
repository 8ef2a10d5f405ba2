"""Rich consoles for people: never hard-wrapped when piped (paths and code stay whole in logs and
files), soft-wrapped by the terminal otherwise. Program text is printed with markup off by the callers.

What they print is often written by a model or a candidate (kernels, plans, answers, compiler errors): its control
characters are shown, never obeyed. An ESC in such text could otherwise retitle the window, clear the screen, plant a
hyperlink or write the clipboard (OSC 52); each C0 control but tab and newline becomes its Unicode control picture
(ESC is shown as "␛"), DEL and the C1 controls likewise, one character for one, so styles keep their places."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.segment import Segment

PIPED_WIDTH = 1000    # wide enough that tables never squeeze or wrap a cell when written to a file
CONTROL_PICTURES = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)} | {0x7F: 0x2421} | \
    {c: 0xFFFD for c in range(0x80, 0xA0)}


def printable(text: str) -> str:
    """The text with its control characters shown rather than obeyed."""
    return text.translate(CONTROL_PICTURES)


class SafeConsole(Console):
    """A Console whose text segments cannot carry control sequences; its own (styles, cursor moves) still do."""

    def render(self, renderable, options=None):
        for segment in super().render(renderable, options):
            yield segment if segment.control else Segment(printable(segment.text), segment.style)


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else PIPED_WIDTH
    # no emoji codes either: ":x:" in a model spec must stay ":x:"
    return SafeConsole(stderr=stderr, soft_wrap=True, width=width, emoji=False, highlight=False)


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
