"""Code as edits (Autocomp's use_edits): a coder answers with old/new pairs to apply to the current kernel instead of
the whole file, which keeps a model from dropping or mangling the parts of a large kernel it had no reason to touch.

The answer's edits are a JSON object in a ```json block, {"edits": [{"old": ..., "new": ...}, ...]}, applied in
order, each to the code the ones before it left. An edit's old text must occur exactly once: as it is, else with
whitespace ignored line by line (models re-indent and re-space what they quote); an edit that matches nowhere, or
more than once, or an answer whose edits cannot be read, is an AnswerError of kind "bad_edits" that names the edit
and why, which the agent gives back to the model when it asks for the whole kernel instead (agents/workers/llm/agent.py).
"""
from __future__ import annotations

import re

import msgspec

from autocomp_zmq.agents.workers.llm.parse import AnswerError, strip_reasoning
from autocomp_zmq.protocols.envelope import convert

_JSON_BLOCK = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*json[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.S | re.M | re.I)


class Edit(msgspec.Struct, forbid_unknown_fields=True):
    old: str
    new: str


class _Answer(msgspec.Struct):
    edits: list[Edit]


def _bad(message: str) -> AnswerError:
    return AnswerError("bad_edits", message)


def parse_edits(answer: str) -> list[Edit]:
    """The edits of an answer: its last ```json block (or the whole answer) read as {"edits": [...]}."""
    text = strip_reasoning(answer)
    blocks = [m.group(2) for m in _JSON_BLOCK.finditer(text)] or [text]
    try:
        data = msgspec.json.decode(blocks[-1].strip().encode())
    except msgspec.DecodeError as exc:
        raise _bad(f"the edits are not valid JSON ({exc}); write one ```json block holding "
                   '{"edits": [{"old": ..., "new": ...}]}') from None
    if isinstance(data, list):     # a bare list of edits is what was meant
        data = {"edits": data}
    try:
        edits = convert(data, _Answer).edits
    except msgspec.ValidationError as exc:
        raise _bad(f'the edits do not have the asked shape {{"edits": [{{"old": ..., "new": ...}}]}} ({exc})') \
            from None
    if not edits:
        raise _bad("the answer holds no edits")
    return edits


def _norm(line: str) -> str:
    return " ".join(line.split())


def _lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _loose(code: str, edit: Edit, n: int) -> str:
    """The edit applied to the one run of whole lines that equals its old text with whitespace ignored."""
    old = _lines_of(edit.old)
    if not old:
        raise _bad(f"edit {n}: its old text is empty; quote the lines to change")
    lines, want = code.split("\n"), [_norm(x) for x in old]
    normed = [_norm(x) for x in lines]
    at = [i for i in range(len(lines) - len(old) + 1) if normed[i:i + len(old)] == want]
    if len(at) != 1:
        where = "nowhere in the current code" if not at else f"{len(at)} times (at lines " + \
            ", ".join(str(i + 1) for i in at[:5]) + ")"
        raise _bad(f"edit {n}: its old text ({old[0].strip()[:80]!r}...) matches {where}, even with whitespace "
                   "ignored; quote lines of the current code exactly, with enough of them to match once")
    i = at[0]
    new = edit.new.split("\n")
    was, now = _indent(old[0]), _indent(lines[i])
    if was != now and all(x.startswith(was) or not x.strip() for x in new):   # the quote was re-indented: so is new
        new = [now + x[len(was):] if x.strip() else x for x in new]
    return "\n".join(lines[:i] + new + lines[i + len(old):])


def apply_edits(code: str, edits: list[Edit]) -> str:
    """The code with every edit applied in order (each exactly once), or AnswerError("bad_edits") naming the first
    edit that cannot be."""
    for n, edit in enumerate(edits, 1):
        if not edit.old.strip():
            raise _bad(f"edit {n}: its old text is empty; quote the lines to change")
        count = code.count(edit.old)
        if count == 1:
            code = code.replace(edit.old, edit.new)
        elif count > 1:
            raise _bad(f"edit {n}: its old text ({edit.old.strip()[:80]!r}...) occurs {count} times in the current "
                       "code; quote enough lines around it to match once")
        else:
            code = _loose(code, edit, n)
    return code
