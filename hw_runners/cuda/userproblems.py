"""cuda problems from a user's problem file (`--problem-file FILE.toml`, or one of `--problems-dir DIR`): the same
KernelBench convention as the built-in problems, through the product's one problem-file mechanism.

    name = "my-gelu"
    target = "cuda"
    description = "y = gelu(x) for x of shape (B, D)"      # for the models' prompts
    reference = "my_gelu_reference.py"      # class Model, get_inputs(), get_init_inputs() (KernelBench)
    kernel = "my_gelu.py"                   # the starting kernel: class ModelNew
    dims = {B = 8192, D = 4096}             # optional: sizes (the reference's own constants decide the shapes)
    flops = "8 * B * D"                     # useful FLOPs of one forward: a number or a formula over dims
    bytes = "2 * 4 * B * D"                 # compulsory DRAM bytes: inputs read and outputs written once
    dtype = "float32"                       # float32, float16 or bfloat16: the peak it is measured against
    tolerance = {atol = 1e-4, rtol = 1e-4}  # optional (defaults by dtype)
    family = "softmax"                      # optional: the offline heuristic's family, if it applies
    small = {B = 64, D = 512}               # optional: the reference's sizes for checks on the CPU

Errors are one line naming the file and the field. The files become a problem directory of this process
(definition_files.materialize), read like a built-in one."""
from __future__ import annotations

import dataclasses
import json

from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.definition_files import DefinitionError, materialize, relative, toml_of
from autocomp_zmq.hw_runners.problemfile import NAME, formula
from autocomp_zmq.hw_runners.cuda.problems import DTYPES, ProblemSpecError, read_spec, to_problem
from autocomp_zmq.protocols.jobs import ProblemDefinition

KEYS = ("name", "target", "description", "reference", "kernel", "dims", "flops", "bytes", "dtype", "tolerance",
        "family", "small", "tags")


def from_definition(target, definition: ProblemDefinition) -> Problem:
    file = definition.path
    meta = toml_of(definition.files[file], file)

    def bad(key: str, message: str) -> DefinitionError:
        return DefinitionError(f"{file}: {key}: {message}")

    unknown = sorted(set(meta) - set(KEYS))
    if unknown:
        raise bad(unknown[0], f"not a field of a cuda problem file (fields: {', '.join(KEYS)})")
    for key in ("name", "reference", "kernel", "flops", "bytes"):
        if key not in meta:
            raise bad(key, "missing")
    if not isinstance(meta["name"], str) or not NAME.fullmatch(meta["name"]):
        raise bad("name", "letters, digits, '.', '_' or '-', at most 100")
    dims = meta.get("dims", {})
    if not (isinstance(dims, dict) and all(isinstance(v, int) for v in dims.values())):
        raise bad("dims", "a table of integer sizes, e.g. {B = 8192, D = 4096}")
    work = {key: formula(meta[key], dims, lambda m, k=key: bad(k, m)) for key in ("flops", "bytes")}
    dtype = meta.get("dtype", "float32")
    if dtype not in DTYPES:
        raise bad("dtype", f"{dtype!r} is not one of {', '.join(DTYPES)}")
    root = materialize(definition)
    home = root / "_cuda" / meta["name"]
    home.mkdir(parents=True, exist_ok=True)
    for key, role in (("reference", "reference.py"), ("kernel", "naive.py")):
        (home / role).write_text(definition.files[relative(meta[key], file, key)])
    tol = meta.get("tolerance", {})
    q = json.dumps          # a JSON string is a TOML basic string
    lines = [f"name = {q(meta['name'])}", f"family = {q(str(meta.get('family', 'own:' + meta['name'])))}",
             f"description = {q(str(meta.get('description', '')))}", f"flops = {work['flops']}",
             f"bytes = {work['bytes']}", f"dtype = {q(dtype)}", f"tags = {q([str(t) for t in meta.get('tags', [])])}",
             "dims = {" + ", ".join(f"{k} = {v}" for k, v in dims.items()) + "}"]
    if tol:
        lines.append("tolerance = {" + ", ".join(f"{k} = {float(v)!r}" for k, v in tol.items()) + "}")
    (home / "problem.toml").write_text("\n".join(lines) + "\n")
    try:
        spec = read_spec(home)
    except ProblemSpecError as exc:
        raise DefinitionError(f"{file}: {exc}") from None
    return dataclasses.replace(to_problem(target.name, spec), semantics=spec, definition=definition)
