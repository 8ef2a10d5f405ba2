"""Helpers shared by the trainium-sim tests: throwaway problems and a TrainiumSim that evaluates them.

A test describes a tiny problem (input and output tensors, a numpy reference, a tolerance); `SimKit`
writes it as a problem directory (problem.toml + reference.py, the format of hw_runners/trainium_sim/problems/) in a
temporary folder and evaluates kernel source against it with a real TrainiumSim, sandbox included.
Each problem gets its own problems root because the loaders cache one listing per directory.
"""
from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

from autocomp_zmq.hw_runners.base import EvalResult, Problem
from autocomp_zmq.hw_runners.trainium_sim.workloads import load_problems, spec_of
from autocomp_zmq.hw_runners.trainium_sim.target import TrainiumSim

HEADER = ("import numpy as np\nimport neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n"
          "import neuronxcc.nki.isa as nisa\n")

_TOML_DTYPES = ("float32", "bfloat16", "float16", "int32", "uint32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2")


def _toml_value(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def _default_maker(inputs: dict[str, tuple]) -> str:
    """make_inputs drawing every float input from N(0, 1) and int inputs from [-50, 50)."""
    lines = ["def make_inputs(rng):", "    return {"]
    for name, (shape, dtype) in inputs.items():
        if dtype == "int32":
            lines.append(f"        {name!r}: rng.integers(-50, 50, size={tuple(shape)!r}).astype(np.int32),")
        else:
            lines.append(f"        {name!r}: rng.standard_normal({tuple(shape)!r}).astype(np.float32),")
    lines.append("    }")
    return "\n".join(lines) + "\n"


class LocalSim(TrainiumSim):
    """A TrainiumSim whose problems are the ones the tests wrote (one problems root per problem)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.roots: dict[str, Path] = {}

    def problems(self) -> list[Problem]:
        return [p for root in self.roots.values() for p in load_problems(self.name, root)]

    def spec(self, problem: Problem):
        return spec_of(problem, self.roots[problem.name])


class SimKit:
    """Writes problems under `base` and evaluates kernels on them."""
    _ids = itertools.count()

    def __init__(self, base: Path, **options) -> None:
        self.base = Path(base)
        self.sim = LocalSim(**options)

    def problem(self, inputs: dict[str, tuple], outputs: dict[str, tuple], reference: str, *,
                make_inputs: str | None = None, atol: float = 1e-4, rtol: float = 1e-3,
                call: list | None = None, kwargs: dict | None = None, flops: int = 0,
                name: str | None = None, nki2: dict | None = None) -> Problem:
        """A problem with HBM `inputs`/`outputs` ({name: (shape, dtype)}) and a numpy `reference`
        (source defining `reference(...)`; `np` is imported). `call` defaults to the input names. `nki2`: what
        the problem's [nki2] table redefines for NKI v2 kernels (inputs, outputs, call, kwargs; the signature
        follows from them as the problem's does)."""
        name = name or f"t{next(self._ids)}"
        call = list(call) if call is not None else list(inputs)
        kwargs = dict(kwargs or {})
        for _, dtype in list(inputs.values()) + list(outputs.values()):
            assert dtype in _TOML_DTYPES, dtype
        lines = [f"name = {_toml_value(name)}", 'description = "a trainium-sim test problem"',
                 f"signature = {_toml_value(_signature(inputs, call, kwargs))}", f"flops = {int(flops)}",
                 f"call = {_toml_value(call)}", f"tolerance = {{atol = {atol!r}, rtol = {rtol!r}}}"]
        if nki2:
            v2_inputs = nki2.get("inputs", inputs)
            v2_call = list(nki2.get("call", v2_inputs if "inputs" in nki2 else call))
            v2_kwargs = dict(nki2.get("kwargs", kwargs))
            lines += ["[nki2]", f"signature = {_toml_value(_signature(v2_inputs, v2_call, v2_kwargs))}",
                      f"call = {_toml_value(v2_call)}",
                      "kwargs = {" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in v2_kwargs.items()) + "}"]
            for key in ("inputs", "outputs"):
                if key in nki2:
                    lines.append(f"{key} = [" + ", ".join(
                        f"{{name = {_toml_value(t)}, shape = {_toml_value(list(shape))}, dtype = {_toml_value(dt)}}}"
                        for t, (shape, dt) in nki2[key].items()) + "]")
        if kwargs:
            lines.append("[kwargs]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in kwargs.items()]
        for key, tensors in (("inputs", inputs), ("outputs", outputs)):
            for tname, (shape, dtype) in tensors.items():
                lines += [f"[[{key}]]", f"name = {_toml_value(tname)}", f"shape = {_toml_value(list(shape))}",
                          f"dtype = {_toml_value(dtype)}"]
        root = self.base / name
        (root / name).mkdir(parents=True)
        (root / name / "problem.toml").write_text("\n".join(lines) + "\n")
        maker = textwrap.dedent(make_inputs) if make_inputs else _default_maker(inputs)
        (root / name / "reference.py").write_text("import numpy as np\n\n" + maker + "\n\n"
                                                  + textwrap.dedent(reference))
        self.sim.roots[name] = root
        return self.sim.problem(name)

    def evaluate(self, problem: Problem, body: str, *, header: bool = True, **kw) -> EvalResult:
        """Evaluate kernel source (dedented; the usual imports prepended unless header=False)."""
        code = (HEADER if header else "") + textwrap.dedent(body)
        return self.sim.evaluate(problem, code, **kw)


def _signature(inputs: dict, call: list, kwargs: dict) -> str:
    """solution(...) naming the call's inputs by name and its literals arg<i>, then the keyword arguments."""
    params = [c if isinstance(c, str) and c in inputs else f"arg{i}" for i, c in enumerate(call)]
    return f"solution({', '.join(params + list(kwargs))})"


def line_of(code: str, marker: str, header: bool = True) -> int:
    """The kernel.py line holding `marker` once the header is prepended (what error messages cite)."""
    text = (HEADER if header else "") + textwrap.dedent(code)
    for n, line in enumerate(text.splitlines(), 1):
        if marker in line:
            return n
    raise AssertionError(f"{marker!r} is not in the kernel")


def explain(r: EvalResult) -> str:
    """A failure message for asserts: the verdict and its texts."""
    return f"correct={r.correct} kind={r.error_kind}\nerror: {r.error}\nstderr: {r.stderr}\nstdout: {r.stdout[-500:]}"


def ok(r: EvalResult) -> None:
    assert r.correct, explain(r)

