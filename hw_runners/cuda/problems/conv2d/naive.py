import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Direct convolution, one thread per output element out[n, k, p, q]: each thread loops over every input channel
# and kernel tap, reading x and the weight from global memory (C*R*S multiply-adds per thread, no reuse through
# shared memory or registers; neighbouring threads share k, so their weight reads are one broadcast).
CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void conv2d_direct(const float* x, const float* w, float* out, int N, int C, int H, int W, int K,
                              int R, int S, int P, int Q, int stride, int pad) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)N * K * P * Q;
    if (idx >= total) return;
    int q = idx % Q;
    int p = (idx / Q) % P;
    int k = (idx / ((long long)Q * P)) % K;
    int n = idx / ((long long)Q * P * K);
    float acc = 0.f;
    for (int c = 0; c < C; ++c) {
        for (int r = 0; r < R; ++r) {
            int h = p * stride - pad + r;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < S; ++s) {
                int ww = q * stride - pad + s;
                if (ww < 0 || ww >= W) continue;
                acc += x[(((long long)n * C + c) * H + h) * W + ww] * w[(((long long)k * C + c) * R + r) * S + s];
            }
        }
    }
    out[idx] = acc;
}

torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, int64_t stride, int64_t pad) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "x and w must be CUDA tensors");
    TORCH_CHECK(x.dtype() == torch::kFloat32 && w.dtype() == torch::kFloat32, "x and w must be float32");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous(), "x and w must be contiguous");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "x: (N, C, H, W), w: (K, C, R, S)");
    TORCH_CHECK(stride >= 1 && pad >= 0, "stride >= 1, padding >= 0");
    TORCH_CHECK(x.size(2) + 2 * pad >= w.size(2) && x.size(3) + 2 * pad >= w.size(3),
                "kernel larger than the padded input");
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    int K = w.size(0), R = w.size(2), S = w.size(3);
    int P = (H + 2 * pad - R) / stride + 1;
    int Q = (W + 2 * pad - S) / stride + 1;
    auto out = torch::empty({N, K, P, Q}, x.options());
    long long total = (long long)N * K * P * Q;
    int threads = 256;
    int blocks = (int)((total + threads - 1) / threads);
    // on PyTorch's current stream, so that a CUDA graph captures it
    conv2d_direct<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), N, C, H, W, K, R, S, P, Q, (int)stride,
        (int)pad);
    return out;
}
"""
CPP = "torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, int64_t stride, int64_t pad);"

ext = load_inline(name="conv2d_naive", cpp_sources=CPP, cuda_sources=CUDA, functions=["conv2d"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.conv2d(x, self.conv2d.weight, self.conv2d.stride[0], self.conv2d.padding[0])
