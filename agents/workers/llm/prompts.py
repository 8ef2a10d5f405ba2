"""Planning, implementation and repair prompts, built for providers' prompt caches.

Every prompt is two parts. The prefix (prompts/common/prefix.md) is the same for every plan, code and
repair call of a run: the target's reference (ISA), rules, full optimization menu (as the run's ISA
profile and problem family see it) and examples. The rest (prompts/common/plan.md, code.md, repair.md, and
one_phase.md for a code request without a plan, which chooses and implements in one answer; deliver_whole.md or
deliver_edits.md says how the kernel comes back, edits_failed.md asks for it whole after edits that failed,
reference.md shows a translation step the reference it translates, and propose.md asks for new menu options)
holds everything that varies: the role, problem, code, feedback, the options offered in this step, the
plan, the error, the task. Providers cache the prefix (agents/workers/llm/providers.py), so after the first call
of a run it is billed at the cached rate. string.Template ($name) because code is full of braces.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from string import Template

import msgspec

from autocomp_zmq.agents.console import latency_text
from autocomp_zmq.hw_runners.base import PROMPTS_DIR as PROMPTS
from autocomp_zmq.hw_runners.base import DescriptorError, UnknownIsaError, UnknownTargetError, target_info
from autocomp_zmq.hw_runners.pack import read_pack
from autocomp_zmq.protocols.jobs import CodeRequest, Parent, Plan, PlanRequest, ProblemRef, RepairRequest

@dataclass(frozen=True)
class Prompt:
    prefix: str          # the stable part: the same for every call of a run
    body: str            # what this call is about

    @property
    def text(self) -> str:
        return self.prefix + "\n" + self.body

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@functools.cache
def pack(target: str, isa: str = "", family: str = "") -> dict:
    """The target's prompt pack under an ISA profile ("" = the default) for a problem family ("" = every
    option of the menu), from its descriptor (hw_runners/base.py TargetInfo)."""
    try:
        info = target_info(target)
        view = read_pack(info, isa, family)
    except (UnknownTargetError, DescriptorError, UnknownIsaError) as exc:
        raise ValueError(f"target {target!r} has no usable prompt pack: {exc}") from None
    examples = "".join(f"\n## Example: {name}\n```{info.code_fence}\n{code}```\n" for name, code in view.examples)
    menu = "\n".join(f"- {o['id']}: {o['title']}. {o['description']}" for o in view.menu)
    fields = {"device": info.device, "isa": view.isa.strip(), "rules": view.rules.strip(), "menu": menu,
              "examples": ("\n# Examples of correct kernels for this target\n" + examples) if examples else ""}
    return {"target_name": info.name, "fence": info.code_fence, "fence_tags": (info.code_fence, *info.fence_tags),
            "entry_point": info.entry_point, "correctness": info.correctness,
            "titles": {o["id"]: o["title"] for o in view.menu},      # every option of this profile and family
            "prefix": template("prefix").substitute(fields)}


@functools.cache
def template(kind: str) -> Template:
    return Template((PROMPTS / "common" / f"{kind}.md").read_text())


def _pack_of(problem: ProblemRef) -> dict:
    return pack(problem.target, problem.isa, problem.family)


def _latency(parent: Parent, unit: str) -> str:
    if parent.latency is None:
        return "latency not measured"
    return latency_text(parent.latency, unit)


def _problem(problem: ProblemRef) -> str:
    return f"{problem.name}: {problem.description}"


def _prior(req: PlanRequest) -> str:
    """Schedule reuse: the recorded plan this step offers, to adapt to the current problem."""
    if req.prior is None:
        return ""
    was = req.prior_problem
    where = f"{was.name} ({', '.join(f'{k}={v}' for k, v in was.dims.items())})" if was else "a similar workload"
    return (f"\n## A plan that worked on a similar workload\nOn {where}, this step of the optimization trace "
            f"that led to its best kernel applied option {req.prior.option_id}:\n{req.prior.text}\n\nAdapt this "
            f"plan to the current problem ({req.problem.name}) and code: keep its intent; change sizes, loop bounds "
            f"and addresses to fit this shape. Answer with OPTION: {req.prior.option_id}.\n")


def _reference(req: PlanRequest | CodeRequest) -> str:
    """A translation step's reference (prompts/common/reference.md), else nothing."""
    return template("reference").substitute(source=req.reference.rstrip("\n")) if req.reference else ""


def _option(plan) -> str:
    return plan.option_id or "none named; the plan is free text"


def propose_prompt(req: PlanRequest) -> Prompt:
    """Model-proposed options: a plan request that asks for new menu options for its parent, not for a plan."""
    p, parent = _pack_of(req.problem), req.parent
    return Prompt(p["prefix"], template("propose").substitute(
        fence=p["fence"], problem=_problem(req.problem), code=parent.code, count=req.propose,
        latency=_latency(parent, req.problem.latency_unit), feedback=parent.feedback_text or "none",
        iteration=req.iteration, iterations=req.iterations))


def plan_prompt(req: PlanRequest) -> Prompt:
    if req.propose:
        return propose_prompt(req)
    p, parent = _pack_of(req.problem), req.parent
    return Prompt(p["prefix"], template("plan").substitute(
        fence=p["fence"], problem=_problem(req.problem), code=parent.code,
        latency=_latency(parent, req.problem.latency_unit), feedback=parent.feedback_text or "none",
        prior=_prior(req), menu=_offered(req.menu), iteration=req.iteration, iterations=req.iterations,
        reference=_reference(req)))


def _offered(menu) -> str:
    # numbered: planners often name their choice by its number ("Selected optimization: 3) ..."); the definitions
    # are in the prefix
    return "\n".join(f"{n}. {o.id}: {o.title}" for n, o in enumerate(menu, 1))


def _deliver(req: CodeRequest, fence: str) -> str:
    """How a coder returns its kernel: whole, or as edits to the current code (--code-edits)."""
    return template("deliver_edits" if req.edits else "deliver_whole").substitute(fence=fence).strip()


def one_phase_prompt(req: CodeRequest) -> Prompt:
    """One-phase mode: a code request without a plan, whose answer chooses an option, plans and implements it."""
    p, parent = _pack_of(req.problem), req.parent
    return Prompt(p["prefix"], template("one_phase").substitute(
        fence=p["fence"], correctness=p["correctness"], problem=_problem(req.problem), code=parent.code,
        latency=_latency(parent, req.problem.latency_unit), feedback=parent.feedback_text or "none",
        menu=_offered(req.menu), iteration=req.iteration, iterations=req.iterations,
        deliver=_deliver(req, p["fence"]), reference=_reference(req)))


def code_prompt(req: CodeRequest) -> Prompt:
    if req.plan is None:
        return one_phase_prompt(req)
    p, parent, plan = _pack_of(req.problem), req.parent, req.plan
    return Prompt(p["prefix"], template("code").substitute(
        fence=p["fence"], correctness=p["correctness"], problem=_problem(req.problem), code=parent.code,
        latency=_latency(parent, req.problem.latency_unit), plan=plan.text, option=_option(plan),
        deliver=_deliver(req, p["fence"]), reference=_reference(req)))


EDITS_ERROR_CHARS = 4000     # of the reason a coder's edits could not be applied, given back to it


def whole_kernel_prompt(req: CodeRequest, plan: Plan, error: str) -> Prompt:
    """After edits that could not be applied: the plan (in one-phase mode, the one the answer chose) to implement
    with the whole kernel returned, and why the edits failed."""
    whole = code_prompt(msgspec.structs.replace(req, plan=plan, edits=False))
    return Prompt(whole.prefix, whole.body + template("edits_failed").substitute(error=error[:EDITS_ERROR_CHARS]))


def repair_prompt(req: RepairRequest) -> Prompt:
    p, plan = _pack_of(req.problem), req.plan
    stdout = f"\nThe kernel printed:\n```\n{req.stdout[-4000:]}\n```\n" if req.stdout else ""
    return Prompt(p["prefix"], template("repair").substitute(
        fence=p["fence"], correctness=p["correctness"], problem=_problem(req.problem), code=req.code,
        plan=plan.text, option=_option(plan), error=req.error, stdout=stdout))


PROMPTS_BY_KIND = {"plan": plan_prompt, "code": code_prompt, "repair": repair_prompt}


def render(kind: str, req) -> Prompt:
    """The prompt of a plan, code or repair request."""
    return PROMPTS_BY_KIND[kind](req)
