"""--translate-iters: the first N iterations write the kernel from the problem's reference (numpy for the simulators,
PyTorch for cuda) in the target's language, instead of improving the kernel they are given. What those iterations
offer is built here, once per run, before anything starts: the target's translation menu (translate.toml beside its
menu.toml, options filtered by ISA profile and problem family as the menu's are) and the reference's source text,
which is a problem file's own reference, else the reference.py beside the problem's kernels (trainium-sim, cuda),
else the pack's references/<family>.py (gemmini-sim). A target without a translation menu, or a problem without a
reference, is refused in one line."""
from __future__ import annotations

import inspect
import tomllib
from pathlib import Path

from autocomp_zmq.agents.engine.candidates import Translation
from autocomp_zmq.agents.run.runconfig import RunConfig
from autocomp_zmq.agents.run.runstart import RunError
from autocomp_zmq.hw_runners.base import IsaProfile, Problem, TargetInfo
from autocomp_zmq.hw_runners.definition_files import DefinitionError, relative
from autocomp_zmq.hw_runners.pack import shown_under
from autocomp_zmq.protocols.jobs import MenuOption

MENU_FILE = "translate.toml"
REFERENCE_CHARS = 48 * 1024      # a reference travels in every translation job (the wire's texts are 64 KiB)


def menu_of(info: TargetInfo, profile: IsaProfile, family: str) -> list[MenuOption]:
    """The target's translation menu as the ISA profile and problem family see it; RunError when it has none."""
    path = info.menu.parent / MENU_FILE
    try:
        options = tomllib.loads(path.read_text())["option"]
        menu = [MenuOption(id=o["id"], title=o["title"], description=o["description"]) for o in options
                if shown_under(o.get("isa"), profile) and (not o.get("families") or family in o["families"])]
    except FileNotFoundError:
        raise RunError(f"--translate-iters: target {info.name} has no translation menu ({path})") from None
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise RunError(f"--translate-iters: target {info.name}'s translation menu {path} is unusable: {exc}") from None
    if not menu:
        raise RunError(f"--translate-iters: {path} offers nothing to a {family} problem under ISA profile "
                       f"{profile.name}")
    return menu


def reference_of(problem: Problem, info: TargetInfo) -> str | None:
    """The source text of the problem's reference, where one is found (see the module's docstring)."""
    d = problem.definition
    if d is not None:
        try:
            named = tomllib.loads(d.files[d.path]).get("reference")
            if named:
                return d.files.get(relative(named, d.path, "reference"))
        except (tomllib.TOMLDecodeError, DefinitionError):
            return None
    beside = {Path(path).parent / "reference.py" for path in problem.kernels.values()}
    for path in sorted(beside) + [info.menu.parent / "references" / f"{problem.family}.py"]:
        if path.is_file():
            return path.read_text()
    return None


def of(cfg: RunConfig, info: TargetInfo, profile: IsaProfile, problem: Problem,
       policy: type) -> Translation | None:
    """What the translation iterations offer (None without --translate-iters)."""
    if not cfg.search.options.get("translate_iters"):
        return None
    if "translation" not in inspect.signature(policy).parameters:
        raise RunError(f"--translate-iters: the search policy {cfg.search.policy} has no translation iterations")
    menu = menu_of(info, profile, problem.family)
    reference = reference_of(problem, info)
    if reference is None:
        raise RunError(f"--translate-iters: problem {problem.name} has no reference source to translate (a problem "
                       f"file's reference, a reference.py beside its kernels, or {info.menu.parent}/references/"
                       f"{problem.family}.py)")
    if len(reference) > REFERENCE_CHARS:
        raise RunError(f"--translate-iters: the reference of {problem.name} is {len(reference):,} characters; at most "
                       f"{REFERENCE_CHARS:,} travel in a job")
    return Translation(reference=reference, menu=tuple(menu))
