import torch
import torch.nn as nn

B, D = 8192, 4096                      # rows (tokens), normalized (last) dimension
EPS = 1e-6


class Model(nn.Module):
    """RMSNorm over the last dimension with a learned weight, as in LLaMA: x * rsqrt(mean(x^2) + eps) * weight, on
    bfloat16 x and weight; the statistics and the products in float32, the result rounded once to bfloat16."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # a non-trivial weight (LLaMA's starts at ones, which a kernel ignoring it would pass)
        self.weight = nn.Parameter((1.0 + 0.25 * torch.randn(dim)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        rms_inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * rms_inv * self.weight.float()).to(x.dtype)


def get_inputs():
    return [torch.randn(B, D, dtype=torch.bfloat16)]


def get_init_inputs():
    return [D, EPS]
