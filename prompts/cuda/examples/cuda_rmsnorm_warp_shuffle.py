# Technique: inline CUDA (load_inline) row reduction: 128-bit float4 coalesced loads, warp-shuffle + shared-memory block reduction, current stream.
# Replaces a reference `Model(num_features, eps)` with `self.weight = nn.Parameter(torch.ones(num_features))` whose forward is
# `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight`, x float32 of shape (..., D). Why it is fast:
#  - one 256-thread block per row; thread t reads float4 t, t + 256, ...: a warp reads 32 consecutive 16-byte vectors (512 bytes,
#    sixteen fully used 32-byte sectors) per instruction, a quarter of the load instructions of scalar code;
#  - the sum of squares is reduced inside each warp with __shfl_xor_sync (registers only, no shared memory, no barrier), then the 8
#    warp sums go through 8 floats of shared memory and one more shuffle round: two __syncthreads per row in total;
#  - the second pass re-reads the row (D * 4 bytes, e.g. 32 KB for D = 8192) while it is still in L1/L2, so HBM traffic stays close
#    to one read and one write; torch's version launches several kernels and writes/reads intermediates;
#  - __launch_bounds__(256) tells the compiler the block size so it can budget registers; the kernel runs on PyTorch's current stream.
# Assumes D % 4 == 0 and 16-byte aligned contiguous tensors (checked with TORCH_CHECK; the problem's shapes are fixed).
# Verified: the CUDA source compiles with nvcc 13 for sm_90 against torch 2.13's headers (hw_runners.cuda.cudasrc.compile_check;
# the CPU build of torch used there lacks the generated c10/cuda/impl/cuda_cmake_macros.h, so a copy of it was supplied), and a
# numpy emulation of its indexing and reduction tree matches the torch reference; it has not been run on a GPU.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);   // butterfly: every lane ends with the warp's sum
    return v;
}

__global__ void __launch_bounds__(THREADS)
rmsnorm_rows(const float4* __restrict__ x, const float4* __restrict__ w, float4* __restrict__ out,
             int d4, float inv_d, float eps) {
    const float4* xr = x + (size_t)blockIdx.x * d4;
    float4* yr = out + (size_t)blockIdx.x * d4;

    float ss = 0.f;
    for (int i = threadIdx.x; i < d4; i += THREADS) {   // coalesced: lane i reads vector i of the warp's 512 bytes
        float4 v = xr[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }

    __shared__ float warp_sums[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    ss = warp_sum(ss);
    if (lane == 0) warp_sums[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float t = lane < WARPS ? warp_sums[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) warp_sums[0] = t;
    }
    __syncthreads();
    const float scale = rsqrtf(warp_sums[0] * inv_d + eps);

    for (int i = threadIdx.x; i < d4; i += THREADS) {   // second pass: the row is still in L1/L2
        float4 v = xr[i];
        const float4 g = w[i];
        v.x *= scale * g.x; v.y *= scale * g.y; v.z *= scale * g.z; v.w *= scale * g.w;
        yr[i] = v;
    }
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "x and weight must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "contiguous tensors only");
    const int64_t d = x.size(-1);
    TORCH_CHECK(weight.numel() == d && d % 4 == 0, "last dim must match weight and be a multiple of 4");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(weight.data_ptr()) % 16 == 0, "float4 access needs 16-byte alignment");
    auto out = torch::empty_like(x);                    // fresh allocation: 16-byte aligned
    const int64_t rows = x.numel() / d;
    if (rows == 0) return out;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows for a 1-D grid");
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    rmsnorm_rows<<<(unsigned)rows, THREADS, 0, stream>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<const float4*>(weight.data_ptr<float>()),
        reinterpret_cast<float4*>(out.data_ptr<float>()), (int)(d / 4), 1.0f / (float)d, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

CPP_SRC = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps);"

# compiled once, when the module is imported (nvcc takes about a minute; torch caches the build under its extensions directory)
ext = load_inline(name="rmsnorm_float4_shfl", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["rmsnorm_forward"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))   # same parameter as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.rmsnorm_forward(x.contiguous(), self.weight, self.eps)
