"""One build: documentation in, a reviewed-before-use pack folder out.

The documentation's chunks form the prompt's stable prefix (the same for every call, so providers cache it);
each part of the pack (isa.md, menu.toml, rules.md, examples/, translate.md) is one call, asked again when its
answer cannot be read or is over budget. The files are written to a staging folder, checked there with the
product's pack loader (hw_runners/pack.py, as a run reads a pack), and only then moved into the output folder
beside calls.jsonl and BUILD.md (what was built from what, what it cost, what the budgets cut)."""
from __future__ import annotations

import dataclasses
import json
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autocomp_zmq.agents.workers.llm.pricing import PriceBook, PriceError
from autocomp_zmq.agents.workers.llm.specs import CallOptions, SpecError
from autocomp_zmq.hw_runners.base import (DEFAULT_ISA, PROMPTS_DIR, DescriptorError, TargetInfo, UnknownTargetError,
                                          target_info)
from autocomp_zmq.hw_runners.pack import read_pack
from autocomp_zmq.packbuilder import compose
from autocomp_zmq.packbuilder.calls import Caller, CallError
from autocomp_zmq.packbuilder.sources import Chunk, DocError, read_folder

PARTS = ("isa", "menu", "rules", "examples", "translation")
CALLS_FILE = "calls.jsonl"


class BuildError(RuntimeError):
    """The build cannot go on; the message says why, and what was spent and kept."""


@dataclass(frozen=True)
class BuildOptions:
    docs: Path
    name: str
    out: Path
    model: str | None = None
    # a target whose language the pack is written for; a command target's evaluation is also reused by the
    # folder's target.toml
    like: str | None = None
    replay: Path | None = None         # a calls.jsonl that answers every call
    budget_usd: float | None = None
    prices: Path | None = None
    section_chars: int = 3000
    pack_chars: int = 40000
    max_tokens: int = 16000
    retries: int = 2                   # further tries of a failed call and of an unusable answer, each
    call: CallOptions = CallOptions(max_retries=0)


@dataclass
class Built:
    out: Path
    files: list[str]
    calls: int
    spent: float
    notes: list[str]


def build(opts: BuildOptions) -> Built:
    try:
        chunks = read_folder(opts.docs)
        base = target_info(opts.like) if opts.like else None
        book = PriceBook.load(opts.prices)
    except (DocError, DescriptorError, UnknownTargetError, PriceError) as exc:
        raise BuildError(str(exc)) from None
    if opts.out.exists() and (not opts.out.is_dir() or any(opts.out.iterdir())):
        raise BuildError(f"--out {opts.out} exists and is not an empty folder; a build never overwrites one")
    opts.out.mkdir(parents=True, exist_ok=True)
    try:
        caller = Caller(opts.out / CALLS_FILE, opts.model, replay=opts.replay, budget_usd=opts.budget_usd,
                        prices=book, options=opts.call, retries=opts.retries)
    except (CallError, SpecError) as exc:
        opts.out.rmdir()
        raise BuildError(str(exc)) from None
    try:
        files, notes = _write_pack(opts, base, chunks, caller)
    except CallError as exc:
        raise BuildError(str(exc)) from None
    finally:
        caller.close()
    files["BUILD.md"] = _report(opts, base, chunks, caller, files, notes)
    if base is not None and (base.home / "target.toml").exists() and \
            "command" in tomllib.loads((base.home / "target.toml").read_text()):
        files["target.toml"] = command_target(opts.name, base, [f for f in files if f.startswith("examples/")])
    _stage_check_and_move(opts, base, files)
    return Built(opts.out, sorted(files), caller.calls, caller.spent, notes)


def _write_pack(opts: BuildOptions, base: TargetInfo | None, chunks: list[Chunk],
                caller: Caller) -> tuple[dict[str, str], list[str]]:
    data = tomllib.loads((PROMPTS_DIR / "build-target" / "parts.toml").read_text())
    by_id = {c.id: c for c in chunks}
    prefix = f"# Documentation of {opts.name}\n\n" + "\n\n".join(f"[{c.id}] {c.source}\n{c.text}" for c in chunks)
    language = base.language if base else "the language the documentation describes"
    files: dict[str, str] = {}
    notes: list[str] = []
    for key in PARTS:
        spec = data["part"][key]
        budget = compose.Budget(opts.section_chars, int(opts.pack_chars * spec["share"]))
        fill = dict(name=opts.name, target=language, section_chars=budget.section_chars, part_chars=budget.part_chars)
        ask = (data["preamble"] + spec["ask"]).format(**fill).strip()
        part = _ask_part(key, ask, prefix, by_id, budget, data, caller, opts)
        notes += [f"{spec['title']}: {n}" for n in part.notes]
        heading = f"{opts.name}: {spec['title']}"
        if key == "menu":
            files[spec["file"]] = compose.menu_file(part, heading, by_id)
        elif key == "examples":
            files.update(compose.example_files(part, by_id))
        else:
            files[spec["file"]] = compose.markdown_file(part, heading, by_id)
    return files, notes


def _ask_part(key, ask, prefix, chunks, budget, data, caller: Caller, opts: BuildOptions) -> compose.Part:
    """The part's answer read and within budget: an unusable answer is asked again (at most opts.retries times)
    with the reason; one over budget is asked once to be shorter, then trimmed."""
    note, unusable, shortened = "", 0, False
    while True:
        answer = caller.ask(prefix, ask + ("\n\n" + note.strip() if note else ""), opts.max_tokens)
        try:
            if answer.finish != "stop":
                raise compose.AnswerError(f"it was cut off ({answer.finish}); write less")
            part = compose.read_answer(key, answer.text, chunks)
        except compose.AnswerError as exc:
            unusable += 1
            if unusable > opts.retries:
                raise CallError(f"the {key} part: {unusable} answers of {caller.model} were unusable, the last "
                                f"because {exc}; {caller.spent_words()}") from None
            note = data["retry"].format(why=exc)
            continue
        over = compose.overruns(part, budget)
        if over and not shortened:
            shortened, note = True, data["shorten"].format(why="; ".join(over))
            continue
        return compose.trim(part, budget) if over else part


def command_target(name: str, base: TargetInfo, examples: list[str]) -> str:
    """A target.toml that declares target `name`: the command target `base`'s evaluation (its command and
    problems, by absolute path) with this folder's pack, for trying the pack with AUTOCOMP_TARGET_PATH."""
    meta = tomllib.loads((base.home / "target.toml").read_text())
    skip = {"target", "problems", "heuristic", "description", "command", "pack", "isa"}
    lines = [f"# Target {name}: {base.name}'s evaluation (command and problems) with the prompt pack of this folder.",
             f"# Try it: AUTOCOMP_TARGET_PATH=<this folder> autocomp run --target {name} --problem ... --model ...",
             f"target = {json.dumps(name)}",
             f"description = {json.dumps(f'{base.description} (prompt pack built by build-target)')}",
             f"problems = {json.dumps(str(base.problems))}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in meta.items() if k not in skip]
    command = meta["command"]
    argv = [a.replace("{home}", str(base.home)) for a in command["argv"]]
    lines += ["", "[command]", f"argv = {json.dumps(argv)}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in command.items() if k not in ("argv", "env")]
    if command.get("env"):
        lines += ["", "[command.env]"] + [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in command["env"].items()]
    lines += ["", "[pack]", 'dir = "."', 'isa = "isa.md"', 'menu = "menu.toml"', 'rules = "rules.md"',
              f"examples = {json.dumps(examples)}"]
    return "\n".join(lines) + "\n"


def _stage_check_and_move(opts: BuildOptions, base: TargetInfo | None, files: dict[str, str]) -> None:
    stage = opts.out / ".staging"
    shutil.rmtree(stage, ignore_errors=True)
    for rel, text in files.items():
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_text(text, encoding="utf-8")
    try:
        _check(opts.name, stage, base, [f for f in files if f.startswith("examples/")])
    except DescriptorError as exc:
        raise BuildError(f"the built pack does not load: {exc}; the files are in {stage} for a look") from None
    for rel in files:
        (opts.out / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).replace(opts.out / rel)
    shutil.rmtree(stage)


def _check(name: str, folder: Path, base: TargetInfo | None, examples: list[str]) -> None:
    """The pack read as a run reads it (base's descriptor with this pack, or a neutral one): DescriptorError if
    a file does not load or the menu or the reference is empty."""
    pack = dict(menu=folder / "menu.toml", isa=folder / "isa.md", rules=folder / "rules.md",
                examples=tuple(folder / e for e in examples), isa_profiles=(DEFAULT_ISA,))
    info = dataclasses.replace(base, name=name, **pack) if base else TargetInfo(
        name=name, home=folder, description="", language="", code_fence="c", entry_point="solution",
        latency_unit="", evaluators="cores", sandbox="", problems=folder, **pack)
    view = read_pack(info)
    if not view.menu or not view.isa.strip() or not view.rules.strip():
        raise DescriptorError(f"target {name}: the pack has an empty menu, reference or rules")
    for option in tomllib.loads((folder / "menu.toml").read_text())["option"]:
        if not option["id"] or not option["description"]:
            raise DescriptorError(f"target {name}: menu option {option!r} is incomplete")


def _report(opts: BuildOptions, base: TargetInfo | None, chunks: list[Chunk], caller: Caller,
            files: dict[str, str], notes: list[str]) -> str:
    sizes = "\n".join(f"| {rel} | {len(text):,} |" for rel, text in sorted(files.items()))
    sizes += f"\n| all | {sum(len(t) for t in files.values()):,} |"
    listing = "\n".join(f"| {c.id} | {c.source} | {len(c.text):,} |" for c in chunks)
    cuts = "\n".join(f"- {n}" for n in notes) or "- nothing"
    return f"""# Prompt pack {opts.name}: how it was built

Written by `build-target` from the documentation folder `{opts.docs.name}` by {caller.model}
({caller.spent_words().split(', every call')[0]}). Every section cites its sources; review it before use:
nothing here was checked against the hardware, and the examples were never run.
{f"It is for {base.name}'s language ({base.language})." if base else ""}

Budgets: {opts.section_chars:,} characters a section, {opts.pack_chars:,} the whole pack.
What the budgets cut:
{cuts}

| file | characters |
|------|-----------:|
{sizes}

| chunk | source | characters |
|-------|--------|-----------:|
{listing}
"""
