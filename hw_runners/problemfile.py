"""A user's own problem, defined in a TOML file (`--problem-file FILE.toml`, or one of the *.toml files of
`--problems-dir DIR`): one format for every target.

    name = "my-gemm"                        # the problem's name (runs, listings)
    target = "gemmini-sim"
    description = "..."                     # what the kernel computes, for the models' prompts
    signature = "void solution(int8_t A[I][K], int8_t B[K][J], int8_t C[I][J])"   # in the kernel's language
    family = "gemm"                         # optional: the built-in family's semantics at these dims
    dims = {I = 200, J = 96, K = 64}        # sizes; shapes and the signature may name them
    kernel = "my_gemm.c"                    # the starting kernel, next to this file
    reference = "my_gemm_reference.py"      # numpy: reference(*inputs) -> output(s); optional make_inputs
    tolerance = {atol = 0, rtol = 0}        # optional (gemmini-sim: exact by default)
    flops = "2 * I * J * K"                 # optional, a number or a formula over dims (utilization)
    config = "fp32-4x4"                     # optional: the target's hardware configuration (gemmini-sim)
    [[inputs]]
    name = "A"
    shape = ["I", "K"]                      # numbers or dim names
    dtype = "int8"
    range = [-128, 127]                     # optional: values drawn uniformly from [lo, hi]
    sparsity = 0.5                          # optional: this fraction of them zero
    # dtype = "bool" (where the target has it): probability = 0.25 draws each element True with that chance
    [[outputs]]
    ...

Reading a file (read, in hw_runners/definition_files.py) gathers it and the files it names as text into a wire ProblemDefinition, which is
what travels to evaluators on other hosts and what a run stores: from then on nothing reads the user's
files again. parse() checks every common field; each target checks the rest (its dtypes, the signature,
the reference's outputs) in Target.problem_from_definition. Every error is one line naming the file and
the field: `my.toml: inputs[1].dtype: 'int7' is not one of int8, int32`.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from autocomp_zmq.hw_runners.definition_files import DefinitionError, materialize, read, relative, scan, toml_of
from autocomp_zmq.protocols.jobs import ProblemDefinition
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
KEYS = ("name", "target", "description", "signature", "family", "dims", "kernel", "reference", "tolerance",
        "flops", "call", "kwargs", "tags", "inputs", "outputs", "config")
TENSOR_KEYS = ("name", "shape", "dtype", "range", "sparsity", "probability")
MAX_DIMS = 16                     # the wire Problem's limit
OWN_PREFIX = "own:"               # the family of a problem file that declares none: no built-in family matches it


@dataclass(frozen=True)
class TensorDecl:
    name: str
    shape: tuple[int, ...]          # resolved: dim names replaced by their sizes
    dims: tuple[int | str, ...]     # as written
    dtype: str
    range: tuple[float, float] | None = None
    sparsity: float = 0.0
    probability: float | None = None    # a bool input: the chance each element is True (None: one half)


@dataclass(frozen=True, eq=False)   # identity hash: loaded once per definition and cached
class ProblemFile:
    """A parsed, checked problem file."""
    definition: ProblemDefinition
    name: str
    target: str
    description: str
    signature: str
    dims: dict[str, int]
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    kernel: str
    reference: str | None = None
    family: str | None = None
    atol: float | None = None       # None: the target's default
    rtol: float | None = None
    flops: int | None = None
    call: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    config: str | None = None       # the target's hardware configuration, where it has several

    @property
    def file(self) -> str:
        return self.definition.path

    def error(self, where: str, message: str) -> DefinitionError:
        return DefinitionError(f"{self.file}: {where}: {message}")

    @functools.cached_property
    def directory(self) -> Path:
        """The definition's files written out (once per process), so the reference imports as a module."""
        return materialize(self.definition)

    @functools.cached_property
    def module(self) -> ModuleType | None:
        """The reference module, checked: it imports and defines reference() (and make_inputs(rng, shapes)
        if it defines make_inputs at all)."""
        if self.reference is None:
            return None
        path = self.directory / self.reference
        name = f"autocomp_problem_{self.definition.digest[:16]}"
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except BaseException as exc:   # the user's code: anything it raises is an error in their file
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise self.error("reference", f"{self.reference} does not import: {type(exc).__name__}: {exc}") from None
        if not callable(getattr(mod, "reference", None)):
            raise self.error("reference", f"{self.reference} defines no function reference(...)")
        make = getattr(mod, "make_inputs", None)
        if make is not None:
            try:
                params = list(inspect.signature(make).parameters)
            except (TypeError, ValueError):
                params = []
            if params[:2] != ["rng", "shapes"]:
                raise self.error("reference", f"{self.reference}: make_inputs must take (rng, shapes) "
                                              f"(a numpy Generator and the input shapes by name)")
        return mod

    def make_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
        """One input set: the reference module's make_inputs, else the declared ranges; None when neither
        says how (the target then draws its own way)."""
        if self.module is not None and hasattr(self.module, "make_inputs"):
            try:
                made = self.module.make_inputs(rng, {t.name: t.shape for t in self.inputs})
                out = {t.name: np.asarray(made[t.name]) for t in self.inputs}
            except Exception as exc:
                raise self.error("reference", f"make_inputs failed: {type(exc).__name__}: {exc}") from None
            for t in self.inputs:
                if out[t.name].shape != t.shape:
                    raise self.error("reference", f"make_inputs gave {t.name} the shape "
                                                  f"{list(out[t.name].shape)}, not {list(t.shape)}")
            return out
        if not any(t.range or t.probability is not None for t in self.inputs):
            return None
        return {t.name: draw(rng, t) for t in self.inputs}


def draw(rng: np.random.Generator, t: TensorDecl, default: tuple[float, float] = (-1.0, 1.0)) -> np.ndarray:
    """Values uniform in the tensor's range (integers: inclusive), a `sparsity` fraction of them zero; a bool
    tensor's elements True with its probability (one half unless it says)."""
    if t.dtype == "bool":
        return rng.random(t.shape) < (0.5 if t.probability is None else t.probability)
    lo, hi = t.range or default
    if t.dtype.startswith(("int", "uint")):
        x = rng.integers(int(lo), int(hi), size=t.shape, endpoint=True).astype(t.dtype)
    else:
        x = rng.uniform(lo, hi, size=t.shape).astype(np.float32)
    if t.sparsity:
        x[rng.random(t.shape) < t.sparsity] = 0
    return x


# -- parsing -------------------------------------------------------------------------------------
def parse(definition: ProblemDefinition, dtypes: tuple[str, ...], configs: tuple[str, ...] = ()) -> ProblemFile:
    """Check every field the targets share; `dtypes` are the target's, `configs` its hardware configurations
    (a target without any rejects a file that names one)."""
    file = definition.path
    if file not in definition.files:
        raise DefinitionError(f"{file}: the definition does not hold the problem file itself")
    meta = toml_of(definition.files[file], file)

    def bad(where: str, message: str) -> DefinitionError:
        return DefinitionError(f"{file}: {where}: {message}")

    unknown = [k for k in meta if k not in KEYS]
    if unknown:
        raise bad(unknown[0], f"unknown key (a problem file has {', '.join(KEYS)})")
    for key in ("name", "target", "signature", "kernel", "inputs", "outputs"):
        if key not in meta:
            raise bad(key, "missing")
    name = _typed(meta, "name", str, bad)
    if not NAME.fullmatch(name):
        raise bad("name", f"{name!r} is not a problem name (letters, digits, '.', '_', '-'; at most 100)")
    dims = _typed(meta, "dims", dict, bad, {})
    if len(dims) > MAX_DIMS:
        raise bad("dims", f"at most {MAX_DIMS} dims")
    for k, v in dims.items():
        if not IDENT.fullmatch(k):
            raise bad(f"dims.{k}", "a dim name must be an identifier (letters, digits, '_')")
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(f"dims.{k}", f"must be an integer >= 1, not {v!r}")
    tensors = {}
    for kind in ("inputs", "outputs"):
        items = _typed(meta, kind, list, bad)
        if not items:
            raise bad(kind, "at least one tensor is needed")
        tensors[kind] = tuple(_tensor(t, f"{kind}[{i}]", kind == "inputs", dims, dtypes, bad)
                              for i, t in enumerate(items))
    seen: set[str] = set()
    for t in tensors["inputs"] + tensors["outputs"]:
        if t.name in seen:
            raise bad("outputs" if t in tensors["outputs"] else "inputs", f"two tensors are named {t.name!r}")
        seen.add(t.name)
    family = _typed(meta, "family", str, bad, None)
    reference = _typed(meta, "reference", str, bad, None)
    if reference is None and family is None:
        raise bad("reference", "missing (a .py next to the problem file that defines reference(...); only a "
                               "problem of a built-in family may leave it out)")
    if reference is not None and not reference.endswith(".py"):
        raise bad("reference", f"{reference!r} is not a Python file (.py)")
    tol = _typed(meta, "tolerance", dict, bad, {})
    for k, v in tol.items():
        if k not in ("atol", "rtol"):
            raise bad(f"tolerance.{k}", "unknown (tolerance has atol and rtol)")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise bad(f"tolerance.{k}", f"must be a number >= 0, not {v!r}")
    flops = meta.get("flops")
    if flops is not None:
        flops = formula(flops, dims, lambda m: bad("flops", m))
    call = _typed(meta, "call", list, bad, None)
    tags = _typed(meta, "tags", list, bad, [])
    if not all(isinstance(t, str) for t in tags):
        raise bad("tags", "must be a list of strings")
    config = _typed(meta, "config", str, bad, None)
    if config is not None and config not in configs:
        raise bad("config", f"{config!r} is not one of {', '.join(configs)}" if configs else
                            "this target has a single hardware configuration")
    kernel = relative(_typed(meta, "kernel", str, bad), file, "kernel")
    reference = relative(reference, file, "reference") if reference is not None else None
    for key, named in (("kernel", kernel), ("reference", reference)):
        if named is not None and named not in definition.files:
            raise bad(key, f"{named} is not part of the definition")
    return ProblemFile(
        definition=definition, name=name, target=_typed(meta, "target", str, bad),
        description=_typed(meta, "description", str, bad, ""), signature=_typed(meta, "signature", str, bad),
        dims=dict(dims), inputs=tensors["inputs"], outputs=tensors["outputs"],
        kernel=kernel, reference=reference, family=family,
        atol=tol.get("atol"), rtol=tol.get("rtol"), flops=flops, call=tuple(call) if call is not None else None,
        kwargs=_typed(meta, "kwargs", dict, bad, {}), tags=tuple(tags), config=config)


REFERENCE_SHOWN = 6000   # characters of the reference's source a problem's description quotes


def describe(pf: ProblemFile, atol: float, rtol: float) -> str:
    """The problem in words for the models' prompts: the file's description, entry point, sizes, tensors,
    how outputs are checked, and the reference itself."""
    tensors = lambda ts: "; ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in ts)  # noqa: E731
    sizes = ", ".join(f"{k}={v}" for k, v in pf.dims.items())
    check = "exactly" if not atol and not rtol else f"within atol {atol:g} + rtol {rtol:g} x |expected|"
    text = (f"{pf.description.strip()} Entry point: {pf.signature.strip()}. " + (f"Sizes: {sizes}. " if sizes else "")
            + f"Inputs: {tensors(pf.inputs)}. Outputs: {tensors(pf.outputs)}. Outputs are checked {check}")
    if pf.reference is None:
        return text + f" against the built-in {pf.family} family's reference."
    source = pf.definition.files[pf.reference]
    if len(source) > REFERENCE_SHOWN:
        source = source[:REFERENCE_SHOWN] + "\n# [... the rest of the reference is omitted ...]"
    return text + f" against this numpy reference ({pf.reference}):\n```python\n{source.rstrip()}\n```"


_TYPE_WORDS = {str: "a string", dict: "a table", list: "a list"}


def _typed(meta: dict, key: str, kind: type, bad, default: Any = ...):
    if key not in meta:
        if default is ...:
            raise bad(key, "missing")
        return default
    value = meta[key]
    if not isinstance(value, kind):
        raise bad(key, f"must be {_TYPE_WORDS[kind]}, not {value!r}")
    return value


def _tensor(t: Any, where: str, is_input: bool, dims: dict, dtypes: tuple[str, ...], bad) -> TensorDecl:
    if not isinstance(t, dict):
        raise bad(where, "must be a table with name, shape and dtype")
    allowed = TENSOR_KEYS if is_input else TENSOR_KEYS[:3]
    for k in t:
        if k not in allowed:
            raise bad(f"{where}.{k}", f"unknown key (an {'input' if is_input else 'output'} has "
                                      f"{', '.join(allowed)})")
    for k in ("name", "shape", "dtype"):
        if k not in t:
            raise bad(f"{where}.{k}", "missing")
    name, shape, dtype = t["name"], t["shape"], t["dtype"]
    if not isinstance(name, str) or not IDENT.fullmatch(name):
        raise bad(f"{where}.name", f"{name!r} is not an identifier")
    if dtype not in dtypes:
        raise bad(f"{where}.dtype", f"{dtype!r} is not one of {', '.join(dtypes)}")
    if not isinstance(shape, list) or not 1 <= len(shape) <= 8:
        raise bad(f"{where}.shape", f"must be a list of 1 to 8 sizes (numbers or dim names), not {shape!r}")
    resolved = []
    for i, s in enumerate(shape):
        if isinstance(s, str):
            if s not in dims:
                known = ", ".join(dims) or "none"
                raise bad(f"{where}.shape[{i}]", f"{s!r} is not a dim of this problem (dims: {known})")
            resolved.append(dims[s])
        elif isinstance(s, int) and not isinstance(s, bool) and s >= 1:
            resolved.append(s)
        else:
            raise bad(f"{where}.shape[{i}]", f"must be an integer >= 1 or a dim name, not {s!r}")
    rng = t.get("range")
    if rng is not None:
        if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, (int, float)) and
                                                                  not isinstance(v, bool) for v in rng)
                and rng[0] < rng[1]):
            raise bad(f"{where}.range", f"must be [low, high] with low < high, not {rng!r}")
        rng = (rng[0], rng[1])
    sparsity = t.get("sparsity", 0.0)
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) or not 0 <= sparsity < 1:
        raise bad(f"{where}.sparsity", f"must be a fraction in [0, 1), not {sparsity!r}")
    probability = t.get("probability")
    if dtype == "bool" and (rng is not None or "sparsity" in t):
        raise bad(f"{where}.{'range' if rng is not None else 'sparsity'}", "a bool input is drawn by its "
                  "probability (the chance each element is True), not a range or a sparsity")
    if probability is not None:
        if dtype != "bool":
            raise bad(f"{where}.probability", f"only a bool input has a probability (this one is {dtype})")
        if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0 <= probability <= 1:
            raise bad(f"{where}.probability", f"must be a fraction in [0, 1], not {probability!r}")
        probability = float(probability)
    return TensorDecl(name, tuple(resolved), tuple(shape), dtype, rng, float(sparsity), probability)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.floordiv, ast.Pow: operator.pow}


def formula(expr: Any, dims: dict[str, int], bad) -> int:
    """An integer or an arithmetic formula over dim names (+ - * / // ** and parentheses), evaluated
    without eval(); `bad(message)` makes the error."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return expr
    if not isinstance(expr, str):
        raise bad(f"must be an integer or a formula over the dims, not {expr!r}")

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name) and node.id in dims:
            return dims[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and not 0 <= right <= 64:
                raise ValueError("exponent out of range")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(f"{ast.unparse(node)!r} is not a number, a dim or + - * / **")
    try:
        return int(value(ast.parse(expr, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        raise bad(f"{expr!r} is not a formula over the dims ({', '.join(dims) or 'none'}): {exc}") from None


__all__ = ["DefinitionError", "ProblemFile", "TensorDecl", "describe", "draw", "formula", "materialize",
           "parse", "read", "scan"]


_LOADED: dict[tuple[str, str], Any] = {}


def load_once(target, definition: ProblemDefinition, load) -> Any:
    """load(target, definition): the target's Problem for a user's problem file, built once per target and
    content; anything unforeseen in the user's file is still one DefinitionError line naming it."""
    key = (target.name, definition.digest)
    try:
        if key not in _LOADED:
            _LOADED[key] = load(target, definition)
        return _LOADED[key]
    except DefinitionError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        raise DefinitionError(f"{definition.path}: {type(exc).__name__}: {exc}") from None
