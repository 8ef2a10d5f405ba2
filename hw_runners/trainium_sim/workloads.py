"""Workloads of the Trainium targets (trainium-sim and the real trainium runner).

Each problem is a directory hw_runners/trainium_sim/problems/<name>/ holding problem.toml (signature, input and output
tensors, literal arguments, tolerance), reference.py (trusted numpy: input maker and reference outputs)
and its starting (naive.py) and hand-tuned (tuned.py) NKI kernels, and their NKI v2 versions
(naive_nki2.py, tuned_nki2.py) where written. The directory is data: adding a
problem touches no Python of the product. A sibling at another size declares `like = "NAME"` and uses
that problem's reference and kernels; a reference whose make_inputs takes `shapes` gets the declared
input shapes (name -> shape), so one reference serves every size.

A problem may be defined differently for kernels written in NKI v2: a `[nki2]` table replaces any of signature,
call, kwargs, inputs, outputs, description and tolerance (Autocomp's trn-*-nki2 harnesses pass some problems other
inputs than its nki1 ones: a causal mask, a pre-broadcast or pre-transposed operand). A kernel is judged by the
definition of the dialect it imports (ProblemSpec.for_dialect), and a run's problem description shows the one of its
ISA profile's dialect (in_profile). In the table, `{DIM}` in signature and description stands for a size and
`{description}` for the problem's own description; a `like` sibling inherits its home's table (its own [nki2]
keys win), and a parametric size resolves the table's shapes as it does the problem's.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from autocomp_zmq.hw_runners.base import Problem, ProblemSizeError
from autocomp_zmq.hw_runners.problemfile import TensorDecl, draw, formula
from autocomp_zmq.hw_runners.trainium_sim.ops import ITEMSIZE, round_to



# the kernels a problem directory may hold, by role (file ROLE.py): the NKI v1 starting and hand-tuned kernels,
# and their NKI v2 counterparts (the nki2 ISA profile starts from naive_nki2; target.toml)
KERNEL_ROLES = ("naive", "tuned", "naive_nki2", "tuned_nki2")
# a dialect (dialect.py's V1/V2, an ISA profile's `dialect` setting) -> the problem.toml table that redefines the
# problem for kernels written in it; what such a table may replace
DIALECT_TABLES = {"v2": "nki2"}
OVERRIDABLE = ("signature", "call", "kwargs", "inputs", "outputs", "description", "tolerance")


class ProblemSpecError(ValueError):
    """A problem directory that does not say what an evaluation needs."""


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


@dataclass(frozen=True, eq=False)      # identity hash: specs are loaded once per directory
class ProblemSpec:
    """What evaluating a kernel for one problem needs beyond the Problem record."""
    name: str
    directory: Path                     # where reference.py and the kernels are (a `like` problem's)
    defined_in: Path                    # the directory of this problem's problem.toml
    signature: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    call: tuple[Any, ...]               # input names (str) or literal values, positionally
    kwargs: dict[str, Any] = field(default_factory=dict)
    atol: float = 1e-4
    rtol: float = 1e-2
    flops: int = 0
    reference_file: str = "reference.py"
    draws: tuple[TensorDecl, ...] = ()  # a problem file's inputs, drawn as declared instead of by make_inputs
    prose: str = ""                     # the problem's description (what `Problem.description` opens with)
    # dialect -> this problem as a kernel in that dialect is judged (a [nki2] table); absent: this definition
    dialects: dict[str, "ProblemSpec"] = field(default_factory=dict)

    def for_dialect(self, dialect: str | None) -> "ProblemSpec":
        """The definition a kernel in `dialect` ("v1", "v2"; tracer.dialect_of) is judged by."""
        return self.dialects.get(dialect, self)

    @property
    def compulsory_bytes(self) -> tuple[int, int]:
        """(bytes every kernel must read from HBM, bytes it must write)."""
        return sum(t.nbytes for t in self.inputs), sum(t.nbytes for t in self.outputs)

    @functools.cached_property
    def module(self) -> ModuleType:
        path = self.directory / self.reference_file
        spec = importlib.util.spec_from_file_location(f"trainium_problem_{re.sub(r'[^A-Za-z0-9_]', '_', self.name)}",
                                                      path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def make_inputs(self, seed: int | np.random.SeedSequence) -> dict[str, np.ndarray]:
        shapes = {t.name: t.shape for t in self.inputs}
        rng = np.random.default_rng(seed)
        if self.draws:   # a user's problem file: its declared ranges
            arrays = {t.name: draw(rng, t) for t in self.draws}
        else:
            make = self.module.make_inputs
            arrays = make(rng, shapes=shapes) if "shapes" in inspect.signature(make).parameters else make(rng)
        out = {}
        for t in self.inputs:
            a = np.asarray(arrays[t.name])
            if a.shape != t.shape:
                raise ProblemSpecError(f"{self.name}: make_inputs gave {t.name} the shape {a.shape}, not {t.shape}")
            # The values a tensor of this dtype holds: kernel and reference see the same inputs.
            out[t.name] = round_to(a, t.dtype)
        return out

    def reference(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        """The reference outputs in float64."""
        return tuple(np.asarray(g, dtype=np.float64) for g in self.returned(inputs))

    def returned(self, inputs: dict[str, np.ndarray]) -> tuple:
        """The reference outputs as the reference returns them (arrays of any dtype, views included)."""
        names = _parameter_names(self.signature)
        args = {}
        for i, item in enumerate(self.call):
            value = inputs[item] if isinstance(item, str) and item in inputs else item
            args[names[i]] = value
        got = self.module.reference(**args, **self.kwargs)
        return got if isinstance(got, tuple) else (got,)


def _parameter_names(signature: str) -> list[str]:
    """Parameter names of `solution(a, b, c=1, **kwargs)`, in order."""
    inner = signature[signature.index("(") + 1:signature.rindex(")")]
    names = []
    for part in inner.split(","):
        part = part.strip()
        if part and not part.startswith("*"):
            names.append(part.split("=")[0].strip())
    return names


def _literal(value: Any) -> Any:
    """TOML has arrays only: an array is passed as a tuple (padding ((0, 0), (1, 1)), as kernels expect it), an
    inline table {list = [...]} as a list (Autocomp's conv2d compares in_perm == [0, 1, 2, 3])."""
    if isinstance(value, dict) and set(value) == {"list"} and isinstance(value["list"], list):
        return [_literal(v) for v in value["list"]]
    return tuple(_literal(v) for v in value) if isinstance(value, list) else value


def _meta(directory: Path) -> dict:
    path = directory / "problem.toml"
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProblemSpecError(f"unreadable problem file {path}: {exc}") from None


def _spec(directory: Path, dims: dict[str, int] | None = None, name: str | None = None) -> ProblemSpec:
    """The problem of directory/problem.toml, at its own dims or at `dims` (a parametric name), with its
    definitions for other dialects."""
    path = directory / "problem.toml"
    meta = _meta(directory)
    dims = dims or {k: int(v) for k, v in meta.get("dims", {}).items()}
    home = directory.parent / meta["like"] if "like" in meta else directory
    variants = {}
    for dialect, key in DIALECT_TABLES.items():
        table = {**(_meta(home).get(key, {}) if home != directory else {}), **meta.get(key, {})}
        unknown = sorted(set(table) - set(OVERRIDABLE))
        if unknown:
            raise ProblemSpecError(f"{path}: [{key}] may redefine {', '.join(OVERRIDABLE)}, not {', '.join(unknown)}")
        if table:
            for text in ("signature", "description"):
                if text in table:
                    table[text] = _placed(table[text], dims, meta.get("description", ""))
            variants[dialect] = _build(path, {**meta, **table}, dims, home, directory, name)
    return dataclasses.replace(_build(path, meta, dims, home, directory, name), dialects=variants)


def _placed(text: str, dims: dict[str, int], description: str) -> str:
    """A [nki2] table's text with `{DIM}` as its size and `{description}` as the problem's own description;
    other braces (a formula's sum_{ci, a, b}) stay as written."""
    def sub(m):
        key = m.group(1)
        return str(dims[key]) if key in dims else description.strip() if key == "description" else m.group(0)
    return re.sub(r"\{(\w+)\}", sub, text)


def _build(path: Path, meta: dict, dims: dict[str, int], home: Path, directory: Path, name: str | None) -> ProblemSpec:
    try:
        def bad(message):
            return ProblemSpecError(f"{path}: {message}")

        def size(s):      # a number, a dim, or a formula over the dims (mamba's B_exp: "STATE * 128")
            return formula(s, dims, bad) if isinstance(s, str) else s
        tensors = lambda key: tuple(TensorSpec(t["name"], tuple(size(s) for s in t["shape"]), t["dtype"])  # noqa: E731
                                    for t in meta[key])
        tol = meta.get("tolerance", {})
        spec = ProblemSpec(name=name or meta["name"], directory=home, defined_in=directory,
                           signature=meta["signature"], inputs=tensors("inputs"), outputs=tensors("outputs"),
                           call=tuple(_literal(c) for c in meta["call"]),
                           kwargs={k: _literal(v) for k, v in meta.get("kwargs", {}).items()},
                           atol=float(tol.get("atol", 1e-4)), rtol=float(tol.get("rtol", 1e-2)),
                           flops=formula(meta.get("flops", 0), dims, bad), prose=meta.get("description", ""))
    except KeyError as exc:
        raise ProblemSpecError(f"{path} does not declare {exc.args[0]!r}") from None
    for t in spec.inputs + spec.outputs:
        if t.dtype not in ITEMSIZE:
            raise ProblemSpecError(f"{path}: tensor {t.name} has unknown dtype {t.dtype!r}")
    return spec


@functools.cache
def load_specs(directory: Path) -> dict[str, ProblemSpec]:
    specs = {}
    for path in sorted(directory.glob("*/problem.toml")):
        spec = _spec(path.parent)
        specs[spec.name] = spec
    return specs


def _problem(target: str, spec: ProblemSpec, meta: dict, dims: dict[str, int], family: str, tags=(),
             kernel_roles=KERNEL_ROLES, semantics: ProblemSpec | None = None) -> Problem:
    kernels = {role: spec.directory / f"{role}.py" for role in kernel_roles
               if (spec.directory / f"{role}.py").exists()}
    return Problem(name=spec.name, target=target, family=family, dims=dims,
                   description=_description(spec, meta.get("description", "")), kernels=kernels,
                   tags=tuple(tags), semantics=semantics)


def _description(spec: ProblemSpec, prose: str) -> str:
    shapes = "; ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in spec.inputs)
    outs = "; ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in spec.outputs)
    return (f"{prose} Entry point: @nki.jit def {spec.signature}. Inputs: {shapes}. "
            f"Returns: {outs}. Tolerance: atol {spec.atol:g}, rtol {spec.rtol:g}.")


def in_profile(problem: Problem, spec: ProblemSpec, dialect: str | None) -> Problem:
    """The problem as a run under an ISA profile of `dialect` sees it: the description of that dialect's
    definition where the problem has one (the model writes the signature it reads)."""
    variant = spec.dialects.get(dialect)
    if variant is None:
        return problem
    return dataclasses.replace(problem, description=_description(variant, variant.prose))


@functools.cache
def load_problems(target: str, directory: Path) -> tuple[Problem, ...]:
    problems = []
    for name, spec in load_specs(directory).items():
        meta = _meta(spec.defined_in)
        problems.append(_problem(target, spec, meta, {k: int(v) for k, v in meta.get("dims", {}).items()},
                                 meta.get("family", name), meta.get("tags", ())))
    return tuple(problems)


@functools.cache
def _parametric(directory: Path) -> tuple[tuple[str, str, Path, dict], ...]:
    """(regex, pattern, problem directory, [parametric] table) of every problem that has one."""
    found = []
    for path in sorted(directory.glob("*/problem.toml")):
        table = _meta(path.parent).get("parametric")
        if table:
            pattern = table["name"]
            regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[0-9]+)", re.escape(pattern))
            found.append((regex, pattern, path.parent, table))
    return tuple(found)


def name_patterns(directory: Path) -> list[str]:
    return [pattern.replace("{", "").replace("}", "") for _, pattern, _, _ in _parametric(directory)]


@functools.cache
def parametric_problem(target: str, directory: Path, name: str) -> Problem | None:
    """A problem with a [parametric] table at the sizes its name gives (ProblemSizeError when its kernels
    cannot take them), or None when the name follows no pattern."""
    for regex, pattern, home, table in _parametric(directory):
        m = re.fullmatch(regex, name)
        if not m:
            continue
        dims = {k: int(v) for k, v in m.groupdict().items()}
        if pattern.format(**dims) != name:       # leading zeros: not the name of these sizes
            return None
        spec = _spec(home, dims, name)
        unmet = _unmet(table, dims, spec.flops)
        if unmet:
            raise ProblemSizeError(f"{name}: {target}'s {pattern.split('-')[0]} kernels need {unmet}")
        meta = _meta(home)
        roles = [role for role in KERNEL_ROLES if role not in table or not _unmet(table[role], dims, 0)]
        return _problem(target, spec, meta, dims, meta.get("family", meta["name"]), (), roles, semantics=spec)
    return None


def _unmet(table: dict, dims: dict[str, int], flops: int) -> str:
    """The constraints of a [parametric] table (or of one kernel's table in it) these sizes break, in words."""
    needs = [f"{k} a multiple of {n}" for k, n in table.get("multiple_of", {}).items()]
    needs += [f"{k} >= {n}" for k, n in table.get("min", {}).items()]
    needs += [f"{k} <= {n}" for k, n in table.get("max", {}).items()]
    ok = all(dims[k] >= n for k, n in table.get("min", {}).items()) and min(dims.values()) >= 1 \
        and all(dims[k] % n == 0 for k, n in table.get("multiple_of", {}).items()) \
        and all(dims[k] <= n for k, n in table.get("max", {}).items())
    if "max_product" in table:
        needs.append(f"{' * '.join(dims)} <= {table['max_product']:,}")
        ok = ok and math.prod(dims.values()) <= table["max_product"]
    if "max_flops" in table:
        needs.append(f"at most {table['max_flops']:,} flops (this size has {flops:,}) so that an evaluation stays "
                     "under about 15 s")
        ok = ok and flops <= table["max_flops"]
    if min(dims.values()) < 1:
        needs.insert(0, "every size >= 1")
    return "" if ok else ", ".join(needs)


def spec_of(problem: Problem, directory: Path) -> ProblemSpec:
    """What evaluating a kernel for the problem needs (for_dialect picks a dialect's definition): a parametric
    or user problem carries it; a listed problem's comes from its directory."""
    return problem.semantics or load_specs(directory)[problem.name]
