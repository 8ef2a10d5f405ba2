"""Build planning, implementation and repair prompts from the templates in
prompts/common/ and the target's pack in prompts/<target>/ (ISA, rules,
examples, code fence). string.Template ($name) because code is full of braces."""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from string import Template

from hw_runners.base import PROMPTS_DIR as PROMPTS


@functools.cache
def pack(target: str) -> dict:
    root = PROMPTS / target
    try:
        meta = tomllib.loads((root / "target.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"target {target!r} has no usable prompt pack in {root}: {exc}") from None
    files = meta["pack"]
    examples = "".join(f"\n## Example: {Path(e).name}\n```{meta['code_fence']}\n{(root / e).read_text()}```\n"
                       for e in files.get("examples", []))
    return {"target_name": meta.get("target", target), "fence": meta["code_fence"],
            "isa": (root / files["isa"]).read_text(), "rules": (root / files["rules"]).read_text(),
            "examples": ("\n# Examples of correct kernels for this target\n" + examples) if examples else ""}


@functools.cache
def template(kind: str) -> Template:
    return Template((PROMPTS / "common" / f"{kind}.md").read_text())


def _cycles(parent: dict) -> str:
    cycles = parent.get("cycles")
    return f"{cycles:,.0f} cycles" if isinstance(cycles, (int, float)) else "latency not measured"


def _problem(problem: dict) -> str:
    return f"{problem['name']}: {problem['description']}"


def plan_prompt(req: dict) -> str:
    p, parent = pack(req["problem"]["target"]), req["parent"]
    menu = "\n".join(f"- {o['id']}: {o['title']}. {o['description']}" for o in req["menu"])
    return template("plan").substitute(p, problem=_problem(req["problem"]), code=parent["code"],
                                       cycles=_cycles(parent), feedback=parent.get("feedback_text") or "none",
                                       menu=menu, iteration=req["iteration"], iterations=req["iterations"])


def code_prompt(req: dict) -> str:
    p, parent, plan = pack(req["problem"]["target"]), req["parent"], req["plan"]
    return template("code").substitute(p, problem=_problem(req["problem"]), code=parent["code"],
                                       cycles=_cycles(parent), plan=plan["text"], option=plan["option_id"])


def repair_prompt(req: dict) -> str:
    p, plan = pack(req["problem"]["target"]), req["plan"]
    stdout = f"\nThe kernel printed:\n```\n{req['stdout'][-4000:]}\n```\n" if req.get("stdout") else ""
    return template("repair").substitute(p, problem=_problem(req["problem"]), code=req["code"], plan=plan["text"],
                                         option=plan["option_id"], error=req["error"], stdout=stdout)
