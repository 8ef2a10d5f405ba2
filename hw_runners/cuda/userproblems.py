"""cuda problems from a user's problem file (`--problem-file FILE.toml`, or one of `--problems-dir DIR`): the same
KernelBench convention as the built-in problems, through the product's one problem-file mechanism.

    name = "my-gelu"
    target = "cuda"
    description = "y = gelu(x) for x of shape (B, D)"      # for the models' prompts
    reference = "my_gelu_reference.py"      # class Model, get_inputs(), get_init_inputs() (KernelBench); anywhere:
                                            # "../kb/level1/26_GELU_.py" or an absolute path work too
    kernel = "my_gelu.py"                   # the starting kernel: class ModelNew (`eval ... builtin:start`)
    dims = {B = 8192, D = 4096}             # optional: sizes (the reference's own constants decide the shapes)
    flops = "8 * B * D"                     # optional: useful FLOPs of one forward, a number or a formula over dims
    bytes = "2 * 4 * B * D"                 # optional: compulsory DRAM bytes (inputs read, outputs written once)
    counted = ["flops"]                     # optional: which of the given flops and bytes a tool counted
    dtype = "float32"                       # float32, float16 or bfloat16: the peak it is measured against
    tolerance = {atol = 1e-4, rtol = 1e-4}  # optional (defaults by dtype)
    family = "softmax"                      # optional: the offline heuristic's family, if it applies
    small = {B = 64, D = 512}               # optional: the reference's module-level sizes for checks on the CPU

flops and bytes left out are counted from the reference when the file is loaded (problems.read_spec). Errors are
one line naming the file and the field. The files become a problem directory of this process
(definition_files.materialize), read like a built-in one."""
from __future__ import annotations

import dataclasses
import json

from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.definition_files import DefinitionError, materialize, relative, toml_of
from autocomp_zmq.hw_runners.problemfile import NAME, formula
from autocomp_zmq.hw_runners.cuda.problems import DTYPES, WORK, ProblemSpecError, check_small, read_spec, to_problem
from autocomp_zmq.protocols.jobs import ProblemDefinition

KEYS = ("name", "target", "description", "reference", "kernel", "dims", "flops", "bytes", "counted", "dtype",
        "tolerance", "family", "small", "tags")


def from_definition(target, definition: ProblemDefinition) -> Problem:
    file = definition.path
    meta = toml_of(definition.files[file], file)

    def bad(key: str, message: str) -> DefinitionError:
        return DefinitionError(f"{file}: {key}: {message}")

    unknown = sorted(set(meta) - set(KEYS))
    if unknown:
        raise bad(unknown[0], f"not a field of a cuda problem file (fields: {', '.join(KEYS)})")
    for key in ("name", "reference", "kernel"):
        if key not in meta:
            raise bad(key, "missing")
    if not isinstance(meta["name"], str) or not NAME.fullmatch(meta["name"]):
        raise bad("name", "letters, digits, '.', '_' or '-', at most 100")
    dims = meta.get("dims", {})
    if not (isinstance(dims, dict) and all(isinstance(v, int) for v in dims.values())):
        raise bad("dims", "a table of integer sizes, e.g. {B = 8192, D = 4096}")
    work = {key: formula(meta[key], dims, lambda m, k=key: bad(k, m)) for key in WORK if key in meta}
    counted = meta.get("counted", [])
    if not (isinstance(counted, list) and all(k in work for k in counted)):
        raise bad("counted", f"must list which of the given flops and bytes were counted, not {counted!r}")
    dtype = meta.get("dtype", "float32")
    if dtype not in DTYPES:
        raise bad("dtype", f"{dtype!r} is not one of {', '.join(DTYPES)}")
    files = {key: relative(meta[key], file, key) if isinstance(meta[key], str) else None
             for key in ("reference", "kernel")}
    for key, stored in files.items():
        if stored is None or stored not in definition.files:
            raise bad(key, f"{meta[key]!r} is not part of the definition (read the problem file with its files)")
    small = check_small(meta.get("small", {}), definition.files[files["reference"]], bad,
                        reference=str(meta["reference"]).rsplit("/", 1)[-1])
    root = materialize(definition)
    home = root / "_cuda" / meta["name"]
    home.mkdir(parents=True, exist_ok=True)
    for key, role in (("reference", "reference.py"), ("kernel", "naive.py")):
        (home / role).write_text(definition.files[files[key]])
    tol = meta.get("tolerance", {})
    q = json.dumps          # a JSON string is a TOML basic string
    lines = [f"name = {q(meta['name'])}", f"family = {q(str(meta.get('family', 'own:' + meta['name'])))}",
             f"description = {q(str(meta.get('description', '')))}", f"dtype = {q(dtype)}",
             f"tags = {q([str(t) for t in meta.get('tags', [])])}",
             "dims = {" + ", ".join(f"{k} = {v}" for k, v in dims.items()) + "}",
             "small = {" + ", ".join(f"{k} = {v}" for k, v in small.items()) + "}", f"counted = {q(counted)}"]
    lines += [f"{key} = {value}" for key, value in work.items()]        # left out: counted by read_spec
    if tol:
        lines.append("tolerance = {" + ", ".join(f"{k} = {float(v)!r}" for k, v in tol.items()) + "}")
    (home / "problem.toml").write_text("\n".join(lines) + "\n")
    try:
        spec = read_spec(home, target)
    except ProblemSpecError as exc:
        raise DefinitionError(f"{file}: {exc}") from None
    problem = to_problem(target.name, spec)
    # the problem file's kernel is its starting kernel (`builtin:start`, what a run starts from); `naive` names the
    # same file, as a problem directory's starting kernel is called
    kernels = {"start": home / "naive.py", **problem.kernels}
    return dataclasses.replace(problem, kernels=kernels, semantics=spec, definition=definition)
