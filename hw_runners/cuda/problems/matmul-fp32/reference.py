import torch
import torch.nn as nn

M, N, K = 4096, 4096, 4096


class Model(nn.Module):
    """C = A @ B for square float32 matrices (KernelBench level 1, 1_Square_matrix_multiplication_)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
