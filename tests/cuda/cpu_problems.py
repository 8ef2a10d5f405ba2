"""Small problems for the cuda target's CPU functional-check mode (device=cpu: PyTorch on the CPU, Triton's
interpreter), written into a directory per test module: the built-in softmax at (64, 512), and a Linear+ReLU whose
weights ModelNew must build the way Model does."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINEAR = '''import torch
import torch.nn as nn

B, IN, OUT = 16, 64, 32


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


def write_problems(root: Path) -> Path:
    soft = root / "softmax-small"
    soft.mkdir(parents=True)
    reference = (ROOT / "hw_runners/cuda/problems/softmax/reference.py").read_text()
    (soft / "reference.py").write_text(reference.replace("B, D = 4096, 8192", "B, D = 64, 512"))
    (soft / "tuned.py").write_text((ROOT / "hw_runners/cuda/problems/softmax/tuned.py").read_text())
    (soft / "problem.toml").write_text('name = "softmax-small"\nfamily = "softmax"\ndescription = "softmax of (64, 512)"\n'
                                       'flops = 163840\nbytes = 262144\ndtype = "float32"\n'
                                       'tolerance = {atol = 1e-5, rtol = 1e-3}\n')
    lin = root / "linear-relu-small"
    lin.mkdir()
    (lin / "reference.py").write_text(LINEAR)
    (lin / "problem.toml").write_text('name = "linear-relu-small"\nfamily = "gemm"\ndescription = "relu(x W^T + b)"\n'
                                      'flops = 65536\nbytes = 12416\ndtype = "float32"\n')
    root.chmod(0o755)
    return root
