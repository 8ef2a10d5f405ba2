import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One thread per row, three passes over its row: the mean, the variance (sum of squared deviations), then the
# normalised and affine-transformed output. Each thread walks its row one element at a time, so neighbouring threads
# touch addresses a whole row apart (no coalescing), and only B threads run.
CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void layernorm_rows(const float* x, const float* w, const float* b, float* out, int rows, int cols,
                               float eps) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* o = out + (size_t)r * cols;
    float mean = 0.f;
    for (int j = 0; j < cols; ++j) mean += in[j];
    mean /= cols;
    float var = 0.f;
    for (int j = 0; j < cols; ++j) {
        float d = in[j] - mean;
        var += d * d;
    }
    var /= cols;
    float rstd = 1.f / sqrtf(var + eps);
    for (int j = 0; j < cols; ++j) o[j] = (in[j] - mean) * rstd * w[j] + b[j];
}

torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "x, w and b must be CUDA tensors");
    TORCH_CHECK(x.dtype() == torch::kFloat32 && w.dtype() == torch::kFloat32 && b.dtype() == torch::kFloat32,
                "x, w and b must be float32");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "x, w and b must be contiguous");
    TORCH_CHECK(x.dim() >= 1 && w.dim() == 1 && b.dim() == 1, "x: (..., D), w: (D,), b: (D,)");
    int cols = x.size(-1);
    TORCH_CHECK(cols > 0 && w.size(0) == cols && b.size(0) == cols, "w and b must have x's last dimension");
    int rows = x.numel() / cols;
    auto out = torch::empty_like(x);
    // on PyTorch's current stream, so that a CUDA graph captures it
    layernorm_rows<<<(rows + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), rows, cols, (float)eps);
    return out;
}
"""
CPP = "torch::Tensor layernorm(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

ext = load_inline(name="layernorm_naive", cpp_sources=CPP, cuda_sources=CUDA, functions=["layernorm"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.layernorm(x, self.ln.weight, self.ln.bias, self.ln.eps)
