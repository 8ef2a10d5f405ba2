import torch
import torch.nn as nn

B, D = 8192, 8192                      # rows, reduced (last) dimension
REDUCE_DIM = 1


class Model(nn.Module):
    """Sum over one dimension, keeping it (size 1), as KernelBench's 47_Sum_reduction_over_a_dimension does."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return [REDUCE_DIM]
