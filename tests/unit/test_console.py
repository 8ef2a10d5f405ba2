"""The consoles people read (agents/console.py): text from models and candidates shows its control characters
instead of obeying them, while the console's own styles still reach the terminal."""
from __future__ import annotations

import io

from rich.table import Table
from rich.text import Text

from autocomp_zmq.agents.console import SafeConsole, printable


def test_control_sequences_are_shown_and_styles_kept():
    buf = io.StringIO()
    console = SafeConsole(file=buf, force_terminal=True, width=100, highlight=False)
    console.print("title\x1b]0;owned\x07 clip\x1b]52;c;Zm9v\x07 clear\x1b[2J", markup=False)
    console.print(Text("bold\x1b[31m", style="bold"))
    table = Table("kernel")
    table.add_row("cell\x1b[2J\x9b2J\x7f")
    console.print(table)
    out = buf.getvalue()
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\x9b" not in out and "\x7f" not in out
    assert "\x1b[1m" in out                               # the console's own bold still goes out
    assert "\u241b]0;owned" in out and "\u241b[2J" in out


def test_printable_keeps_tabs_newlines_and_length():
    text = "a\tb\nc\x1bd\x00e\x9b"
    assert printable(text) == "a\tb\nc\u241bd\u2400e\ufffd" and len(printable(text)) == len(text)
