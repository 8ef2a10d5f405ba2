import torch
import torch.nn as nn

BATCH, M, N, K = 32, 1024, 1024, 1024


class Model(nn.Module):
    """Batched matrix product C[b] = A[b] @ B[b] in float16 (fp32 accumulation, float16 result)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, M, K, dtype=torch.float16), torch.randn(BATCH, K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
