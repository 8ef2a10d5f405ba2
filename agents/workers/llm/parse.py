"""Reading model answers as models write them. Reasoning written inline is removed first; then a plan
is the OPTION line that belongs to the PLAN and the text after PLAN, and code is the fenced block that
defines the kernel's entry point (after the helper blocks it needs). Anything else raises AnswerError
with a kind for the failure table: it is never taken as a plan or as code."""
from __future__ import annotations

import re
from typing import NamedTuple

from autocomp_zmq.protocols.jobs import Plan

# Accepted code fence tags by kernel language (a target's descriptor may name its own).
FENCE_TAGS = {"c": ("c", "cpp", "c++", "h", "cc"), "python": ("python", "py", "python3")}
KINDS = ("empty", "refusal", "no_code", "no_entry_point", "no_plan", "bad_edits", "no_options")


class AnswerError(ValueError):
    """The answer does not hold what was asked for; `kind` is one of KINDS."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# Inline reasoning, opening and closing: <think> (DeepSeek-R1, Qwen3, QwQ, Magistral), <thinking> and
# <reasoning> (prompted models), <|begin_of_thought|> (Sky-T1, OpenThoughts), [THINK] (Magistral 2509).
_REASONING = [(re.compile(rf"[ \t]*{o}", re.I), re.compile(c, re.I)) for o, c in (
    (r"<think>", r"</think>"), (r"<thinking>", r"</thinking>"), (r"<reasoning>", r"</reasoning>"),
    (r"<\|begin_of_thought\|>", r"<\|end_of_thought\|>"), (r"\[THINK\]", r"\[/THINK\]"))]
_ANY_CLOSE = re.compile("|".join(c.pattern for _, c in _REASONING), re.I)
_WRAPPER = re.compile(r"</?answer>|</?response>|<\|(?:begin|end)_of_solution\|>", re.I)   # markers go, text stays
_FENCE = re.compile(r"( {0,3})(`{3,}(?=[^`]*$)|~{3,})(.*)")


def _fence_open(line: str) -> tuple[int, str, str] | None:
    """(indent, marker, tag) when the line opens a code block."""
    if m := _FENCE.fullmatch(line):
        return len(m.group(1)), m.group(2), re.match(r"[\s{.]*([^\s{}:,]*)", m.group(3)).group(1).lower()
    return None


def _fence_closes(line: str, marker: str) -> bool:
    s = line.strip(" \t\r")
    return line[:4].strip(" ") != "" and len(s) >= len(marker) and s == marker[0] * len(s)


def _strip(text: str) -> tuple[str, bool]:
    """The answer without its reasoning, and whether a reasoning block never closed."""
    queue, out, closing, fence = (text or "").split("\n")[::-1], [], None, None
    while queue:
        line = queue.pop()
        if closing is not None:                       # inside reasoning: dropped up to its closing tag
            if m := closing.search(line):
                closing = None
                queue.append(line[m.end():])
            continue
        if fence is not None:                         # a code block of the answer is kept as it is,
            if _ANY_CLOSE.fullmatch(line.strip()):    # but a bare </think> line is never code
                out, fence = [], None
                continue
            fence = None if _fence_closes(line, fence) else fence
        elif opened := _fence_open(line):
            fence = opened[1]
        elif found := next(((m, c) for o, c in _REASONING if (m := o.match(line))), None):
            closing = found[1]
            queue.append(line[found[0].end():])       # the closing tag may be on the same line
            continue
        elif m := _ANY_CLOSE.search(line):            # a closing tag alone: all before it was reasoning
            out = []
            queue.append(line[m.end():])
            continue
        else:
            line = _WRAPPER.sub("", line)
        out.append(line)
    return "\n".join(out).strip("\n"), closing is not None


def strip_reasoning(text: str) -> str:
    """The answer without the reasoning a model wrote inline (an unclosed block runs to the end)."""
    return _strip(text)[0]


_REFUSAL = re.compile(
    r"\b(?:I(?:'|’)?m sorry|I am sorry|I apologi[sz]e|sorry, but|I (?:can(?:'|’)?t|cannot|can not|won(?:'|’)?t|"
    r"will not|must decline|am unable to|am not able to)|I(?:'|’)m (?:unable|not able) to|as an AI\b)", re.I)


def _no_answer(text: str, unclosed: bool) -> None:
    """Raise for an answer that is empty or declines (a short one, or one that starts by declining)."""
    if not text.strip():
        raise AnswerError("empty", "the answer is empty after its reasoning: the reasoning block never closes "
                                   "(cut off?)" if unclosed else "the answer is empty")
    if (m := _REFUSAL.search(text)) and (len(text) < 600 or m.start() < 100):
        raise AnswerError("refusal", f"the model declined: {' '.join(text.split())[:120]!r}")


# ---------------------------------------------------------------- plans
# "OPTION: id", "**Option** - `id`", "## Option" (id on the next line); "PLAN:", "Plan - ...", "### Plan"
_OPTION = re.compile(r"[ \t>#*_-]*(?:(?:chosen|selected|my|final)[ \t]+)?option[ \t*_]*(?:#?\d+[ \t*_]*)?"
                     r"(?:(?:[:=]|(?<=[ \t*_])[-–—])(.*)|[ \t*_]*)", re.I)
_PLAN = re.compile(r"[ \t>#*_-]*plan[ \t*_]*(?:(?::|(?<=[ \t*_])[-–—])(.*)|[ \t*_]*)", re.I)
_TOKEN = re.compile(r"[A-Za-z0-9_][\w.\-]*")


def _option_id(value: str, menu_ids: list[str], titles: dict[str, str]) -> str | None:
    """The menu id in an OPTION line's value (which may hold a list number, markdown or a title), else the option
    whose title it holds, else None."""
    norm = lambda s: s.strip(".-").lower().replace("_", "-")   # noqa: E731
    menu, tokens = {norm(m): m for m in menu_ids}, [t.rstrip(".-") for t in _TOKEN.findall(value)]
    flat = " ".join(t.lower() for t in tokens)
    return next((menu[norm(t)] for t in tokens if norm(t) in menu), None) or \
        next((m for m in menu_ids if titles.get(m) and " ".join(_TOKEN.findall(titles[m].lower())) in flat), None)


# How a plan's option was found (Plan.choice): an OPTION line naming an offered option; an offered option named in the
# prose (by id, by its number in the menu as shown, by its title); an option of the target not offered in this step;
# none (the plan goes to the coder as free text, as Autocomp's planners write them)
OPTION_LINE, IN_PROSE, OFF_MENU, FREE_TEXT = "option line", "prose", "off menu", "free text"
_NUMBERED = re.compile(r"\b(?:optimi[sz]ations?|options?)\b[\s*_]*(?:[:\-–—(]\s*)?(?:#|no\.\s*|number\s*)?(\d{1,2})\b"
                       r"(?![.,]\d|\s*(?:x\b|%|times))|#(\d{1,2})\s*[:)]", re.I)


def parse_plan(answer: str, menu_ids: list[str], titles: dict[str, str] | None = None,
               known: list[str] = ()) -> Plan:
    """The plan in a planner's answer, its whole text kept (a diagnosis before the PLAN header included; the chosen
    OPTION line and bare PLAN headers left out). Its option: the OPTION line's (the one before the last PLAN
    header), else the first offered option the prose names (by id, by its number in the menu as shown, 1-based,
    or by its title); an option of the target (`known`) not offered in this step is taken and marked off menu; a
    plan naming none is kept as free text (option id "")."""
    titles = titles or {}
    text, unclosed = _strip(answer)
    lines, blocks = text.split("\n"), _blocks(text)
    fenced = {i for b in blocks for i in b.span}
    # OPTION and PLAN lines outside code blocks; inside them only if the whole answer is in one
    found = [[(i, m.group(1) or "") for i, line in enumerate(lines) if (m := regex.fullmatch(line))]
             for regex in (_OPTION, _PLAN)]
    opts, plans = ([x for x in xs if x[0] not in fenced] or xs for xs in found)
    if not opts:             # an OPTION line is an answer, whatever apology precedes it
        _no_answer(text, unclosed)
    skip: set[int] = set()
    option, choice = None, FREE_TEXT
    if opts:
        # the OPTION line nearest before the last PLAN header that has one; else the last OPTION line
        pick = next(((o, p) for p in reversed(plans) for o in reversed(opts) if o[0] < p[0]), None)
        at, value = (pick or (opts[-1], None))[0]
        skip = {at}
        if not _TOKEN.search(value):                      # the id on the next line
            nxt = next((i for i in range(at + 1, len(lines)) if lines[i].strip()), None)
            if nxt is not None and nxt not in {p[0] for p in plans}:
                value = lines[nxt]
                skip.add(nxt)
        option = _option_id(value, list(menu_ids) + [k for k in known if k not in menu_ids], titles)
        choice = OPTION_LINE
    if option is None or option not in set(menu_ids) | set(known):
        option, choice = _named_in_prose([ln for i, ln in enumerate(lines) if i not in fenced], menu_ids, titles,
                                         known)
    if option is not None and option not in menu_ids:
        choice = OFF_MENU
    if blocks and len(blocks) == 1 and blocks[0].span == range(0, len(lines)):   # the whole answer in one block
        skip |= {blocks[0].span[0], blocks[0].span[-1]}
    headers, kept = {p[0]: p[1] for p in plans}, []
    for i, line in enumerate(lines):
        if i in skip:
            continue
        if i in headers:                                  # "PLAN:" goes; text on its line stays
            line = headers[i].lstrip(" \t*_")
            if not line.strip():
                continue
        kept.append(line)
    plan = "\n".join(kept).strip()
    if len(plan) < 20:
        raise AnswerError("no_plan", "the plan has no description after 'PLAN:'")
    return Plan(text=plan, option_id=option or "", choice=choice)


def _named_in_prose(lines: list[str], menu_ids: list[str], titles: dict[str, str],
                    known: list[str]) -> tuple[str | None, str]:
    """The option the prose names first, and how: by a distinctive id (one with - or _), by its number in the
    offered menu, or by its title (words in order, across line breaks and punctuation)."""
    prose = "\n".join(lines)
    ids = list(menu_ids) + [k for k in known if k not in menu_ids]
    hits = []
    for m in _TOKEN.finditer(prose):
        token = m.group(0).rstrip(".-").lower().replace("_", "-")
        match = next((i for i in ids if i.lower().replace("_", "-") == token and re.search(r"[-_]", i)), None)
        if match:
            hits.append((m.start(), match))
    for m in _NUMBERED.finditer(prose):
        n = int(m.group(1) or m.group(2))
        if 1 <= n <= len(menu_ids):
            hits.append((m.start(), menu_ids[n - 1]))
    for option in ids:
        words = re.findall(r"[a-z0-9]+", titles.get(option, "").lower())
        if len(words) >= 3 and (m := re.search(r"\b" + r"[^a-z0-9]+".join(words) + r"\b", prose, re.I)):
            hits.append((m.start(), option))
    return (min(hits)[1], IN_PROSE) if hits else (None, FREE_TEXT)


# ---------------------------------------------------------------- code
class _Block(NamedTuple):
    tag: str
    body: str
    closed: bool
    prose: str      # the text between the previous block and this one
    span: range     # its line numbers, fences included


def _blocks(text: str) -> list[_Block]:
    blocks, lines, i, prose = [], text.split("\n"), 0, []
    while i < len(lines):
        if not (opened := _fence_open(lines[i])):
            prose.append(lines[i])
            i += 1
            continue
        (indent, marker, tag), start, body = opened, i, []
        for i in range(i + 1, len(lines) + 1):
            if i == len(lines) or _fence_closes(lines[i], marker):
                break
            body.append(lines[i][min(indent, len(lines[i]) - len(lines[i].lstrip(" "))):])
        blocks.append(_Block(tag, "".join(b + "\n" for b in body), i < len(lines), "\n".join(prose),
                             range(start, i + 1)))
        prose, i = [], i + 1
    return blocks


_C_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_C_DEF = r"[A-Za-z_][\w \t*]*?(?:[ \t*]|\n[ \t]*)(\w+)\s*\("     # a type, then name( on its line or the next
_BODY = re.compile(r"\s*\{")


def _c_functions(code: str, top_level: bool) -> set[str]:
    """The C functions that code (without comments) defines: a type, name(params), then a body."""
    names = set()
    for m in re.finditer(("^" if top_level else r"^[ \t]*") + _C_DEF, code, re.M):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth, j = depth + {"(": 1, ")": -1}.get(code[j], 0), j + 1
        if _BODY.match(code, j):
            names.add(m.group(1))
    return names


def _defines(body: str, language: str) -> tuple[set[str], set[str]]:
    """Top-level names a block defines, and those of them that must not be defined twice."""
    if language == "python":
        found = re.findall(r"^(?:async[ \t]+)?def[ \t]+(\w+)|^class[ \t]+(\w+)|^(\w+)[ \t]*(?::[^=\n]*)?=(?!=)",
                           body, re.M)
        names = {n for group in found for n in group if n}
        for imported in re.findall(r"^(?:from[ \t]+\S+[ \t]+)?import[ \t]+\(?([^)\n]+)", body, re.M):
            names |= {part.split()[-1].split(".")[0] for part in imported.split(",") if part.strip()}
        return names, set()
    if language != "c":
        return set(), set()
    code = _C_NOISE.sub(lambda m: m.group() if m.group()[0] in "\"'" else " ", body)
    strong = _c_functions(code, top_level=True) | set(re.findall(      # functions, initialized globals
        r"^[A-Za-z_][\w \t*]*?[\s*](\w+)[ \t]*(?:\[[^\]\n]*\][ \t]*)*=", code, re.M))
    return strong | set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", code, re.M)), strong


def _defines_entry(body: str, entry_point: str, language: str) -> bool:
    """Whether a block defines the entry point (not calls it, not declares it, not in a comment)."""
    if language == "c":
        return entry_point in _c_functions(_C_NOISE.sub(" ", body), top_level=False)
    if language == "python":
        return re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", body, re.M) is not None
    return re.search(rf"\b{re.escape(entry_point)}\b", body) is not None


_OLD = re.compile(r"\b(?:original|old|before|previous|existing|unchanged|baseline|for (?:reference|comparison)|"
                  r"current (?:code|kernel|version|implementation))\b", re.I)
_NEW = re.compile(r"\b(?:new|optimi[sz]ed|updated|final|revised|improved|rewrit\w*|complete|full|after|fixed|"
                  r"corrected|appl(?:y|ying|ied)|implement\w*|result)\b", re.I)


def _shows_old_code(block: _Block) -> bool:
    """Whether the lines that introduce a block say it is the old code."""
    intro = " ".join([ln for ln in block.prose.split("\n") if ln.strip()][-2:])
    return bool(_OLD.search(intro)) and not _NEW.search(intro)


def parse_code(answer: str, fence_tags: tuple[str, ...], entry_point: str, language: str) -> str:
    text, unclosed = _strip(answer)
    tags, shown = {t.lower() for t in fence_tags} | {""}, fence_tags[0] if fence_tags else ""
    blocks = _blocks(text)
    ours = [b for b in blocks if b.tag in tags]
    closed = [b for b in ours if b.closed]
    cut = AnswerError("no_code", f"the ```{shown} code block is not closed: the answer ends inside it (cut off?)")
    if not closed:
        if ours:
            raise cut
        _no_answer(text, unclosed)
        others = sorted({f"```{b.tag}" for b in blocks})
        raise AnswerError("no_code", f"the answer contains no ```{shown} code block"
                                     + (f" (only {', '.join(others)})" if others else ""))
    defining = [b for b in closed if _defines_entry(b.body, entry_point, language)]
    if not defining:
        if len(closed) < len(ours):
            raise cut
        raise AnswerError("no_entry_point", f"no ```{shown} code block defines the kernel's {entry_point}() "
                                            f"entry point ({len(closed)} block{'s' * (len(closed) > 1)} checked)")
    kernel = ([b for b in defining if not _shows_old_code(b)] or defining)[-1]   # models revise: the last
    if any(not b.closed and _defines_entry(b.body, entry_point, language) for b in ours[ours.index(kernel) + 1:]):
        raise cut                                     # a revised kernel was cut off
    # blocks of helpers (functions, macros, constants) that the kernel uses but does not define
    defined, strong = _defines(kernel.body, language)
    need = set(re.findall(r"[A-Za-z_]\w*", kernel.body)) - defined
    helpers = []
    for b in closed:
        if b in defining or re.search(rf"\b{re.escape(entry_point)}\s*\(", b.body):
            continue                                  # other versions, usage examples, calls
        names, its_strong = _defines(b.body, language)
        if names & need and "main" not in names and not its_strong & defined:
            helpers.append(b.body)
    return _after_includes(kernel.body, helpers) if helpers else kernel.body


_INCLUDE = re.compile(r"#[ \t]*include\b|import[ \t]|from[ \t]+\S+[ \t]+import[ \t]")


def _after_includes(kernel: str, helpers: list[str]) -> str:
    """The kernel with the helper blocks after its (top-level) #include / import lines."""
    lines = kernel.split("\n")
    at = max((i + 1 for i, line in enumerate(lines) if _INCLUDE.match(line)), default=0)
    head, rest = "".join(ln + "\n" for ln in lines[:at]), "\n".join(lines[at:]).lstrip("\n")
    return "\n".join(part for part in (head, *helpers, rest) if part)


def plan_in_prose(answer: str, menu_ids: list[str], titles: dict[str, str], known: list[str]) -> Plan:
    """The plan of an answer that also holds code or edits (one-phase mode): parse_plan on the prose around its code
    blocks. An answer that says too little to read as a plan gets its prose (or a note that there was none) as a
    free-text plan: its kernel is kept, since the call was paid for."""
    text = strip_reasoning(answer)
    fenced = {i for b in _blocks(text) for i in b.span}
    prose = "\n".join(line for i, line in enumerate(text.split("\n")) if i not in fenced).strip()
    try:
        return parse_plan(prose, menu_ids, titles, known)
    except AnswerError:
        return Plan(text=prose if len(prose) >= 20 else "(the answer gave its kernel without a plan)",
                    option_id="", choice=FREE_TEXT)


def parse_one_phase(answer: str, menu_ids: list[str], titles: dict[str, str], known: list[str],
                    fence_tags: tuple[str, ...], entry_point: str, language: str) -> tuple[Plan, str]:
    """A one-phase answer (a choice, its plan and the kernel in one): its plan_in_prose and the kernel as parse_code
    finds it."""
    code = parse_code(answer, fence_tags, entry_point, language)
    return plan_in_prose(answer, menu_ids, titles, known), code
