"""Small problems for the cuda target's CPU functional-check mode (device=cpu: PyTorch on the CPU, Triton's
interpreter), written into a directory per test module:
  softmax-small      the built-in softmax at (64, 512)
  softmax-shrunk     the built-in softmax as it ships (4096 x 8192) with its `small` sizes, which the CPU check uses
  linear-relu-small  a Linear+ReLU whose weights ModelNew must build the way Model does
  linear-relu-heavy  the same at (256, 512) -> 512: forward's work far above making its inputs
  relu-rand          ReLU of torch.rand inputs (non-negative: the signed hidden set is what tells ReLU from identity)
  mse-loss           a mean squared error: one scalar (0-d) output
  argmax-rows        an int64 output (argmax over rows)"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINEAR = '''import torch
import torch.nn as nn

B, IN, OUT = {b}, {i}, {o}


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(B, IN)]


def get_init_inputs():
    return [IN, OUT]
'''
ELEMENTWISE = '''import torch
import torch.nn as nn

N, D = 128, 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''
PROBLEMS = {
    "relu-rand": ("x", "torch.relu(x)", "torch.rand(N, D)"),
    "mse-loss": ("a, b", "torch.mean((a - b) ** 2)", "torch.randn(N, D), torch.randn(N, D)"),
    "argmax-rows": ("x", "torch.argmax(x, dim=1)", "torch.randn(N, D)"),
}


def _problem(root: Path, name: str, reference: str, toml: str, **kernels: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "reference.py").write_text(reference)
    (d / "problem.toml").write_text(f'name = "{name}"\n' + toml)
    for role, text in kernels.items():
        (d / f"{role}.py").write_text(text)


def write_problems(root: Path) -> Path:
    soft = ROOT / "hw_runners/cuda/problems/softmax"
    reference = (soft / "reference.py").read_text()
    _problem(root, "softmax-small", reference.replace("B, D = 4096, 8192", "B, D = 64, 512"),
             'family = "softmax"\ndescription = "softmax of (64, 512)"\nflops = 163840\nbytes = 262144\n'
             'dtype = "float32"\ntolerance = {atol = 1e-5, rtol = 1e-3}\n', tuned=(soft / "tuned.py").read_text())
    _problem(root, "softmax-shrunk", reference, (soft / "problem.toml").read_text().split("\n", 1)[1])
    for name, sizes in (("linear-relu-small", (16, 64, 32)), ("linear-relu-heavy", (256, 512, 512))):
        b, i, o = sizes
        _problem(root, name, LINEAR.format(b=b, i=i, o=o),
                 f'family = "gemm"\ndescription = "relu(x W^T + b)"\nflops = {2 * b * i * o}\n'
                 f'bytes = {4 * (b * i + i * o + o + b * o)}\ndtype = "float32"\n')
    for name, (args, body, inputs) in PROBLEMS.items():
        _problem(root, name, ELEMENTWISE.format(args=args, body=body, inputs=inputs),
                 f'description = "{body}"\nflops = 32768\nbytes = 262144\ndtype = "float32"\n')
    root.chmod(0o755)
    return root
