import torch
import torch.nn as nn
import triton
import triton.language as tl


# Tiled GEMM in IEEE float32: each program computes a BLOCK_M x BLOCK_N tile of C, streaming BLOCK_K-wide slabs
# of A and B through shared memory (num_stages-deep software pipeline of asynchronous copies) into an fp32
# accumulator held in registers, so each element of A and B loaded from DRAM/L2 is reused BLOCK_N / BLOCK_M times.
# Programs are numbered in groups of GROUP_M row-tiles (swizzled order) so that programs running at the same time
# share A rows and B columns in L2. input_precision="ieee" keeps the products on the fp32 FMA units: Triton's
# default for float32 tl.dot is TF32 (10-bit mantissa), whose error over K = 4096 (~0.1 absolute) fails this
# problem's tolerance. Edges in M, N and K are masked, so any shape is correct (EVEN: the shape divides into whole
# tiles and the main loop's loads go unmasked).
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  EVEN: tl.constexpr):
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
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=mask_m & mask_n)


# Hand-picked for an H100 and 4096^3: 128x128 tiles (64 accumulators per thread over 8 warps), 32-wide K slabs,
# 3 pipeline stages (96 KiB of shared memory), 1024 tiles over 132 SMs.
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_WARPS, NUM_STAGES = 128, 128, 32, 8, 8, 3


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        assert A.dim() == 2 and B.dim() == 2 and A.shape[1] == B.shape[0]
        assert A.dtype == torch.float32 and B.dtype == torch.float32
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        even = M % BLOCK_M == 0 and N % BLOCK_N == 0 and K % BLOCK_K == 0
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        matmul_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                            C.stride(0), C.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                            GROUP_M=GROUP_M, EVEN=even, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return C
