"""The one reader of a target's prompt pack (isa.md, rules.md, menu.toml and the example kernels) as an ISA
profile and a problem family see it. The LLM prompts (agents/workers/llm/prompts.py) and a run's menu
(agents/run/runstart.py) both read the pack here, so a profile hides the same sections, list items, menu options
and examples everywhere."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from autocomp_zmq.hw_runners.base import DescriptorError, IsaProfile, TargetInfo

_ISA_MARK = re.compile(r"\s*<!--\s*isa:\s*([\w\-, ]+?)\s*-->\s*$")
_ITEM = re.compile(r"^(\s*)(?:\d+\.|[-*])\s")


@dataclass(frozen=True)
class PackView:
    isa: str                                   # isa.md under the profile
    rules: str                                 # rules.md under the profile
    menu: list[dict]                           # the menu options shown: id, title, description
    examples: tuple[tuple[str, str], ...]      # (file name, code) of the profile's example kernels


def read_pack(info: TargetInfo, isa: str = "", family: str = "") -> PackView:
    """A target's pack under ISA profile `isa` ("": the default; UnknownIsaError) for a problem family
    ("": every option). Raises DescriptorError for a pack file that cannot be read."""
    profile = info.isa_profile(isa)
    chosen = info.examples if profile.examples is None else profile.examples
    try:
        isa_text, rules = (for_profile(f.read_text(), profile.name) for f in (info.isa, info.rules))
        examples = tuple((e.name, e.read_text()) for e in chosen)
    except OSError as exc:
        raise DescriptorError(f"target {info.name}: unreadable prompt pack file: {exc}") from None
    return PackView(isa_text, rules, menu_entries(info, profile, family or None), examples)


def _profiles(mark: re.Match) -> set[str]:
    return {n.strip() for n in mark.group(1).split(",")}


def for_profile(text: str, profile: str) -> str:
    """A markdown page as one ISA profile sees it. A section whose heading is followed by an
    `<!-- isa: a, b -->` line is kept (without that line) only under those profiles, with its subsections;
    a list item whose first line ends with such a mark is kept (without the mark) only under those
    profiles, up to the next item, heading or blank line."""
    out: list[str] = []
    skip_level = 0          # > 0: inside a dropped section of this heading level
    skip_item = False       # inside a dropped list item
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        level = len(line) - len(line.lstrip("#")) if line.startswith("#") else 0
        if skip_level and level and level <= skip_level:
            skip_level = 0
        if skip_level:
            continue
        if skip_item and (level or not line.strip() or _ITEM.match(line)):
            skip_item = False
        if skip_item:
            continue
        if _ISA_MARK.fullmatch(line):
            continue
        if level and i + 1 < len(lines):
            nxt = _ISA_MARK.fullmatch(lines[i + 1])
            if nxt and profile not in _profiles(nxt):
                skip_level = level
                continue
        item_mark = _ISA_MARK.search(line) if _ITEM.match(line) else None
        if item_mark:
            if profile not in _profiles(item_mark):
                skip_item = True
                continue
            line = line[:item_mark.start()] + "\n"
        out.append(line)
    return "".join(out)


def shown_under(isa_names, profile: IsaProfile) -> bool:
    """Whether a menu option or prompt section that names the profiles it belongs to (None: all) is shown."""
    return not isa_names or profile.name in isa_names


def menu_entries(info: TargetInfo, profile: IsaProfile, family: str | None = None) -> list[dict]:
    """The target's optimization menu (menu.toml `[[option]]`s: id, title, description) as one ISA profile
    and one problem family see it: an option may name its profiles (`isa = [...]`) and the problem families
    it applies to (`families = [...]`; none: every family). Raises DescriptorError for an unusable menu."""
    try:
        options = tomllib.loads(info.menu.read_text())["option"]
        return [{"id": o["id"], "title": o["title"], "description": o["description"]} for o in options
                if shown_under(o.get("isa"), profile) and (not family or not o.get("families")
                                                          or family in o["families"])]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise DescriptorError(f"target {info.name} has no usable optimization menu at {info.menu}: {exc}") from None
