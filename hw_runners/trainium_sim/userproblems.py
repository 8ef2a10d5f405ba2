"""trainium-sim problems from a user's problem file (hw_runners/problemfile.py has the format).

The file becomes a ProblemSpec like a problem directory's: the signature's parameters (`call` gives the
value of any that is not an input tensor), input and output tensors, the numpy reference (called with the
parameters by name) and its make_inputs or the declared ranges, the tolerance (default atol 1e-4, rtol
1e-2). With `family = "rmsnorm"` (a problem of hw_runners/trainium_sim/problems/ that has a [parametric] table: gemm,
rmsnorm, layernorm, transpose) the file promises that problem's semantics at its dims: the same signature, call and
tensors (shapes written in the same dims), and a reference that agrees with that problem's on one input
set; then that problem's kernels and the offline heuristic apply to it.

A `bool` tensor is what NKI calls nl.bool_, "Boolean (True or False) stored as a byte"
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/_modules/nki/language.html): the kernel sees a uint8
tensor of 0s and 1s, the reference numpy bools (so that `~mask` and `np.where(mask, ...)` mean what they say)."""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from autocomp_zmq.hw_runners import problemfile
from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.problemfile import OWN_PREFIX, DefinitionError, ProblemFile
from autocomp_zmq.hw_runners.trainium_sim.ops import ITEMSIZE
from autocomp_zmq.hw_runners.trainium_sim.workloads import (ProblemSpec, ProblemSpecError, TensorSpec, _literal, _meta, _parameter_names,
                                              _parametric, _problem, _spec, _unmet)
from autocomp_zmq.protocols.jobs import ProblemDefinition

# what an evaluation holds of a problem's tensors: each input and output, and a float64 copy of each for the
# reference, in the evaluator's 8 GiB (target.Options.max_memory_bytes). Autocomp's Llama-3.2-1B logits kernels
# need 131 Mi elements (vocabulary 128,256 x 1,024) in one tensor; the paper's largest is 64 Mi (gemm's rhs).
MAX_ELEMENTS = 1 << 28           # per tensor
MAX_PROBLEM_BYTES = 2 << 30      # inputs and outputs together, at their dtypes
DEFAULT_TOLERANCE = (1e-4, 1e-2)
BOOL_STORAGE = "uint8"           # nl.bool_ is a byte


@dataclasses.dataclass(frozen=True, eq=False)
class FileSpec(ProblemSpec):
    """A problem file's ProblemSpec: its bool tensors reach the reference as numpy bools."""
    bools: tuple[str, ...] = ()

    def returned(self, inputs: dict[str, np.ndarray]) -> tuple:
        return super().returned({k: (v != 0) if k in self.bools else v for k, v in inputs.items()})


def _parameters(pf: ProblemFile, entry: str) -> list[str]:
    m = re.fullmatch(rf"\s*(?:def\s+)?{entry}\s*\(([^()]*)\)\s*:?\s*", pf.signature)
    names = [p.strip() for p in m.group(1).split(",") if p.strip()] if m else None
    if not names or not all(problemfile.IDENT.fullmatch(n) for n in names):
        raise pf.error("signature", f"must be the kernel's parameters, e.g. `{entry}(a_tensor, g_tensor)`")
    return names


def _call(pf: ProblemFile, params: list[str]) -> tuple:
    """What solution() is called with, positionally: input names, or the literal values of `call`."""
    inputs = [t.name for t in pf.inputs]
    if pf.call is None:
        for p in params:
            if p not in inputs:
                raise pf.error("call", f"missing: parameter {p} is not an input tensor, so `call` must give "
                                       f"its value (call = [{', '.join(repr(q) if q in inputs else '...' for q in params)}])")
        call = tuple(params)
    else:
        call = tuple(_literal(c) for c in pf.call)
        if len(call) != len(params):
            raise pf.error("call", f"{len(call)} values for the {len(params)} parameters of the signature")
    for i, t in enumerate(pf.inputs):
        if t.name not in call:
            raise pf.error(f"inputs[{i}]", f"{t.name} is not passed to the kernel (neither a parameter nor in call)")
    return call


def _family_spec(pf: ProblemFile, params: list[str], spec: ProblemSpec, root) -> tuple[ProblemSpec, dict, list]:
    """The family's problem at the file's dims, after checking that the file matches it."""
    bases = {home.name: (home, table) for _, _, home, table in _parametric(root)}
    if pf.family not in bases:
        raise pf.error("family", f"{pf.family!r} is not a trainium-sim family with sizes as dims "
                                 f"({', '.join(sorted(bases))})")
    home, table = bases[pf.family]
    meta = _meta(home)
    if set(pf.dims) != set(meta.get("dims", {})):
        raise pf.error("dims", f"family {pf.family!r} has the dims {', '.join(meta.get('dims', {}))}; this file "
                               f"declares {', '.join(pf.dims) or 'none'}")
    base = _spec(home, dict(pf.dims), pf.name)
    if params != _parameter_names(base.signature) or spec.call != base.call:
        raise pf.error("signature", f"family {pf.family!r} is solution({', '.join(_parameter_names(base.signature))}) "
                                    f"called with {list(base.call)}")
    for kind in ("inputs", "outputs"):
        mine = [(t.name, t.dtype, tuple(t.dims)) for t in getattr(pf, kind)]
        theirs = [(t["name"], t["dtype"], tuple(t["shape"])) for t in meta[kind]]
        if mine != theirs:
            shown = "; ".join(f"{n} {d}{list(s)}" for n, d, s in theirs)
            raise pf.error(kind, f"family {pf.family!r} has {kind} {shown}")
    roles = [r for r in ("naive", "tuned") if not _unmet(table, pf.dims, base.flops)
             and (r not in table or not _unmet(table[r], pf.dims, 0))]
    return base, meta, roles


def _smoke(pf: ProblemFile, spec: ProblemSpec, base: ProblemSpec | None) -> None:
    """One input set and its reference outputs now, so that a broken reference fails here, in one line;
    a family's reference must agree within the tolerance."""
    try:
        inputs = spec.make_inputs(0)
    except ProblemSpecError as exc:
        raise pf.error("reference", str(exc).split(": ", 1)[-1]) from None
    except Exception as exc:
        raise pf.error("reference", f"make_inputs failed: {type(exc).__name__}: {exc}") from None
    try:
        got = spec.reference(inputs)
    except Exception as exc:
        raise pf.error("reference", f"reference() failed: {type(exc).__name__}: {exc}") from None
    if len(got) != len(spec.outputs):
        raise pf.error("reference", f"reference() returned {len(got)} array(s); the file declares "
                                    f"{len(spec.outputs)} output(s)")
    for g, t in zip(got, spec.outputs):
        if g.shape != t.shape:
            raise pf.error("reference", f"reference() returned {t.name} with shape {list(g.shape)}, not "
                                        f"{list(t.shape)}")
    if base is not None:
        for g, w, t in zip(got, base.reference(inputs), spec.outputs):
            bad = ~(np.abs(g - w) <= spec.atol + spec.rtol * np.abs(w))
            if bad.any():
                where = tuple(int(i) for i in np.argwhere(bad)[0])
                raise pf.error("reference", f"disagrees with the built-in {pf.family} reference at {t.name}"
                                            f"{list(where)} (got {g[where]:.6g}, the family gives {w[where]:.6g}): "
                                            f"family = {pf.family!r} promises the family's semantics")


def _draws(pf: ProblemFile) -> tuple:
    """The inputs to draw as declared: none when the file's reference has make_inputs, or when it leaves the
    reference (and its make_inputs) to its family and declares no ranges."""
    if pf.module is not None and hasattr(pf.module, "make_inputs"):
        return ()
    return pf.inputs if pf.reference is not None or any(t.range for t in pf.inputs) else ()


def _load(target, definition: ProblemDefinition) -> Problem:
    pf = problemfile.parse(definition, (*ITEMSIZE, "bool"))
    if pf.target != target.name:
        raise pf.error("target", f"the file is for {pf.target!r}, not {target.name}")
    total = 0
    for kind in ("inputs", "outputs"):
        for i, t in enumerate(getattr(pf, kind)):
            n = int(np.prod(t.shape))
            if n > MAX_ELEMENTS:
                raise pf.error(f"{kind}[{i}].shape", f"{n:,} elements; at most {MAX_ELEMENTS:,} "
                                                     "per tensor keep an evaluation feasible")
            total += n * ITEMSIZE[BOOL_STORAGE if t.dtype == "bool" else t.dtype]
    if total > MAX_PROBLEM_BYTES:
        raise pf.error("inputs", f"the inputs and outputs hold {total / 2**30:.2f} GiB; at most "
                                 f"{MAX_PROBLEM_BYTES / 2**30:.0f} GiB keep an evaluation within its memory")
    params = _parameters(pf, target.info().entry_point)
    atol, rtol = (pf.atol if pf.atol is not None else DEFAULT_TOLERANCE[0],
                  pf.rtol if pf.rtol is not None else DEFAULT_TOLERANCE[1])
    tensors = lambda ts: tuple(TensorSpec(t.name, t.shape, BOOL_STORAGE if t.dtype == "bool" else t.dtype)  # noqa: E731
                               for t in ts)
    spec = FileSpec(name=pf.name, directory=pf.directory, defined_in=pf.directory,
                       signature=f"solution({', '.join(params)})", inputs=tensors(pf.inputs),
                       outputs=tensors(pf.outputs), call=_call(pf, params),
                       kwargs={k: _literal(v) for k, v in pf.kwargs.items()}, atol=float(atol), rtol=float(rtol),
                       flops=pf.flops or 0, reference_file=pf.reference or "reference.py", draws=_draws(pf),
                    bools=tuple(t.name for t in pf.inputs if t.dtype == "bool"))
    base = meta = None
    roles: list[str] = []
    if pf.family is not None:
        base, meta, roles = _family_spec(pf, params, spec, target.info().problems)
        if pf.reference is None:   # the family's reference and input maker
            spec = dataclasses.replace(spec, directory=base.directory, reference_file="reference.py")
    pf.module   # imports and checks the reference module now: one line if it is broken
    _smoke(pf, spec, base if pf.reference is not None else None)
    kernels = {}
    if base is not None:
        kernels = _problem(target.name, base, meta, dict(pf.dims), pf.family, (), roles).kernels
    return Problem(name=pf.name, target=target.name, family=pf.family or OWN_PREFIX + pf.name, dims=dict(pf.dims),
                   description=problemfile.describe(pf, atol, rtol),
                   kernels={**kernels, "start": pf.directory / pf.kernel}, tags=pf.tags, semantics=spec,
                   definition=definition)


def from_definition(target, definition: ProblemDefinition) -> Problem:
    """The problem of a user's problem file (loaded once per content); DefinitionError says what is wrong."""
    return problemfile.load_once(target, definition, _load)
