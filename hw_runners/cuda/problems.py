"""The cuda target's problems: one directory per problem under hw_runners/cuda/problems/ (or a user's own), in
KernelBench's convention.

  problem.toml   name, family, description, tags, dims, flops (useful floating-point operations of one forward),
                 bytes (compulsory DRAM traffic: every input read once, every output written once), dtype (the
                 data type whose peak applies: float32, float16 or bfloat16), tolerance {atol, rtol} (defaults by
                 dtype below), small (optional: smaller values for reference.py's module-level integer constants,
                 the sizes checks on the CPU run at: with_small_sizes writes them into the source), counted
                 (optional: which of flops and bytes a tool counted rather than a person derived).
                 flops and bytes may be left out: they are then counted from one forward of the reference
                 (kernelbench.py: PyTorch's FLOP counter, in a sandboxed child with the target's Python), and
                 are None, with the reason, where that cannot be done
  reference.py   class Model(torch.nn.Module), get_inputs() -> the forward's arguments (tensors made on the CPU
                 with torch's global generator: the judge seeds it and moves them to the device), and
                 get_init_inputs() -> Model's constructor arguments
  naive.py       class ModelNew: the starting kernel (straightforward CUDA through load_inline)
  tuned.py       class ModelNew: a hand-tuned kernel (Triton or CUDA)
The directory is data: adding a problem touches no Python of the product. This module reads only the TOML and the
reference's source (no torch): the evaluator's own process need not have PyTorch.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.cuda.kbcount import int_constants, with_sizes

KERNEL_ROLES = ("naive", "tuned")
WORK = ("flops", "bytes")
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
    flops: int | None               # None: not given and could not be counted (work_note says why)
    bytes: int | None
    dtype: str
    atol: float
    rtol: float
    small: dict[str, int] = field(default_factory=dict)    # reference.py's sizes for checks on the CPU ({}: its own)
    counted: tuple[str, ...] = ()   # which of flops and bytes were counted rather than given
    work_note: str = ""             # how the counted ones were counted, or why they are unknown

    @property
    def reference(self) -> Path:
        return self.directory / "reference.py"

    def reference_source(self, small: bool = False) -> str:
        """reference.py's source; with small=True, at the small sizes (what checks on the CPU run)."""
        source = self.reference.read_text()
        return with_small_sizes(source, self.small) if small else source

    @property
    def work_summary(self) -> str:
        """The work in a few words, for listings: '137.4 GFLOP, 201.3 MB (counted)'."""
        if self.flops is None and self.bytes is None:
            return "unknown"
        parts = [_si(self.flops, "FLOP"), _si(self.bytes, "B")]
        return ", ".join(parts) + (" (counted)" if self.counted else "")


def _si(value: int | None, unit: str) -> str:
    if value is None:
        return f"? {unit}"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value} {unit}"


def with_small_sizes(source: str, small: dict[str, int]) -> str:
    """A reference's source with its module-level integer constants set to `small` where they are assigned, so that
    module-level values computed from them (bias_shape = (out_channels, 1, 1)) follow."""
    return with_sizes(source, small)


def check_small(small: Any, source: str, bad: Callable[[str, str], Exception], reference: str = "reference.py") -> dict:
    """`small` checked: a table naming module-level integer constants of the reference, each a positive integer;
    bad(field, message) makes the error."""
    if not isinstance(small, dict):
        raise bad("small", f"must be a table of sizes, e.g. {{B = 64, D = 512}}, not {small!r}")
    try:
        constants = int_constants(source)
    except SyntaxError as exc:
        raise bad("reference", f"{reference} does not parse: {exc.msg} (line {exc.lineno})") from None
    for name, value in small.items():
        if name not in constants:
            known = ", ".join(constants) or "none"
            raise bad(f"small.{name}", f"not a module-level integer constant of {reference} (its constants: {known})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad(f"small.{name}", f"must be an integer >= 1, not {value!r}")
    return dict(small)


def read_spec(directory: Path, target: Any = None) -> ProblemSpec:
    """The problem of a directory; flops and bytes it leaves out are counted (kernelbench.probe, with `target`'s
    Python and limits: None for the defaults)."""
    path = directory / "problem.toml"
    try:
        meta = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProblemSpecError(f"{path}: {exc}") from None

    def bad(key: str, message: str) -> ProblemSpecError:
        return ProblemSpecError(f"{path}: {key}: {message}")

    name = meta.get("name", directory.name)
    dtype = meta.get("dtype", "float32")
    if dtype not in DTYPES:
        raise bad("dtype", f"must be one of {', '.join(DTYPES)}, not {dtype!r}")
    for key in WORK:
        if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], int) or meta[key] < 0):
            raise bad(key, "must be a non-negative integer (useful FLOPs / compulsory bytes of one forward), or left "
                           "out to be counted")
    counted = meta.get("counted", [])
    if not (isinstance(counted, list) and all(k in WORK and k in meta for k in counted)):
        raise bad("counted", f"must list which of the given flops and bytes were counted, not {counted!r}")
    if not (directory / "reference.py").is_file():
        raise ProblemSpecError(f"{directory}: no reference.py (class Model, get_inputs, get_init_inputs)")
    small = check_small(meta.get("small", {}), (directory / "reference.py").read_text(), bad)
    work = {key: meta.get(key) for key in WORK}
    note = (f"{' and '.join(counted)} counted from one forward of the reference when it was imported: FLOPs by "
            "PyTorch's FLOP counter, which counts matmuls, convolutions and attention only; bytes as the inputs, "
            "parameters and outputs, each once" if counted else "")
    missing = [key for key in WORK if key not in meta]
    if missing:
        from autocomp_zmq.hw_runners.cuda.kernelbench import probe
        found = probe(directory / "reference.py", small=small or None, target=target)
        work.update({key: getattr(found, key) for key in missing})
        counted = counted + [key for key in missing if work[key] is not None]
        note = found.work_note
    atol, rtol = DEFAULT_TOLERANCE[dtype]
    tol = meta.get("tolerance", {})
    return ProblemSpec(name=name, directory=directory, family=meta.get("family", name), dims=dict(meta.get("dims", {})),
                       flops=work["flops"], bytes=work["bytes"], dtype=dtype, atol=float(tol.get("atol", atol)),
                       rtol=float(tol.get("rtol", rtol)), small=small, counted=tuple(counted), work_note=note)


@functools.cache
def load_specs(directory: Path) -> dict[str, ProblemSpec]:
    specs = {}
    for path in sorted(directory.glob("*/problem.toml")):
        spec = read_spec(path.parent)
        specs[spec.name] = spec
    return specs


def describe_work(spec: ProblemSpec) -> str:
    """What the description adds about work the problem did not give, and about the sizes CPU checks run at."""
    lines = []
    if spec.counted or spec.flops is None or spec.bytes is None:
        said = [f"{value:,} {label}" if value is not None else f"{label} unknown"
                for value, label in ((spec.flops, "FLOPs"), (spec.bytes, "bytes"))]
        note = f" ({spec.work_note})" if spec.work_note else ""
        lines.append(f"Work of one forward: {' and '.join(said)}{note}.")
    if spec.small:
        sizes = ", ".join(f"{k}={v}" for k, v in spec.small.items())
        lines.append(f"Checks on the CPU (device=cpu) run the reference at smaller sizes ({sizes}): a kernel must work "
                     "at any sizes, not only the reference's own.")
    return "\n".join(lines)


def to_problem(target: str, spec: ProblemSpec) -> Problem:
    meta = tomllib.loads((spec.directory / "problem.toml").read_text())
    kernels = {role: spec.directory / f"{role}.py" for role in KERNEL_ROLES if (spec.directory / f"{role}.py").is_file()}
    reference = spec.reference.read_text()
    work = describe_work(spec)
    description = (meta.get("description", "").strip() + (f"\n\n{work}" if work else "")
                   + "\n\nThe reference (reference.py):\n```python\n" + reference.strip() + "\n```")
    return Problem(name=spec.name, target=target, family=spec.family, dims=spec.dims, description=description,
                   kernels=kernels, tags=tuple(meta.get("tags", ())), semantics=spec)
