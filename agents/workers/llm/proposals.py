"""Model-proposed menu options (Autocomp's menu_strategy = "one-shot"): reading a strategist's answer into new menu
options. Each bullet line "- title: description" is one option; its id is derived from its title ("new-" and a hash),
so that the same idea proposed for two parents is one option in `show`. Options whose title repeats one of the
menu's, or an earlier line's, are left out; an answer with none left is an AnswerError of kind "no_options"."""
from __future__ import annotations

import hashlib
import re

from autocomp_zmq.agents.workers.llm.parse import AnswerError, strip_reasoning
from autocomp_zmq.protocols.jobs import MenuOption

_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+(.+?)\s*$")
TITLE_CHARS, DESCRIPTION_CHARS = 120, 1500


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def parse_proposals(answer: str, count: int, titles: list[str]) -> list[MenuOption]:
    """Up to `count` new options from the answer's bullet lines, none with the title of the menu's `titles`."""
    seen = {_words(t) for t in titles}
    out = []
    for line in strip_reasoning(answer).split("\n"):
        m = _BULLET.match(line)
        if not m:
            continue
        text = m.group(1).replace("**", "").strip()
        title, sep, description = text.partition(": ")
        if not sep or len(title) > TITLE_CHARS:     # no title of its own: its first words are one
            title, description = " ".join(text.split()[:8]), text
        key = _words(title)
        if not key or key in seen:
            continue
        seen.add(key)
        option_id = "new-" + hashlib.sha256(key.encode()).hexdigest()[:8]
        out.append(MenuOption(id=option_id, title=title[:TITLE_CHARS],
                              description=description.strip()[:DESCRIPTION_CHARS]))
        if len(out) == count:
            break
    if not out:
        raise AnswerError("no_options", "the answer proposes no new option (write one per line: "
                                        "'- title: description', none already in the menu)")
    return out
