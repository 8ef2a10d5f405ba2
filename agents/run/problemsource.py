"""Where the problem of a run or an evaluation comes from: a name the target knows (one of its problems or a
parametric name such as gemm-100x100x100), a user's problem file (--problem-file FILE.toml), or one problem of
a directory of problem files (--problems-dir DIR --problem NAME); a resumed run uses the definition it stored,
whatever became of the file since. Every failure is a ProblemSourceError with one line saying why."""
from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from autocomp_zmq.hw_runners.base import ProblemSizeError, Target, UnknownIsaError, UnknownProblemError
from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.problemfile import DefinitionError, read, scan
from autocomp_zmq.protocols.jobs import ProblemRef, ProblemDefinition


class ProblemSourceError(ValueError):
    """The problem cannot be had; the message says why, in one line."""


def read_definition(problem_file: str | Path | None, problems_dir: str | Path | None,
                    name: str | None) -> ProblemDefinition | None:
    """The definition a --problem-file or a --problems-dir names (None: neither was given)."""
    try:
        if problem_file and problems_dir:
            raise ProblemSourceError("give --problem-file or --problems-dir, not both")
        if problem_file:
            return read(Path(problem_file))
        if problems_dir:
            found = scan(Path(problems_dir))
            if name not in found:
                listed = ", ".join(found) or "no problem files (*.toml)"
                raise ProblemSourceError(f"--problems-dir {problems_dir} has no problem {name!r}; it has {listed}")
            return read(found[name])
    except DefinitionError as exc:
        raise ProblemSourceError(str(exc)) from None
    return None


def declared(definition: ProblemDefinition) -> tuple[str, str]:
    """The (name, target) a problem file declares: what a run is called and where it runs."""
    meta = tomllib.loads(definition.files[definition.path])   # read() parsed it already
    values = []
    for key in ("name", "target"):
        if not isinstance(meta.get(key), str):
            raise ProblemSourceError(f"{definition.path}: {key}: missing (a string)")
        values.append(meta[key])
    return values[0], values[1]


def settle(options: dict, given: dict, definition: ProblemDefinition | None) -> None:
    """Set options' problem and target from a problem file; an explicit --problem or --target that says
    otherwise is an error (given: the options the user gave, not their defaults)."""
    if definition is None:
        return
    name, target = declared(definition)
    if given.get("problem") not in (None, name):
        raise ProblemSourceError(f"--problem {given['problem']} conflicts with {definition.path}, which defines "
                                 f"{name!r}")
    if given.get("target") not in (None, target):
        raise ProblemSourceError(f"--target {given['target']} conflicts with {definition.path}, which is for "
                                 f"{target}")
    options["problem"], options["target"] = name, target


def load(target: Target, name: str, isa: str | None, definition: ProblemDefinition | None) -> Problem:
    """The target's problem: from the definition if there is one, else by name."""
    try:
        if definition is None:
            return target.problem(name, isa)
        profile = target.info().isa_profile(isa).name
        return dataclasses.replace(target.problem_from_definition(definition), isa=profile)
    except (UnknownProblemError, ProblemSizeError) as exc:
        raise ProblemSourceError(exc.args[0]) from None
    except UnknownIsaError as exc:
        raise ProblemSourceError(f"--isa: {exc}") from None
    except DefinitionError as exc:
        raise ProblemSourceError(str(exc)) from None


def wire(problem: Problem, latency_unit: str, isa: str | None) -> ProblemRef:
    """The problem as jobs carry it (with its definition, so that evaluators elsewhere need no file)."""
    return ProblemRef(target=problem.target, name=problem.name, family=problem.family, dims=problem.dims,
                   description=problem.description, latency_unit=latency_unit, isa=isa or "",
                   definition=problem.definition)
