"""The inline CUDA of a kernel file, read without running it, and compiled with nvcc where nvcc is installed: a check
that needs no GPU (a kernel whose CUDA does not compile fails here in seconds instead of on the GPU host).

A kernel passes its CUDA to torch.utils.cpp_extension.load_inline(cuda_sources=...); the sources are string
literals, or module-level names bound to them (concatenations and lists of literals included)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import tempfile
from pathlib import Path


CPU_TORCH_INCLUDE = Path(__file__).with_name("cpu_torch_include")


class SourceError(ValueError):
    """A load_inline call whose CUDA is not made of literals this reader can follow."""


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def _text(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> list[str]:
    if depth > 20:
        raise SourceError("cuda_sources refers to itself")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names:
        return _text(names[node.id], names, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, names, depth + 1), _text(node.right, names, depth + 1)
        return ["".join(left) + "".join(right)]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for item in node.elts for s in _text(item, names, depth + 1)]
    raise SourceError(f"line {getattr(node, 'lineno', '?')}: cuda_sources is not a string literal or a "
                      "module-level name bound to one")


def inline_cuda(code: str) -> list[str]:
    """The CUDA sources of every load_inline(...) call in `code` (empty: it has none)."""
    tree = ast.parse(code)
    names = _constants(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "load_inline":
            for kw in node.keywords:
                if kw.arg == "cuda_sources":
                    found += _text(kw.value, names)
    return found


def compile_check(code: str, include_dirs: list[str], arch: str = "sm_90", timeout_s: float = 300) -> list[str]:
    """nvcc -c of each inline CUDA source of `code` against `include_dirs` (torch's headers); the errors, one entry
    per source that failed (empty: all compiled). Raises FileNotFoundError without nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc is not installed")
    errors = []
    with tempfile.TemporaryDirectory(prefix="cudasrc-") as tmp:
        for i, source in enumerate(inline_cuda(code)):
            path = Path(tmp) / f"source{i}.cu"
            path.write_text(source)
            cmd = [nvcc, "-c", str(path), "-o", str(path.with_suffix(".o")), "-std=c++20", f"-arch={arch}",
                   "--expt-relaxed-constexpr", "-diag-suppress=3306"] + [a for d in include_dirs for a in ("-I", d)]
            cmd += ["-I", str(CPU_TORCH_INCLUDE)]       # last: only what a CPU-only PyTorch build lacks
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            if done.returncode:
                errors.append(done.stderr[-4000:])
    return errors
