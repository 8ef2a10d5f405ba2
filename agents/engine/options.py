"""How an option is declared, for the run's own sections (agents/run/runsections.py) and for a search policy's
options alike (agents/engine/search.py): its type and bounds, its help and flags, and what a resumed run may do
with it. Here, under the engine, so that a policy declares its options without importing the run's
configuration, which is built from these declarations above it."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec

# What a resumed run may do with an option: FIXED ones would change the search (stored results must replay job
# for job), EXTEND ones are its budget, LOCAL ones concern this session's processes, SECURITY ones keep its
# remote workers able to reconnect.
FIXED, EXTEND, LOCAL, SECURITY = "fixed", "extend", "local", "security"


def opt(help: str = "", *flags: str, metavar: str = "", shown: str | None = None, resume: str = FIXED,
        flag: str | None = None) -> msgspec.Meta:
    """An option's declaration: its help, extra flags (e.g. "-T"), metavar, how --help shows its default,
    its resume rule, and the long flag when it is not the name's (--search for search.policy)."""
    return msgspec.Meta(extra={"help": help, "flags": flags, "metavar": metavar, "shown": shown, "resume": resume,
                               "flag": flag})


def bounded(kind: type, **bounds) -> Any:
    """A type with msgspec bounds (ge, gt, le, min_length...); `bounded(int, ge=1) | None` for optional ones."""
    return Annotated[kind, msgspec.Meta(**bounds)]
