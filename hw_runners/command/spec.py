"""The [command] table of a command target's target.toml, and its problem folders.

A command target is a folder (target.toml, a prompt pack, problems/) whose evaluation is the user's own
command: this module reads what that command is and which problems the folder holds, and says in one line
what is wrong with either. The product's common descriptor fields are read by base.TargetInfo."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import msgspec

from autocomp_zmq.hw_runners.base import DescriptorError
from autocomp_zmq.protocols.envelope import convert

# what {NAME} in the command's argv may name; anything else is a descriptor error, not a silent literal
PLACEHOLDERS = ("python", "home", "problem", "candidate", "seed", "workdir", "time_limit")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class CommandSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """[command]: how one candidate is evaluated."""
    argv: list[str]                    # the trusted command, with {placeholders}
    candidate: str                     # the file name the candidate is written to in the working directory
    timeout_s: float = 300.0           # the whole command, compile and measurement included
    # the command's own environment variables (besides PATH, HOME, TMPDIR, LANG and the AUTOCOMP_ ones it gets)
    env: dict[str, str] = {}


class Variant(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A schedule variant of a problem: a complete kernel and the menu options it applies (offline moves)."""
    file: str
    options: list[str]
    description: str = ""


class ProblemSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """problems/<name>/problem.toml: what the product reads of a problem; [harness] is the command's own."""
    family: str
    description: str
    start: str                         # the starting kernel, next to problem.toml
    dims: dict[str, int] = {}
    variant: list[Variant] = []
    harness: dict = {}                 # read by the command only (inputs, tolerances, ...)


def load_command(home: Path) -> CommandSpec:
    """The [command] table of home/target.toml; DescriptorError says what is wrong, in one line."""
    path = home / "target.toml"
    try:
        table = tomllib.loads(path.read_text()).get("command")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise DescriptorError(f"{path}: unreadable: {exc}") from None
    if table is None:
        raise DescriptorError(f"{path}: no [command] table (argv, candidate, timeout_s): a command target "
                              "declares the command that evaluates a candidate")
    try:
        spec = convert(table, CommandSpec)
    except msgspec.ValidationError as exc:
        raise DescriptorError(f"{path}: [command]: {exc}") from None
    if not spec.argv or not spec.argv[0]:
        raise DescriptorError(f"{path}: [command] argv is empty: it names the program that evaluates a candidate")
    unknown = sorted({m for arg in spec.argv for m in _PLACEHOLDER.findall(arg)} - set(PLACEHOLDERS))
    if unknown:
        raise DescriptorError(f"{path}: [command] argv names unknown placeholders {unknown}; known: "
                              + ", ".join("{" + p + "}" for p in PLACEHOLDERS))
    if not spec.timeout_s > 0:
        raise DescriptorError(f"{path}: [command] timeout_s must be a positive number of seconds, "
                              f"not {spec.timeout_s}")
    if "/" in spec.candidate or spec.candidate in ("", ".", ".."):
        raise DescriptorError(f"{path}: [command] candidate must be a plain file name, not {spec.candidate!r}")
    return spec


def expand(argv: list[str], values: dict[str, str]) -> list[str]:
    """argv with every {placeholder} replaced (load_command has checked that each is known)."""
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in argv]


def load_problem(folder: Path) -> ProblemSpec:
    path = folder / "problem.toml"
    try:
        spec = convert(tomllib.loads(path.read_text()), ProblemSpec)
    except (OSError, tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise DescriptorError(f"{path}: {exc}") from None
    missing = [f for f in (spec.start, *(v.file for v in spec.variant)) if not (folder / f).is_file()]
    if missing:
        raise DescriptorError(f"{path}: names kernels that are not there: {', '.join(missing)}")
    return spec
