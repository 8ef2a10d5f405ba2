"""Layout of the rendered modules: indented blocks and long calls wrapped at their top-level commas, so that the
kernels read as written by hand (an LLM may continue from them)."""
from __future__ import annotations

import textwrap

WIDTH = 110


def indent(text: str, n: int) -> str:
    return textwrap.indent(text, " " * n)


def _args(text: str) -> list[str]:
    """`text` split at the commas outside brackets and strings."""
    out, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    return out + [text[start:].strip()]


def wrap(line: str) -> str:
    """A call longer than WIDTH with its arguments continued under the opening bracket (other lines, comments
    among them, unchanged)."""
    if len(line) <= WIDTH or "(" not in line or "#" in line or not line.rstrip().endswith((")", "):")):
        return line
    head, rest = line.split("(", 1)
    tail = "):" if rest.rstrip().endswith("):") else ")"
    args = _args(rest.rstrip()[:-len(tail)])
    pad = " " * (len(head) + 1)
    lines, cur = [], head + "("
    for i, a in enumerate(args):
        piece = a + (", " if i < len(args) - 1 else tail)
        if len(cur) + len(piece.rstrip()) > WIDTH and cur.strip() != head.strip() + "(":
            lines.append(cur.rstrip())
            cur = pad
        cur += piece
    return "\n".join(lines + [cur])


def wrap_all(text: str) -> str:
    return "\n".join(wrap(line) for line in text.split("\n"))


def comment(text: str) -> str:
    """`text` as a block of # lines within WIDTH."""
    return "\n".join(textwrap.wrap(text, WIDTH - 2, initial_indent="# ", subsequent_indent="# ",
                                    break_on_hyphens=False)) + "\n"
