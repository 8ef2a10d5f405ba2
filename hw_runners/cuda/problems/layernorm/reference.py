import torch
import torch.nn as nn

B, D = 8192, 4096                      # rows, normalized (last) dimension


class Model(nn.Module):
    """Layer normalization over the last dimension with a learned elementwise affine (weight, bias)."""

    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        # a non-trivial affine: with the default weight = 1, bias = 0 a kernel that ignored them would pass
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return [D]
