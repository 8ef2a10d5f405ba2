# Technique: a fused row kernel in Triton (LayerNorm over the last dim): one read and one write of every element, statistics in fp32 registers.
# Replaces a reference `Model(normalized_shape, eps)` whose forward is `self.ln(x)` with `self.ln = nn.LayerNorm(normalized_shape, eps=eps)`,
# x float32 of shape (..., D). Why it is fast:
#  - one program owns a whole row (BLOCK = next power of two >= D); the row stays in registers between the mean, the variance and
#    the normalisation, so HBM sees the compulsory traffic only (read x, read weight/bias once per row from L2, write y);
#  - contiguous rows: consecutive lanes read consecutive addresses (coalesced, vectorised by the compiler);
#  - the variance is computed from centred values (two passes over registers, not over memory), as torch does, so it stays accurate;
#  - num_warps grows with the row so each thread holds a bounded number of elements (no register spills);
#  - the module keeps the reference's nn.LayerNorm, so the parameters have the same names, shapes and initial values.
# Verified: TRITON_INTERPRET=1 on the CPU against torch.nn.LayerNorm (D = 1, 33, 256, 1000; 3 leading shapes), max abs error < 1e-5.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, D, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)          # int64 row offsets: rows * D may exceed 2**31
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)           # padded lanes must not add to the variance
    var = tl.sum(xc * xc, axis=0) / D
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int, eps: float = 1e-5):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape, eps=eps)   # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        D = x.shape[-1]
        x2 = x.reshape(-1, D)                    # a view when x is contiguous (no copy)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        y = torch.empty_like(x2)
        rows = x2.shape[0]
        if rows == 0:
            return y.reshape(x.shape)
        block = triton.next_power_of_2(D)
        assert block <= 65536, "one row per program keeps the row in registers; tile the row for larger D"
        num_warps = min(max(block // 512, 1), 16)   # about 16 fp32 values per thread
        layernorm_rows[(rows,)](x2, self.ln.weight, self.ln.bias, y, D, x2.stride(0), y.stride(0), self.ln.eps,
                                BLOCK=block, num_warps=num_warps)
        return y.reshape(x.shape)
