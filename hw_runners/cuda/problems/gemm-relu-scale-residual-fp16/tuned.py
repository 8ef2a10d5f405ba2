import torch
import torch.nn as nn
import triton
import triton.language as tl


# Tensor-core GEMM x @ W^T with the whole tail fused into the epilogue: the fp32 accumulator tile gets the bias,
# ReLU, the scaling and the residual tile (loaded once, straight into registers), and is rounded to float16 once,
# so the GEMM's intermediate never reaches DRAM (unfused: three more elementwise kernels, each reading and writing
# an (M, N) tensor). W is stored (N, K) as nn.Linear keeps it and is read as the K-major B operand through its
# strides. Each program computes a BLOCK_M x BLOCK_N tile with tl.dot on float16 operands (wgmma on Hopper),
# streaming BLOCK_K-wide slabs through shared memory in a num_stages-deep pipeline of asynchronous copies, in
# grouped (swizzled) program order so that concurrent programs share x rows and W rows in L2. Edges are masked
# (EVEN: the shape divides into whole tiles and the main loop's loads go unmasked).
@triton.jit
def linear_relu_scale_residual_kernel(x_ptr, w_ptr, bias_ptr, res_ptr, out_ptr, M, N, K, scale,
                                      stride_xm, stride_xk, stride_wn, stride_wk, stride_rm, stride_rn,
                                      stride_om, stride_on,
                                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                      GROUP_M: tl.constexpr, EVEN: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn    # (BLOCK_K, BLOCK_N) of W^T
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN:
            a = tl.load(x_ptrs)
            b = tl.load(w_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(x_ptrs, mask=mask_m & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & mask_n, other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :] * stride_rn, mask=mask_m & mask_n,
                  other=0.0).to(tl.float32)
    y = tl.maximum(acc + bias[None, :], 0.0) * scale + res
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, y.to(tl.float16), mask=mask_m & mask_n)


# Hand-picked for an H100 at 4096 x 4096 x 8192: 128x128 tiles over 8 warps (two warpgroups of 64x128 wgmma, 64
# fp32 accumulators per thread, leaving registers for the residual tile in the epilogue), 64-wide K slabs, 4 stages
# (128 KiB of shared memory) to cover the long K loop, 1024 tiles.
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_WARPS, NUM_STAGES = 128, 128, 64, 8, 8, 4


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features).to(torch.float16)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        w, b = self.gemm.weight, self.gemm.bias
        assert x.dim() == 2 and x.shape[1] == w.shape[1] and residual.shape == (x.shape[0], w.shape[0])
        assert x.dtype == w.dtype == b.dtype == residual.dtype == torch.float16
        M, K = x.shape
        N = w.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=torch.float16)
        even = M % BLOCK_M == 0 and N % BLOCK_N == 0 and K % BLOCK_K == 0
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        linear_relu_scale_residual_kernel[grid](
            x, w, b, residual, out, M, N, K, float(self.scaling_factor), x.stride(0), x.stride(1), w.stride(0),
            w.stride(1), residual.stride(0), residual.stride(1), out.stride(0), out.stride(1),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, EVEN=even, num_warps=NUM_WARPS,
            num_stages=NUM_STAGES)
        return out
