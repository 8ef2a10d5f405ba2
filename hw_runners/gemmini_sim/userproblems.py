"""gemmini-sim problems from a user's problem file (hw_runners/problemfile.py has the format).

The file becomes a Family like the built-in ones: its arguments in the order of the C signature, its numpy
reference, its inputs (make_inputs, declared ranges, else the target's usual input sets) and its sizes as -D
macros. With `family = "gemm"` (or "conv3x3") the file promises the built-in family's semantics at its dims:
that is checked (dims, argument types and shapes, and the reference against the family's on one input set),
and then the family's kernels and the offline heuristic apply to it."""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from autocomp_zmq.hw_runners import problemfile
from autocomp_zmq.hw_runners.base import Problem
from autocomp_zmq.hw_runners.gemmini_sim import configs as gconfigs
from autocomp_zmq.hw_runners.gemmini_sim.workloads import FAMILIES, INPUT_SETS, MAX_ELEMENTS, ArgSpec, Family, family_problem
from autocomp_zmq.hw_runners.problemfile import OWN_PREFIX, DefinitionError, ProblemFile
from autocomp_zmq.protocols.jobs import ProblemDefinition

DTYPES = ("int8", "int32", "float32")
C_TYPES = {"int8_t": "int8", "int32_t": "int32", "float": "float32"}   # and elem_t, acc_t: the configuration's
NUMPY = {"int8": np.int8, "int32": np.int32, "float32": np.float32}
HEADERS = Path(__file__).with_name("csrc") / "include"
PROBLEM_MACROS = {"I", "J", "K", "P", "C"}      # names gemmini.h leaves free for problem sizes
_PARAM = re.compile(r"(?:const\s+)?(\w+)\s+(\w+)\s*((?:\[[^\[\]]+\])+)")


class FileFamily(Family):
    """A problem file's semantics, shaped like a built-in family (one set of dims: the file's)."""

    def __init__(self, pf: ProblemFile, base: Family | None, args: list[ArgSpec], config: str) -> None:
        self.pf, self.base, self._args = pf, base, args
        self.key = base.key if base else OWN_PREFIX + pf.name
        self.dim_names = tuple(pf.dims)
        self.tolerance = (float(pf.atol or 0.0), float(pf.rtol or 0.0))
        self.config = config

    def signature(self, d):
        return self.pf.signature

    def name(self, d):
        return self.pf.name

    def args(self, d):
        return self._args

    def macs(self, d):
        return self.base.macs(d) if self.base else (self.pf.flops or 0) // 2

    def reduction_length(self, d):
        return self.base.reduction_length(d) if self.base else 16

    def defines(self, d):
        return self.base.defines(d) if self.base else ["-DAUTOCOMP_OWN"] + [f"-D{k}={v}" for k, v in d.items()]

    def prototype(self, d):
        return "" if self.base else self.pf.signature.strip().rstrip(";") + ";"

    def harness_macros(self, d, names=None):
        # a family's problem keeps Autocomp's harness macros, naming this file's own arrays
        return self.base.harness_macros(d, names or [a.name for a in self._args]) if self.base else {}

    def tile_products(self, d):
        return self.base.tile_products(d) if self.base else 0

    def make_inputs(self, d, seed, kind):
        made = self.pf.make_inputs(np.random.default_rng([seed, INPUT_SETS.index(kind), *d.values()]))
        if made is None:   # neither make_inputs nor ranges: the family's input sets, else the usual kinds
            return self.base.make_inputs(d, seed, kind) if self.base else super().make_inputs(d, seed, kind)
        return [_exact(made[a.name], a, self.pf, "make_inputs gave") for a in self._args if not a.output]

    def reference(self, d, inputs):
        if self.pf.module is None:
            return self.base.reference(d, inputs)
        out = next(a for a in self._args if a.output)
        try:
            got = self.pf.module.reference(*inputs)
        except Exception as exc:
            raise self.pf.error("reference", f"reference() failed: {type(exc).__name__}: {exc}") from None
        return _exact(got, out, self.pf, "reference() returned")


def _exact(value, arg: ArgSpec, pf: ProblemFile, what: str) -> np.ndarray:
    """value as the argument's array, if it is one: the right shape, values the dtype holds."""
    a = np.asarray(value)
    if a.shape != arg.shape:
        raise pf.error("reference", f"{what} {arg.name} with shape {list(a.shape)}, not {list(arg.shape)}")
    if np.dtype(arg.dtype).kind == "f":   # float outputs are compared with the file's tolerance
        return a.astype(arg.dtype)
    cast = a.astype(arg.dtype)
    if not np.array_equal(cast, a):
        raise pf.error("reference", f"{what} {arg.name} values that are not {np.dtype(arg.dtype).name} (round and "
                                    f"saturate them as the hardware does)")
    return cast


@functools.cache
def _header_names() -> frozenset[str]:
    """Identifiers of the shim headers: a dim of one of these names (-DNAME=...) would break them."""
    text = "".join(p.read_text() for p in sorted(HEADERS.rglob("*.h")))
    return frozenset(re.findall(r"\b[A-Za-z_]\w*\b", text)) - PROBLEM_MACROS


def _arguments(pf: ProblemFile, entry: str, cfg: gconfigs.GemminiConfig) -> list[ArgSpec]:
    """The kernel's arguments in the signature's order, each a declared tensor of that type and shape."""
    c_types = {**C_TYPES, "elem_t": np.dtype(cfg.elem).name, "acc_t": np.dtype(cfg.acc).name}
    m = re.fullmatch(rf"\s*void\s+{entry}\s*\((.*)\)\s*;?\s*", pf.signature, re.S)
    if not m:
        raise pf.error("signature", f"must be a C declaration `void {entry}(int8_t A[I][K], ...)`")
    tensors = {t.name: (t, False) for t in pf.inputs} | {t.name: (t, True) for t in pf.outputs}
    args, seen = [], set()
    for i, part in enumerate(p.strip() for p in m.group(1).split(",")):
        pm = _PARAM.fullmatch(part)
        if not pm or pm.group(1) not in c_types:
            raise pf.error("signature", f"parameter {i + 1} ({part!r}) is not an array of "
                                        f"{', '.join(c_types)} such as int8_t A[I][K]")
        ctype, name, brackets = pm.groups()
        if name not in tensors:
            raise pf.error("signature", f"parameter {name} is neither an input nor an output of the file")
        t, output = tensors[name]
        sizes = tuple(problemfile.formula(e, pf.dims, lambda msg: pf.error("signature", f"{name}: {msg}"))
                      for e in re.findall(r"\[([^\[\]]+)\]", brackets))
        if c_types[ctype] != t.dtype or sizes != t.shape:
            raise pf.error("signature", f"{name} is {c_types[ctype]}{list(sizes)} here but "
                                        f"{t.dtype}{list(t.shape)} in {'outputs' if output else 'inputs'}")
        if (t.dtype == "float32") != cfg.is_float:   # Gemmini moves its own element type only
            raise pf.error("signature", f"{name} is {t.dtype}, but the {cfg.name} configuration's data is "
                                        f"{'float32' if cfg.is_float else 'int8/int32'} (config = "
                                        f"\"{'int8-16x16' if cfg.is_float else 'fp32-4x4'}\" in the file?)")
        args.append(ArgSpec(name, NUMPY[t.dtype], t.shape, output))
        seen.add(name)
    missing = [n for n in tensors if n not in seen]
    if missing:
        raise pf.error("signature", f"{missing[0]} is declared but is not a parameter of {entry}()")
    return args


def _check_family(pf: ProblemFile, base: Family, args: list[ArgSpec]) -> None:
    """The file's dims and arguments are the family's (names aside); its sizes are feasible."""
    if tuple(pf.dims) != base.dim_names:
        raise pf.error("dims", f"family {base.key!r} has the dims {', '.join(base.dim_names)}; this file "
                               f"declares {', '.join(pf.dims) or 'none'}")
    want = [(a.dtype, a.shape, a.output) for a in base.args(pf.dims)]
    for i, (a, w) in enumerate(zip(args, want)):
        if (a.dtype, a.shape, a.output) != w:
            shown = ", ".join(f"{np.dtype(t).name}{list(s)} {'output' if o else 'input'}" for t, s, o in want)
            raise pf.error("signature", f"family {base.key!r} takes ({shown}); argument {i + 1} ({a.name}) differs")
    if len(args) != len(want):
        raise pf.error("signature", f"family {base.key!r} takes {len(want)} arguments, not {len(args)}")
    why = base.size_limit(pf.dims)
    if why:
        raise pf.error("dims", why)


def _smoke(pf: ProblemFile, fam: FileFamily) -> None:
    """Draw one input set and run the reference on it now, so that a broken reference or input maker
    fails here, in one line, rather than in every evaluation; a family's reference must agree."""
    inputs = fam.make_inputs(pf.dims, 0, INPUT_SETS[0])
    got = fam.reference(pf.dims, inputs)
    if fam.base is not None and pf.module is not None:
        want = fam.base.reference(pf.dims, inputs)
        if not np.array_equal(got, want):
            where = tuple(int(i) for i in np.argwhere(got != want)[0])
            raise pf.error("reference", f"disagrees with the built-in {fam.base.key} family's reference at "
                                        f"{list(where)} (got {got[where]}, the family gives {want[where]}): "
                                        f"family = {fam.base.key!r} promises the family's semantics")


def _load(target, definition: ProblemDefinition) -> Problem:
    pf = problemfile.parse(definition, DTYPES, gconfigs.names())
    try:
        # a target built without options (listing problem files) has no config option
        cfg = gconfigs.choose(pf.config, getattr(getattr(target, "options", None), "config", None))
    except ValueError as exc:
        raise pf.error("config", str(exc)) from None
    if pf.target != target.name:
        raise pf.error("target", f"the file is for {pf.target!r}, not {target.name}")
    reserved = sorted(set(pf.dims) & (_header_names() | {t.name for t in pf.inputs + pf.outputs}))
    if reserved:
        raise pf.error(f"dims.{reserved[0]}", "dims become C macros (-DNAME=size): this name is already used by "
                                              "gemmini.h or by a tensor")
    if len(pf.outputs) != 1:
        raise pf.error("outputs", f"gemmini-sim's harness checks exactly one output array; this file declares "
                                  f"{len(pf.outputs)} ({', '.join(t.name for t in pf.outputs)})")
    if pf.call is not None or pf.kwargs:
        raise pf.error("call" if pf.call is not None else "kwargs", "gemmini-sim passes the signature's arrays; "
                                                                    "call and kwargs are for Python kernels")
    for kind in ("inputs", "outputs"):
        for i, t in enumerate(getattr(pf, kind)):
            n = int(np.prod(t.shape))
            if n > MAX_ELEMENTS:
                raise pf.error(f"{kind}[{i}].shape", f"{n:,} elements; at most {MAX_ELEMENTS:,} per array keep an "
                                                     "evaluation feasible")
    args = _arguments(pf, target.info().entry_point, cfg)
    base = None
    if pf.family is not None:
        base = FAMILIES.get(pf.family)
        if base is None:
            raise pf.error("family", f"{pf.family!r} is not a gemmini-sim family ({', '.join(FAMILIES)})")
        if base.config != cfg.name:
            raise pf.error("family", f"family {base.key!r} runs on the {base.config} configuration, not {cfg.name}")
        _check_family(pf, base, args)
    fam = FileFamily(pf, base, args, cfg.name)
    _smoke(pf, fam)
    kernels = family_problem(target.name, target.info().problems, base, pf.dims).kernels if base else {}
    description = problemfile.describe(pf, *fam.tolerance)
    return Problem(name=pf.name, target=target.name, family=fam.key, dims=dict(pf.dims), description=description,
                   kernels={**kernels, "start": pf.directory / pf.kernel}, tags=pf.tags, semantics=fam,
                   definition=definition)


def from_definition(target, definition: ProblemDefinition) -> Problem:
    """The problem of a user's problem file (loaded once per content); DefinitionError says what is wrong."""
    return problemfile.load_once(target, definition, _load)
