"""The cuda target's problems: one directory per problem under hw_runners/cuda/problems/ (or a user's own), in
KernelBench's convention.

  problem.toml   name, family, description, tags, dims, flops (useful floating-point operations of one forward),
                 bytes (compulsory DRAM traffic: every input read once, every output written once), dtype (the
                 data type whose peak applies: float32, float16 or bfloat16), tolerance {atol, rtol} (defaults by
                 dtype below), small (optional: smaller values for reference.py's module-level sizes, which
                 get_inputs and get_init_inputs read when called: the sizes checks on the CPU run at)
  reference.py   class Model(torch.nn.Module), get_inputs() -> the forward's arguments (tensors made on the CPU
                 with torch's global generator: the judge seeds it and moves them to the device), and
                 get_init_inputs() -> Model's constructor arguments
  naive.py       class ModelNew: the starting kernel (straightforward CUDA through load_inline)
  tuned.py       class ModelNew: a hand-tuned kernel (Triton or CUDA)
The directory is data: adding a problem touches no Python of the product. This module reads only the TOML (no
torch): the evaluator's own process need not have PyTorch.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from autocomp_zmq.hw_runners.base import Problem

KERNEL_ROLES = ("naive", "tuned")
DTYPES = ("float32", "float16", "bfloat16")
# |got - want| <= atol + rtol * |want|, by the dtype of the computation: fp32 results differ from the reference's
# by summation order; fp16/bf16 ones by their 11/8-bit mantissas
DEFAULT_TOLERANCE = {"float32": (1e-3, 1e-3), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


class ProblemSpecError(ValueError):
    """A problem directory that does not say what an evaluation needs."""


@dataclass(frozen=True)
class ProblemSpec:
    """What judging a kernel for one problem needs beyond the Problem record."""
    name: str
    directory: Path
    family: str
    dims: dict
    flops: int
    bytes: int
    dtype: str
    atol: float
    rtol: float

    @property
    def reference(self) -> Path:
        return self.directory / "reference.py"


def read_spec(directory: Path) -> ProblemSpec:
    path = directory / "problem.toml"
    try:
        meta = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProblemSpecError(f"{path}: {exc}") from None
    name = meta.get("name", directory.name)
    dtype = meta.get("dtype", "float32")
    if dtype not in DTYPES:
        raise ProblemSpecError(f"{path}: dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    for key in ("flops", "bytes"):
        if not isinstance(meta.get(key), int) or meta[key] < 0:
            raise ProblemSpecError(f"{path}: {key} must be a non-negative integer (useful FLOPs / compulsory bytes "
                                   "of one forward)")
    if not (directory / "reference.py").is_file():
        raise ProblemSpecError(f"{directory}: no reference.py (class Model, get_inputs, get_init_inputs)")
    atol, rtol = DEFAULT_TOLERANCE[dtype]
    tol = meta.get("tolerance", {})
    return ProblemSpec(name=name, directory=directory, family=meta.get("family", name), dims=dict(meta.get("dims", {})),
                       flops=meta["flops"], bytes=meta["bytes"], dtype=dtype, atol=float(tol.get("atol", atol)),
                       rtol=float(tol.get("rtol", rtol)))


@functools.cache
def load_specs(directory: Path) -> dict[str, ProblemSpec]:
    specs = {}
    for path in sorted(directory.glob("*/problem.toml")):
        spec = read_spec(path.parent)
        specs[spec.name] = spec
    return specs


def to_problem(target: str, spec: ProblemSpec) -> Problem:
    meta = tomllib.loads((spec.directory / "problem.toml").read_text())
    kernels = {role: spec.directory / f"{role}.py" for role in KERNEL_ROLES if (spec.directory / f"{role}.py").is_file()}
    reference = spec.reference.read_text()
    description = (meta.get("description", "").strip() + "\n\nThe reference (reference.py):\n```python\n"
                   + reference.strip() + "\n```")
    return Problem(name=spec.name, target=target, family=spec.family, dims=spec.dims, description=description,
                   kernels=kernels, tags=tuple(meta.get("tags", ())))
