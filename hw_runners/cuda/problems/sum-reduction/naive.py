import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One thread per row, summing its row one element at a time in a single float32 accumulator: neighbouring threads
# read addresses a whole row apart (no coalescing), and only B threads run.
CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void sum_rows(const float* x, float* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float s = 0.f;
    for (int j = 0; j < cols; ++j) s += in[j];
    out[r] = s;
}

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (rows, cols)");
    int rows = x.size(0), cols = x.size(1);
    auto out = torch::empty({rows, 1}, x.options());
    // on PyTorch's current stream, so that a CUDA graph captures it
    sum_rows<<<(rows + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""
CPP = "torch::Tensor sum_dim1(torch::Tensor x);"

ext = load_inline(name="sum_reduction_naive", cpp_sources=CPP, cuda_sources=CUDA, functions=["sum_dim1"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim not in (1, -1) or x.dim() != 2:
            raise ValueError("this kernel sums a 2-D tensor over dim 1 (the problem's shape)")
        return ext.sum_dim1(x)
