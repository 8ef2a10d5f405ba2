"""Build planning, implementation and repair prompts from the templates in
prompts/common/ and the target's pack in prompts/<target>/ (ISA, rules,
examples, code fence). string.Template ($name) because code is full of braces."""
from __future__ import annotations

import functools
import re
from string import Template

from agents.console import latency_text
from hw_runners.base import PROMPTS_DIR as PROMPTS
from hw_runners.base import DescriptorError, UnknownIsaError, UnknownTargetError, target_info
from protocols.jobs import CodeRequest, Parent, PlanRequest, Problem, RepairRequest


_ISA_MARK = re.compile(r"<!--\s*isa:\s*([\w\-, ]+?)\s*-->")


def for_profile(text: str, profile: str) -> str:
    """A markdown page as one ISA profile sees it: a section whose heading is followed by an
    `<!-- isa: a, b -->` line is kept (without that line) only under those profiles, with its subsections."""
    out: list[str] = []
    skip_level = 0          # > 0: inside a dropped section of this heading level
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        level = len(line) - len(line.lstrip("#")) if line.startswith("#") else 0
        if skip_level and level and level <= skip_level:
            skip_level = 0
        if skip_level:
            continue
        mark = _ISA_MARK.fullmatch(line.strip())
        if mark:
            continue
        if level and i + 1 < len(lines):
            nxt = _ISA_MARK.fullmatch(lines[i + 1].strip())
            if nxt and profile not in {n.strip() for n in nxt.group(1).split(",")}:
                skip_level = level
                continue
        out.append(line)
    return "".join(out)


@functools.cache
def pack(target: str, isa: str = "") -> dict:
    """The target's prompt pack under an ISA profile ("" = the default), from its descriptor
    (hw_runners/base.py TargetInfo)."""
    try:
        info = target_info(target)
        profile = info.isa_profile(isa)
        chosen = info.examples if profile.examples is None else profile.examples
        examples = "".join(f"\n## Example: {e.name}\n```{info.code_fence}\n{e.read_text()}```\n" for e in chosen)
        isa, rules = (for_profile(f.read_text(), profile.name) for f in (info.isa, info.rules))
    except (UnknownTargetError, DescriptorError, UnknownIsaError, OSError) as exc:
        raise ValueError(f"target {target!r} has no usable prompt pack: {exc}") from None
    return {"target_name": info.name, "fence": info.code_fence, "entry_point": info.entry_point, "isa": isa,
            "rules": rules, "examples": ("\n# Examples of correct kernels for this target\n" + examples) if examples else ""}


@functools.cache
def template(kind: str) -> Template:
    return Template((PROMPTS / "common" / f"{kind}.md").read_text())


def _latency(parent: Parent, unit: str) -> str:
    if parent.latency is None:
        return "latency not measured"
    return latency_text(parent.latency, unit)


def _problem(problem: Problem) -> str:
    return f"{problem.name}: {problem.description}"


def _prior(req: PlanRequest) -> str:
    """Schedule reuse: the recorded plan this step offers, to adapt to the current problem."""
    if req.prior is None:
        return ""
    was = req.prior_problem
    where = f"{was.name} ({', '.join(f'{k}={v}' for k, v in was.dims.items())})" if was else "a similar workload"
    return (f"\n# A plan that worked on a similar workload\nOn {where}, this step of the optimization trace that "
            f"led to its best kernel applied option {req.prior.option_id}:\n{req.prior.text}\n\nAdapt this plan to "
            f"the current problem ({req.problem.name}) and code: keep its intent; change sizes, loop bounds and "
            f"addresses to fit this shape. Answer with OPTION: {req.prior.option_id}.\n")


def plan_prompt(req: PlanRequest) -> str:
    p, parent = pack(req.problem.target, req.problem.isa), req.parent
    menu = "\n".join(f"- {o.id}: {o.title}. {o.description}" for o in req.menu)
    return template("plan").substitute(p, problem=_problem(req.problem), code=parent.code,
                                       latency=_latency(parent, req.problem.latency_unit),
                                       feedback=parent.feedback_text or "none", prior=_prior(req),
                                       menu=menu, iteration=req.iteration, iterations=req.iterations)


def code_prompt(req: CodeRequest) -> str:
    p, parent, plan = pack(req.problem.target, req.problem.isa), req.parent, req.plan
    return template("code").substitute(p, problem=_problem(req.problem), code=parent.code,
                                       latency=_latency(parent, req.problem.latency_unit), plan=plan.text,
                                       option=plan.option_id)


def repair_prompt(req: RepairRequest) -> str:
    p, plan = pack(req.problem.target, req.problem.isa), req.plan
    stdout = f"\nThe kernel printed:\n```\n{req.stdout[-4000:]}\n```\n" if req.stdout else ""
    return template("repair").substitute(p, problem=_problem(req.problem), code=req.code, plan=plan.text,
                                         option=plan.option_id, error=req.error, stdout=stdout)
