"""The model's answers read into pack files: sections with their citations checked against the documentation's
chunks, a menu read as TOML, example kernels out of their fences, and every piece held to the size budgets.
An answer that cannot be read raises AnswerError (the build asks again, saying why); one over budget is trimmed
here with a note, after the build has asked once for a shorter one."""
from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field

from autocomp_zmq.packbuilder.sources import Chunk

_SOURCES = re.compile(r"^\s*[*_]*sources?[*_]*\s*:(.*)$", re.I)
_CITED = re.compile(r"\bS(\d+)\b")
_FENCE = re.compile(r"^\s*(```|~~~)")
_OPTION_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,60}\.[A-Za-z0-9]{1,8}")


class AnswerError(ValueError):
    """An answer not in the format asked; the message is what the model is told."""


@dataclass
class Section:
    title: str
    body: str
    sources: list[str]            # chunk ids, in the order cited
    note: str = ""                # what the budget cut, for the reviewer
    label: str = ""               # a menu option's title (its `title` is the option's id)


@dataclass
class Budget:
    section_chars: int
    part_chars: int


@dataclass
class Part:
    """One part's answer as sections (an option of the menu, an example kernel: one section each)."""
    key: str
    sections: list[Section]
    notes: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(s.title) + len(s.body) for s in self.sections)


def read_answer(key: str, text: str, chunks: dict[str, Chunk]) -> Part:
    text = _unwrap(text)
    sections = _menu(text) if key == "menu" else _sections(text)
    if not sections:
        raise AnswerError("it holds no sections" if key != "menu" else "it holds no [[option]] tables")
    for s in sections:
        unknown = [c for c in s.sources if c not in chunks]
        if not s.sources:
            raise AnswerError(f"'{s.title}' cites no sources (end it with a line `Sources: [S1]`)")
        if unknown:
            raise AnswerError(f"'{s.title}' cites {', '.join(unknown)}, which are not chunks of the documentation")
    if key == "examples":
        for s in sections:
            _code_of(s)
    titles = [s.title for s in sections]
    if len(set(titles)) != len(titles):
        raise AnswerError("two sections have the same heading" if key != "menu" else "two options have the same id")
    return Part(key, sections)


def _unwrap(text: str) -> str:
    """An answer wrapped whole in one ```markdown or ```toml fence, unwrapped."""
    m = re.fullmatch(r"\s*```[\w-]*\n(.*?)\n```\s*", text, re.S)
    return m.group(1) if m and "\n```" not in m.group(1) else text


def _sections(text: str) -> list[Section]:
    out: list[Section] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            out.append(Section(line[3:].strip().strip("`").strip(), "", []))
        elif out:
            cited = None if fenced else _SOURCES.match(line)
            if cited:
                out[-1].sources += [f"S{n}" for n in _CITED.findall(cited.group(1)) if f"S{n}" not in out[-1].sources]
            else:
                out[-1].body += line + "\n"
    for s in out:
        s.body = s.body.strip("\n")
    return out


def _menu(text: str) -> list[Section]:
    try:
        options = tomllib.loads(text).get("option")
    except tomllib.TOMLDecodeError as exc:
        raise AnswerError(f"it is not valid TOML ({exc})") from None
    if not isinstance(options, list):
        raise AnswerError("it has no [[option]] tables")
    out = []
    for o in options:
        if not all(isinstance(o.get(k), str) and o[k].strip() for k in ("id", "title", "description")):
            raise AnswerError("every [[option]] needs id, title and description strings")
        if not _OPTION_ID.fullmatch(o["id"]):
            raise AnswerError(f"option id {o['id']!r} is not short-kebab-case")
        sources = o.get("sources")
        if not isinstance(sources, list) or not all(isinstance(c, str) for c in sources):
            raise AnswerError(f"option {o['id']} needs sources = [\"S1\", ...]")
        out.append(Section(o["id"], o["description"].strip(), [c.strip("[] ") for c in sources],
                           label=o["title"].strip()))
    return out


def _code_of(s: Section) -> tuple[str, str]:
    """(technique line, code) of an example section."""
    if not _FILE_NAME.fullmatch(s.title):
        raise AnswerError(f"example heading {s.title!r} is not a file name such as vector_add.c")
    m = re.search(r"^\s*(```|~~~)[^\n]*\n(.*?)^\s*\1\s*$", s.body, re.S | re.M)
    if not m:
        raise AnswerError(f"example {s.title} has no fenced code block")
    technique = s.body[:m.start()].strip().splitlines()
    return (technique[0] if technique else ""), m.group(2)


def overruns(part: Part, budget: Budget) -> list[str]:
    """What is over budget, in words (empty: nothing)."""
    over = [f"'{s.title}' has {len(s.body):,} characters (budget {budget.section_chars:,})"
            for s in part.sections if len(s.body) > budget.section_chars]
    if part.size > budget.part_chars:
        over.append(f"the whole answer has {part.size:,} characters (budget {budget.part_chars:,})")
    return over


def trim(part: Part, budget: Budget) -> Part:
    """The part within budget: a section over it cut at a line break with a note (an example kernel, which a cut
    would break, left out), then trailing sections left out while the whole is over; each cut noted."""
    kept = []
    for s in part.sections:
        if len(s.body) <= budget.section_chars:
            kept.append(s)
        elif part.key == "examples":
            part.notes.append(f"left out example {s.title}: {len(s.body):,} characters, over the section budget of "
                              f"{budget.section_chars:,}")
        else:
            cut = s.body.rfind("\n", 0, budget.section_chars - 80)
            cut = cut if cut > 0 else budget.section_chars - 80
            s.note = f"(trimmed: {len(s.body) - cut:,} characters over the section budget of " \
                     f"{budget.section_chars:,} were cut)"
            s.body = s.body[:cut].rstrip()
            part.notes.append(f"trimmed '{s.title}' to the section budget")
            kept.append(s)
    while len(kept) > 1 and Part(part.key, kept).size > budget.part_chars:
        gone = kept.pop()
        part.notes.append(f"left out '{gone.title}': the part was over its budget of {budget.part_chars:,} characters")
    part.sections = kept
    return part


def cited(s: Section, chunks: dict[str, Chunk]) -> str:
    return "; ".join(chunks[c].source for c in s.sources)


def markdown_file(part: Part, heading: str, chunks: dict[str, Chunk]) -> str:
    out = [f"# {heading}\n"]
    for s in part.sections:
        out.append(f"## {s.title}\n\n{s.body}\n" + (f"\n{s.note}\n" if s.note else "")
                   + f"\nSources: {cited(s, chunks)}\n")
    return "\n".join(out)


def menu_file(part: Part, heading: str, chunks: dict[str, Chunk]) -> str:
    out = [f"# {heading}: a planner picks ONE option per step.\n"]
    for s in part.sections:
        description = f"{s.body} {s.note}" if s.note else s.body
        # JSON strings are TOML basic strings: the file is read back by tomllib before it is written
        out.append(f"[[option]]\n# sources: {cited(s, chunks)}\nid = {json.dumps(s.title)}\n"
                   f"title = {json.dumps(s.label)}\ndescription = {json.dumps(description)}\n")
    return "\n".join(out)


_COMMENT = {".py": "#", ".sh": "#", ".toml": "#"}


def example_files(part: Part, chunks: dict[str, Chunk]) -> dict[str, str]:
    """examples/<file> per example: a header saying the technique, that it was written from the documentation
    and never verified on the target, and its sources; then the code."""
    files = {}
    for s in part.sections:
        technique, code = _code_of(s)
        mark = _COMMENT.get("." + s.title.rsplit(".", 1)[-1], "//")
        header = [technique or "an example of the documentation",
                  "Written from the documentation by build-target; not yet verified on the target.",
                  f"Sources: {cited(s, chunks)}"]
        files[f"examples/{s.title}"] = "".join(f"{mark} {line}\n" for line in header) + "\n" + code
    return files
