import torch
import torch.nn as nn
import triton
import triton.language as tl


# One program per row, the whole row (4096 floats = 16 KiB) held in registers across the program's warps: x is read
# once, coalesced and vectorised (16-byte loads), and out written once, the minimum traffic. Two passes over the
# registers, not over memory: the mean, then the variance of the centred values (numerically as good as Welford,
# no cancellation), both tree reductions; weight and bias are 32 KiB shared by all rows, served by L2.
@triton.jit
def layernorm_row(x_ptr, w_ptr, b_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * cols + offs, xc * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dtype == torch.float32 and x.shape[-1] == self.ln.weight.shape[0], "x: (..., D) float32"
        x = x.contiguous()
        out = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        block = triton.next_power_of_2(cols)
        layernorm_row[(rows,)](x, self.ln.weight, self.ln.bias, out, cols, self.ln.eps, BLOCK=block,
                               num_warps=min(max(block // 512, 1), 16))
        return out
