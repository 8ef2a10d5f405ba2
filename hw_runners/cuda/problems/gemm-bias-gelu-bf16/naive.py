import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One thread per output y[m][n]: the thread walks the K dimension on its own, multiplying row m of x by row n of
# the weight (y = x @ W^T, W stored (N, K)) in float, adds the bias, applies the exact GELU
# 0.5 * v * (1 + erf(v / sqrt(2))) in float, and rounds to bfloat16 once. No tiling and no tensor cores;
# threadIdx.x runs along n, so a warp's weight loads are K elements apart (uncoalesced).
CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>

__global__ void linear_gelu_naive(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                                  __nv_bfloat16* y, int M, int N, int K) {
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < M && n < N) {
        float sum = 0.0f;
        for (int k = 0; k < K; ++k)
            sum += __bfloat162float(x[(size_t)m * K + k]) * __bfloat162float(w[(size_t)n * K + k]);
        sum += __bfloat162float(bias[n]);
        float g = 0.5f * sum * (1.0f + erff(sum * 0.70710678118654752f));
        y[(size_t)m * N + n] = __float2bfloat16(g);
    }
}

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "x, weight, bias: CUDA tensors");
    TORCH_CHECK(x.dtype() == torch::kBFloat16 && weight.dtype() == torch::kBFloat16 &&
                bias.dtype() == torch::kBFloat16, "x, weight, bias: bfloat16");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1 && x.size(1) == weight.size(1) &&
                bias.size(0) == weight.size(0), "x (M, K), weight (N, K), bias (N)");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "x, weight, bias: contiguous");
    int M = x.size(0), K = x.size(1), N = weight.size(0);
    auto y = torch::empty({M, N}, x.options());
    const __nv_bfloat16* xp = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>());
    const __nv_bfloat16* wp = reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr<at::BFloat16>());
    const __nv_bfloat16* bp = reinterpret_cast<const __nv_bfloat16*>(bias.data_ptr<at::BFloat16>());
    __nv_bfloat16* yp = reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>());
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    linear_gelu_naive<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(xp, wp, bp, yp, M, N, K);
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "linear_gelu_naive launch failed");
    return y;
}
"""
CPP = "torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

ext = load_inline(name="gemm_bias_gelu_bf16_naive", cpp_sources=CPP, cuda_sources=CUDA, functions=["linear_gelu"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_gelu(x, self.gemm.weight, self.gemm.bias)
