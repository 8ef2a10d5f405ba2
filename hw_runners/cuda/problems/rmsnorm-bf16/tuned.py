import torch
import torch.nn as nn
import triton
import triton.language as tl


# One program per row, the whole row (4096 bf16 = 8 KiB) in registers: x is read once with 16-byte vector loads
# (8 bf16 per load), converted to float32, the sum of squares reduced as a tree in registers, and the row scaled,
# multiplied by the weight (8 KiB, L2-resident), rounded once to bf16 and written once: the minimum DRAM traffic.
# Several rows per program would only amortise the weight load, which L1/L2 already serve.
@triton.jit
def rmsnorm_row(x_ptr, w_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    scale = tl.rsqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * cols + offs, (x * scale * w).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.25 * torch.randn(dim)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dtype == torch.bfloat16 and x.shape[-1] == self.weight.shape[0], "x: (..., D) bfloat16"
        x = x.contiguous()
        w = self.weight.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        block = triton.next_power_of_2(cols)
        rmsnorm_row[(rows,)](x, w, out, cols, self.eps, BLOCK=block, num_warps=min(max(block // 512, 1), 16))
        return out
