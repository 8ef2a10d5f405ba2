import torch
import torch.nn as nn

M, N, K = 4096, 4096, 4096


class Model(nn.Module):
    """C = A @ B for square bfloat16 matrices (fp32 accumulation, bfloat16 result)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
