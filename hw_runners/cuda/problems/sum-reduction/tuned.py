import torch
import torch.nn as nn
import triton
import triton.language as tl


# ROWS rows per program, each row streamed in BLOCK-wide chunks: every load is a coalesced 16-byte-per-thread
# vector, and per-lane partial sums stay in registers (a [ROWS, BLOCK] accumulator), reduced across the lanes once at
# the end. x is read exactly once; several independent rows and chunks keep enough loads in flight to saturate HBM.
@triton.jit
def sum_rows(x_ptr, out_ptr, rows, cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    r_ok = r < rows
    base = x_ptr + r.to(tl.int64)[:, None] * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((ROWS, BLOCK), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        c = c0 + offs
        acc += tl.load(base + c[None, :], mask=r_ok[:, None] & (c < cols)[None, :], other=0.0)
    tl.store(out_ptr + r, tl.sum(acc, axis=1), mask=r_ok)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim not in (1, -1) or x.dim() != 2:
            raise ValueError("this kernel sums a 2-D tensor over dim 1 (the problem's shape)")
        assert x.dtype == torch.float32, "x: float32"
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows, 1), device=x.device, dtype=x.dtype)
        ROWS = 2
        BLOCK = min(2048, triton.next_power_of_2(cols))
        sum_rows[(triton.cdiv(rows, ROWS),)](x, out, rows, cols, ROWS=ROWS, BLOCK=BLOCK, num_warps=8)
        return out
