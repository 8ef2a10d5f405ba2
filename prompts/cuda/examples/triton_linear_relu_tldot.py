# Technique: a tiled GEMM on the tensor cores with tl.dot, its bias + ReLU epilogue fused in, tile order grouped for L2 reuse, autotuned tiles.
# Replaces a reference `Model(in_features, out_features)` whose forward is `torch.relu(self.linear(x))` with
# `self.linear = nn.Linear(in_features, out_features)`, x of shape (M, K). Why it is fast:
#  - each program computes a BLOCK_M x BLOCK_N tile of y with an fp32 accumulator in registers, walking K in BLOCK_K steps: every
#    element loaded from global memory feeds BLOCK_N (or BLOCK_M) multiply-adds instead of one;
#  - tl.dot runs on the tensor cores (wgmma on H100, mma on A100/L40S); num_stages > 1 lets the compiler prefetch the next K tiles
#    into shared memory while the current ones multiply (cp.async / TMA pipelining);
#  - W is used as W^T through its strides (B[k, n] = W[n, k]): no transpose or .contiguous() copy of the weight;
#  - bias and ReLU are applied to the accumulator before the single store: y is written once, and no extra kernels run;
#  - consecutive program ids walk a band of GROUP_M row tiles column by column, so the programs in flight at once share the same
#    row panels of x and column panels of W, which are then re-read from L2 instead of HBM;
#  - precision: fp16/bf16 inputs use the tensor cores directly; fp32 inputs use input_precision="tf32x3" (three TF32 products,
#    close to fp32 accuracy), or "tf32" (faster, 10-bit mantissa) when the problem's tolerance allows it;
#  - shared memory per config is about num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K * bytes: 128x256x64 with 3 stages needs 144 KB in
#    fp16 but 288 KB in fp32 (over the 227 KB a block may use on H100); such configs fail to compile and the autotuner skips them;
#  - the module keeps the reference's nn.Linear, so parameters have the same names, shapes and seeded initial values.
# Verified: TRITON_INTERPRET=1 on the CPU, each config alone, against torch (fp32 with ragged M, N, K: max abs error < 1e-6; fp16:
# < 1e-3). The interpreter multiplies in full precision, so this checks indexing, masks and the epilogue, not TF32 rounding.
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _configs():
    shapes = [  # BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages
        (128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 32, 4, 4),
        (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 32, 4, 5),
    ]
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
            for m, n, k, w, s in shapes]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])   # tuned once per shape during warm-up
@triton.jit
def linear_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                       stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                       PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # grouped ("swizzled") tile order: GROUP_M row tiles advance together along N
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % pids_per_group) % group_m
    pid_n = (pid % pids_per_group) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn   # W^T tile [BLOCK_K, BLOCK_N]

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = tl.maximum(acc + bias[None, :], 0.0)                                    # fused epilogue
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)   # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.linear.weight, self.linear.bias             # w: (N, K), used as W^T through strides
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        precision = "tf32x3" if x.dtype == torch.float32 else "tf32"   # "tf32" is ignored for fp16/bf16 inputs
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
        linear_relu_kernel[grid](x, w, b, y, M, N, K,
                                 x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1),
                                 PRECISION=precision)
        return y
