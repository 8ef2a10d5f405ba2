import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One thread per row, two passes over its row: the sum of squares (in float32), then the scaled output rounded to
# bfloat16. Each thread walks its row one 2-byte element at a time, so neighbouring threads touch addresses a whole
# row apart (no coalescing), and only B threads run.
CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>

__global__ void rmsnorm_rows(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out, int rows, int cols,
                             float eps) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const __nv_bfloat16* in = x + (size_t)r * cols;
    __nv_bfloat16* o = out + (size_t)r * cols;
    float ss = 0.f;
    for (int j = 0; j < cols; ++j) {
        float v = __bfloat162float(in[j]);
        ss += v * v;
    }
    float scale = rsqrtf(ss / cols + eps);
    for (int j = 0; j < cols; ++j)
        o[j] = __float2bfloat16(__bfloat162float(in[j]) * scale * __bfloat162float(w[j]));
}

torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "x and w must be CUDA tensors");
    TORCH_CHECK(x.dtype() == torch::kBFloat16 && w.dtype() == torch::kBFloat16, "x and w must be bfloat16");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous(), "x and w must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && w.dim() == 1, "x: (..., D), w: (D,)");
    int cols = x.size(-1);
    TORCH_CHECK(cols > 0 && w.size(0) == cols, "w must have x's last dimension");
    int rows = x.numel() / cols;
    auto out = torch::empty_like(x);
    const __nv_bfloat16* xp = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>());
    const __nv_bfloat16* wp = reinterpret_cast<const __nv_bfloat16*>(w.data_ptr<at::BFloat16>());
    __nv_bfloat16* op = reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>());
    // on PyTorch's current stream, so that a CUDA graph captures it
    rmsnorm_rows<<<(rows + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xp, wp, op, rows, cols, (float)eps);
    return out;
}
"""
CPP = "torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="rmsnorm_bf16_naive", cpp_sources=CPP, cuda_sources=CUDA, functions=["rmsnorm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.25 * torch.randn(dim)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rmsnorm(x, self.weight, self.eps)
