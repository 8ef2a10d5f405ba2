"""Helpers of the cuda heuristic's tests: the real problems as the agent sees them, small copies of them for the cuda
target's CPU functional-check mode, and a check of rendered kernels under Triton's interpreter at small sizes against
the problem's own reference Model (built and fed the way the judge does: torch seeded before each constructor and
before get_inputs).

Triton's interpreter must be chosen before triton is first imported (its library functions are decorated at import),
so the kernels are checked in a child Python started with TRITON_INTERPRET=1 (check_many; this file is its script):
the test process neither imports triton nor sets the variable for the other tests. Small sizes keep ragged edges (no
dimension a multiple of the tiles) and 16-byte aligned rows (TMA descriptors need them)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "hw_runners/cuda/problems"
# module-level sizes of each problem's reference.py at test scale
SMALL = {
    "matmul-fp32": {"M": 40, "N": 36, "K": 52},
    "matmul-bf16": {"M": 40, "N": 24, "K": 56},
    "bmm-fp16": {"BATCH": 3, "M": 24, "N": 40, "K": 48},
    "gemm-bias-gelu-bf16": {"BATCH": 40, "IN_FEATURES": 56, "OUT_FEATURES": 24},
    "gemm-relu-scale-residual-fp16": {"BATCH": 40, "IN_FEATURES": 72, "OUT_FEATURES": 24},
    "softmax": {"B": 5, "D": 600},
    "layernorm": {"B": 5, "D": 600},
    "rmsnorm-bf16": {"B": 5, "D": 600},
}


def wire_problem(name: str):
    """The problem as jobs carry it (agents/problemsource.wire), for the problem at its real sizes."""
    from autocomp_zmq.hw_runners.cuda.problems import load_specs, to_problem
    from autocomp_zmq.protocols.jobs import ProblemRef
    spec = load_specs(PROBLEMS)[name]
    p = to_problem("cuda", spec)
    return ProblemRef(target="cuda", name=p.name, family=p.family, dims=p.dims, description=p.description,
                   latency_unit="us")


def tolerance(name: str) -> tuple[float, float]:
    defaults = {"float32": (1e-3, 1e-3), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}   # problems.py's
    meta = tomllib.loads((PROBLEMS / name / "problem.toml").read_text())
    atol, rtol = defaults[meta.get("dtype", "float32")]
    tol = meta.get("tolerance", {})
    return float(tol.get("atol", atol)), float(tol.get("rtol", rtol))


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod          # Triton's jit reads the kernel's source through its module
    spec.loader.exec_module(mod)
    return mod


_count = [0]


def check(name: str, code: str, seeds=(1,)) -> str | None:
    """Why the kernel `code` is wrong for problem `name` at its small sizes, or None (its outputs match the
    reference Model's within the problem's tolerance on every seed)."""
    _count[0] += 1
    tmp = Path(tempfile.mkdtemp(prefix="cuda-heur-"))
    try:
        return _check_in(tmp, name, code, seeds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_in(tmp: Path, name: str, code: str, seeds) -> str | None:
    import torch
    ref_path, ker_path = tmp / "reference.py", tmp / "kernel.py"
    ref_path.write_text((PROBLEMS / name / "reference.py").read_text())
    ker_path.write_text(code)
    ref = _module(ref_path, f"_cuda_ref_{_count[0]}")
    for k, v in SMALL[name].items():
        setattr(ref, k, v)
    try:
        ker = _module(ker_path, f"_cuda_kernel_{_count[0]}")
    except Exception as exc:  # noqa: BLE001
        return f"the kernel module does not import: {type(exc).__name__}: {exc}"
    atol, rtol = tolerance(name)
    for seed in seeds:
        torch.manual_seed(seed)
        init = ref.get_init_inputs()
        torch.manual_seed(seed)
        model = ref.Model(*init)
        torch.manual_seed(seed)
        new = ker.ModelNew(*init)
        torch.manual_seed(seed + 100)
        inputs = ref.get_inputs()
        want = model(*inputs)
        try:
            got = new(*[t.clone() for t in inputs])
        except Exception as exc:  # noqa: BLE001
            return f"ModelNew.forward raised {type(exc).__name__}: {exc}"
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"output {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}"
        err = (got.double() - want.double()).abs()
        bad = err > atol + rtol * want.double().abs()
        if bad.any() or not torch.isfinite(got.double()).all():
            return f"{int(bad.sum())} of {bad.numel()} elements out of tolerance (max error {err.max().item():.3g})"
    return None


def small_problems(root: Path, names) -> Path:
    """Copies of the problems `names` under `root`, their reference's module-level sizes and problem.toml's dims,
    FLOPs and bytes shrunk to SMALL (the cuda target's CPU functional-check mode judges them in minutes)."""
    import re
    for name in names:
        src, dst = PROBLEMS / name, root / name
        dst.mkdir(parents=True)
        small = SMALL[name]
        ref = (src / "reference.py").read_text()
        for line, lhs, rhs in re.findall(r"^(([A-Z_][A-Z_0-9, ]*) = ([0-9., ]+?))\s*(?:#.*)?$", ref, re.M):
            names_, values = lhs.split(","), rhs.split(",")
            vals = [str(small.get(n.strip(), v.strip())) for n, v in zip(names_, values)]
            ref = ref.replace(line, ", ".join(n.strip() for n in names_) + " = " + ", ".join(vals))
        assert all(f"{k} = " in ref or f"{k}," in ref for k in small), f"{name}: sizes not shrunk"
        (dst / "reference.py").write_text(ref)
        (dst / "naive.py").write_text((src / "naive.py").read_text())
        meta = (src / "problem.toml").read_text()
        dims = {"IN_FEATURES": "IN", "OUT_FEATURES": "OUT"}
        shrunk = ", ".join(f"{dims.get(k, k)} = {v}" for k, v in small.items())
        meta = re.sub(r"^dims = .*$", "dims = {" + shrunk + "}", meta, flags=re.M)
        meta = re.sub(r"^(flops|bytes) = .*$", r"\1 = 1000", meta, flags=re.M)
        (dst / "problem.toml").write_text(meta)
    root.chmod(0o755)
    return root


def check_many(kernels: list[tuple[str, str, str]], timeout: float = 300) -> dict[str, str | None]:
    """check() of each (label, problem name, code), in one child Python under Triton's interpreter: label -> why the
    kernel is wrong, or None."""
    tmp = Path(tempfile.mkdtemp(prefix="cuda-heur-many-"))
    jobs = []
    for i, (label, name, code) in enumerate(kernels):
        (tmp / f"k{i}.py").write_text(code)
        jobs.append({"label": label, "name": name, "code": str(tmp / f"k{i}.py")})
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, __file__, str(tmp / "jobs.json")], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
    out = tmp / "verdicts.json"
    try:
        if not out.is_file():
            raise RuntimeError(f"the interpreter child failed ({done.returncode}): {done.stderr[-3000:]}")
        return json.loads(out.read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":      # the child of check_many
    assert os.environ.get("TRITON_INTERPRET") == "1"
    jobs_path = Path(sys.argv[1])
    verdicts = {}
    for job in json.loads(jobs_path.read_text()):
        try:
            verdicts[job["label"]] = check(job["name"], Path(job["code"]).read_text())
        except Exception as exc:  # noqa: BLE001  (a verdict, not a crash of the whole batch)
            verdicts[job["label"]] = f"the check raised {type(exc).__name__}: {exc}"
    (jobs_path.parent / "verdicts.json").write_text(json.dumps(verdicts))
