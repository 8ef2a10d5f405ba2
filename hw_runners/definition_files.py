"""A problem definition as files: reading a user's problem file and the files it names (kernel, reference)
into the wire ProblemDefinition, finding the problem files of a --problems-dir, and writing a definition out
on this host so that its reference imports. hw_runners/problemfile.py parses what is read.

A named file may be anywhere on disk: next to the problem file (`ref.py`, `sub/ref.py`), elsewhere relative to
it (`../ref.py`) or absolute (`/data/KernelBench/level1/19_ReLU.py`). What is read travels under a stored
name, a path inside the definition (relative(): the name itself when it stays inside the problem file's
folder, else `_outside/<hash of the name>/<file name>`), which both the reading side and the parsing side
derive from the name as written, so materialize never writes outside its own directory."""
from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

from autocomp_zmq.protocols.jobs import DEFINITION_BYTES, ProblemDefinition

FILE_BYTES = 64 * 1024            # each file of a definition (the wire's Text limit)
NAME_CHARS = 200                  # each file's name (the wire's Name limit)
PATH_CHARS = 4096                 # a named file's path as the problem file writes it (PATH_MAX)
OUTSIDE = "_outside"              # where files from outside the problem file's folder are stored


class DefinitionError(ValueError):
    """A problem file that cannot be used: one line, `FILE: FIELD: what is wrong`."""


# -- reading -------------------------------------------------------------------------------------
def read(path: Path) -> ProblemDefinition:
    """The problem file at `path` and the files it names (kernel, reference), as text."""
    path = Path(path)
    if len(path.name) > NAME_CHARS:
        raise DefinitionError(f"{path.name[:40]}...: a problem file's name has at most {NAME_CHARS} characters")
    text = _read_text(path, path.name, "")
    meta = toml_of(text, path.name)
    files = {path.name: text}
    for key in ("kernel", "reference"):
        named = meta.get(key)
        if named is None:
            continue
        stored = relative(named, path.name, key)
        files[stored] = _read_text(path.parent / named, path.name, key)   # an absolute name replaces the folder
    if sum(len(t.encode()) for t in files.values()) > DEFINITION_BYTES:
        raise DefinitionError(f"{path.name}: the problem file and the files it names exceed "
                              f"{DEFINITION_BYTES // 1024} KiB together")
    return ProblemDefinition(path=path.name, files=files)


def _read_text(path: Path, file: str, key: str) -> str:
    where = f"{file}: {key}: " if key else f"{file}: "
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DefinitionError(f"{where}cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > FILE_BYTES:
        raise DefinitionError(f"{where}{path.name} is {len(data):,} bytes; at most {FILE_BYTES:,} are allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionError(f"{where}{path.name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                              f"{exc.start})") from None


def relative(named: Any, file: str, key: str) -> str:
    """The stored name of a file the problem file names (see the module's docstring), checked: a path to a
    file, short enough; the same name whichever side (reader, parser) asks."""
    p = PurePosixPath(named) if isinstance(named, str) else None
    if (p is None or not named or "\\" in named or "\0" in named or len(named) > PATH_CHARS
            or p.name in ("", ".", "..")):
        raise DefinitionError(f"{file}: {key}: must be the path of a file (relative to the problem file, or "
                              f"absolute), not {named!r}")
    if not p.is_absolute() and ".." not in p.parts and len(str(p)) <= NAME_CHARS:
        return str(p)
    digest = hashlib.sha256(named.encode()).hexdigest()[:16]
    stored = f"{OUTSIDE}/{digest}/{p.name}"
    if len(stored) > NAME_CHARS:
        raise DefinitionError(f"{file}: {key}: the file name {p.name[:40]}... is too long (at most "
                              f"{NAME_CHARS - len(OUTSIDE) - 18} characters for a file outside the problem file's "
                              "folder)")
    return stored


def toml_of(text: str, file: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DefinitionError(f"{file}: not valid TOML: {exc}") from None


def scan(directory: Path) -> dict[str, Path]:
    """The problem files of a --problems-dir (its *.toml files) by problem name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DefinitionError(f"{directory}: not a directory")
    found: dict[str, Path] = {}
    for path in sorted(directory.glob("*.toml")):
        name = toml_of(_read_text(path, path.name, ""), path.name).get("name")
        if not isinstance(name, str):
            raise DefinitionError(f"{path.name}: name: missing (every problem file names its problem)")
        if name in found:
            raise DefinitionError(f"{path.name}: name: {name!r} is also the name in {found[name].name}")
        found[name] = path
    return found


# -- the files on this host ----------------------------------------------------------------------
_WRITTEN: dict[str, Path] = {}


def materialize(definition: ProblemDefinition) -> Path:
    """The definition's files written to a private directory of this process (one per content), removed
    at exit: what was read or received is what runs, whatever happens to the user's files meanwhile."""
    digest = definition.digest
    if digest not in _WRITTEN:
        root = Path(tempfile.mkdtemp(prefix=f"autocomp-problem-{digest[:12]}-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        for rel, text in definition.files.items():
            parts = PurePosixPath(rel).parts
            if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
                raise DefinitionError(f"{definition.path}: a file of the definition has a bad name {rel!r}")
            target = root.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        _WRITTEN[digest] = root
    return _WRITTEN[digest]


__all__ = ["DefinitionError", "FILE_BYTES", "materialize", "read", "relative", "scan", "toml_of"]
