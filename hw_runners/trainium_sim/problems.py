"""Workloads of the Trainium targets (trainium-sim and the real trainium runner).

Each problem is a directory problems/trainium/<name>/ holding problem.toml (signature, input and output
tensors, literal arguments, tolerance), reference.py (trusted numpy: input maker and reference outputs)
and its starting (naive.py) and hand-tuned (tuned.py) NKI kernels. The directory is data: adding a
problem touches no Python of the product. A sibling at another size declares `like = "NAME"` and uses
that problem's reference and kernels; a reference whose make_inputs takes `shapes` gets the declared
input shapes (name -> shape), so one reference serves every size.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from hw_runners.base import Problem
from hw_runners.trainium_sim.ops import ITEMSIZE, round_to



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

    @property
    def compulsory_bytes(self) -> tuple[int, int]:
        """(bytes every kernel must read from HBM, bytes it must write)."""
        return sum(t.nbytes for t in self.inputs), sum(t.nbytes for t in self.outputs)

    @functools.cached_property
    def module(self) -> ModuleType:
        path = self.directory / "reference.py"
        spec = importlib.util.spec_from_file_location(f"trainium_problem_{self.name.replace('-', '_')}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def make_inputs(self, seed: int | np.random.SeedSequence) -> dict[str, np.ndarray]:
        make = self.module.make_inputs
        shapes = {t.name: t.shape for t in self.inputs}
        rng = np.random.default_rng(seed)
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
        names = _parameter_names(self.signature)
        args = {}
        for i, item in enumerate(self.call):
            value = inputs[item] if isinstance(item, str) and item in inputs else item
            args[names[i]] = value
        got = self.module.reference(**args, **self.kwargs)
        got = got if isinstance(got, tuple) else (got,)
        return tuple(np.asarray(g, dtype=np.float64) for g in got)


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
    """TOML has lists, Python kernels expect tuples (e.g. padding ((0, 0), (1, 1)))."""
    return tuple(_literal(v) for v in value) if isinstance(value, list) else value


def _spec(directory: Path) -> ProblemSpec:
    path = directory / "problem.toml"
    try:
        meta = tomllib.loads(path.read_text())
        tensors = lambda key: tuple(TensorSpec(t["name"], tuple(t["shape"]), t["dtype"]) for t in meta[key])  # noqa: E731
        tol = meta.get("tolerance", {})
        home = directory.parent / meta["like"] if "like" in meta else directory
        spec = ProblemSpec(name=meta["name"], directory=home, defined_in=directory, signature=meta["signature"],
                           inputs=tensors("inputs"), outputs=tensors("outputs"),
                           call=tuple(_literal(c) for c in meta["call"]),
                           kwargs={k: _literal(v) for k, v in meta.get("kwargs", {}).items()},
                           atol=float(tol.get("atol", 1e-4)), rtol=float(tol.get("rtol", 1e-2)),
                           flops=int(meta.get("flops", 0)))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProblemSpecError(f"unreadable problem file {path}: {exc}") from None
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


@functools.cache
def load_problems(target: str, directory: Path) -> tuple[Problem, ...]:
    problems = []
    for name, spec in load_specs(directory).items():
        meta = tomllib.loads((spec.defined_in / "problem.toml").read_text())
        kernels = {role: spec.directory / f"{role}.py" for role in ("naive", "tuned")
                   if (spec.directory / f"{role}.py").exists()}
        shapes = "; ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in spec.inputs)
        outs = "; ".join(f"{t.name} {t.dtype}{list(t.shape)}" for t in spec.outputs)
        desc = (f"{meta.get('description', '')} Entry point: @nki.jit def {spec.signature}. Inputs: {shapes}. "
                f"Returns: {outs}. Tolerance: atol {spec.atol:g}, rtol {spec.rtol:g}.")
        problems.append(Problem(name=name, target=target, family=meta.get("family", name),
                                dims={k: int(v) for k, v in meta.get("dims", {}).items()}, description=desc,
                                kernels=kernels, tags=tuple(meta.get("tags", ()))))
    return tuple(problems)


def spec_of(problem: Problem, directory: Path) -> ProblemSpec:
    return load_specs(directory)[problem.name]
