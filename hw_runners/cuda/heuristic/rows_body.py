"""The Triton source of a row-kernel schedule (rows.Schedule): softmax, LayerNorm or RMSNorm over the last
dimension, every statistic in fp32 whatever the input dtype, the result rounded once to the output's dtype.

Each program owns ROWS rows ([ROWS, BLOCK] tiles); its row indices are clamped to the last row for loads (every
load stays in bounds and finite) and masked for stores, so ragged row counts need no other care."""
from __future__ import annotations

from autocomp_zmq.hw_runners.cuda.heuristic.source import comment, indent as _ind, wrap_all

LOG2E = "1.4426950408889634"
PARAMS = {"softmax": "x_ptr, out_ptr, n_rows, cols", "layernorm": "x_ptr, w_ptr, b_ptr, out_ptr, n_rows, cols, eps",
          "rmsnorm": "x_ptr, w_ptr, out_ptr, n_rows, cols, eps"}
WHAT = {"softmax": "Softmax over the last dimension", "layernorm": "LayerNorm over the last dimension (affine)",
        "rmsnorm": "RMSNorm over the last dimension (x * rsqrt(mean(x^2) + eps) * weight)"}
WHY = {"three-pass": "three passes over each row (statistics, then more statistics, then the output): the row is read"
                     " three times, coalesced, BLOCK columns at a time",
       "online": "an online pass (running max and rescaled running sum) then a normalising pass: each row is read"
                 " twice, coalesced, BLOCK columns at a time",
       "two-pass": "a statistics pass then a normalising pass: each row is read twice, coalesced, BLOCK columns at a"
                   " time",
       "row": "the whole row held in registers (BLOCK = the row length rounded up to a power of two): read once from"
              " HBM, written once"}


def _load(other: str, looped: bool) -> str:
    offs = "start + tl.arange(0, BLOCK)" if looped else "tl.arange(0, BLOCK)"
    return (f"offs = {offs}\nmask = offs[None, :] < cols\n"
            f"x = tl.load(x_ptr + base + offs[None, :], mask=mask, other={other}).to(tl.float32)\n")


STORE = "tl.store(out_ptr + base + offs[None, :], y.to(out_ptr.dtype.element_ty), mask=mask & row_ok)\n"
LOOP = "for start in range(0, cols, BLOCK):\n"


def _exp(arg: str, fast: bool) -> str:
    return f"tl.exp2(({arg}) * {LOG2E})" if fast else f"tl.exp({arg})"


def _softmax(s) -> str:
    fast, looped = s.fast_math, s.method != "row"
    ld = _load('float("-inf")', looped)
    norm = "y = e * inv[:, None]\n" if fast else "y = e / l[:, None]\n"
    inv = "inv = 1.0 / l  # one division per row, a multiply per element\n" if fast else ""
    if s.method == "row":
        return (ld + "m = tl.max(x, axis=1)\n" + f"e = {_exp('x - m[:, None]', fast)}\nl = tl.sum(e, axis=1)\n"
                + inv + norm + STORE)
    if s.method == "online":
        stats = ('m = tl.full([ROWS], float("-inf"), tl.float32)\nl = tl.zeros([ROWS], tl.float32)\n' + LOOP
                 + _ind(ld + "m_new = tl.maximum(m, tl.max(x, axis=1))\n"
                        "# the running sum, rescaled to the new max (exp(-inf) = 0 on the first step)\n"
                        f"l = l * {_exp('m - m_new', fast)} + tl.sum({_exp('x - m_new[:, None]', fast)}, axis=1)\n"
                        "m = m_new\n", 4))
    else:
        stats = ('m = tl.full([ROWS], float("-inf"), tl.float32)\n' + LOOP
                 + _ind(ld + "m = tl.maximum(m, tl.max(x, axis=1))\n", 4)
                 + "l = tl.zeros([ROWS], tl.float32)\n" + LOOP
                 + _ind(ld + f"l += tl.sum({_exp('x - m[:, None]', fast)}, axis=1)\n", 4))
    return stats + inv + LOOP + _ind(ld + f"e = {_exp('x - m[:, None]', fast)}\n" + norm + STORE, 4)


def _rstd(var: str, fast: bool) -> str:
    return f"rstd = tl.rsqrt({var} + eps)\n" if fast else f"rstd = 1.0 / tl.sqrt({var} + eps)\n"


def _layernorm(s) -> str:
    looped = s.method != "row"
    ld = _load("0.0", looped)
    affine = ("wt = tl.load(w_ptr + offs, mask=offs < cols, other=0.0).to(tl.float32)\n"
              "bs = tl.load(b_ptr + offs, mask=offs < cols, other=0.0).to(tl.float32)\n"
              "y = (x - mean[:, None]) * rstd[:, None] * wt[None, :] + bs[None, :]\n" + STORE)
    if s.method == "row":
        return (ld + "mean = tl.sum(x, axis=1) / cols\nxc = tl.where(mask, x - mean[:, None], 0.0)\n"
                "var = tl.sum(xc * xc, axis=1) / cols\n" + _rstd("var", s.fast_math) + affine)
    if s.method == "two-pass":   # per-step mean and M2 merged into the running ones (Chan et al.): no cancellation
        stats = ("mean = tl.zeros([ROWS], tl.float32)\nm2 = tl.zeros([ROWS], tl.float32)\n" + LOOP
                 + _ind(ld + "cnt = tl.minimum(cols - start, BLOCK).to(tl.float32)  # columns in this step\n"
                        "step_mean = tl.sum(x, axis=1) / cnt\n"
                        "xc = tl.where(mask, x - step_mean[:, None], 0.0)\n"
                        "delta = step_mean - mean\nfrac = cnt / (start + cnt)\nmean += delta * frac\n"
                        "m2 += tl.sum(xc * xc, axis=1) + delta * delta * (start * frac)\n", 4)
                 + "var = m2 / cols\n")
    else:
        stats = ("acc = tl.zeros([ROWS, BLOCK], tl.float32)  # per-lane partial sums, one tree reduction after\n"
                 + LOOP + _ind(ld + "acc += x\n", 4) + "mean = tl.sum(acc, axis=1) / cols\n"
                 + "acc = tl.zeros([ROWS, BLOCK], tl.float32)\n" + LOOP
                 + _ind(ld + "xc = tl.where(mask, x - mean[:, None], 0.0)\nacc += xc * xc\n", 4)
                 + "var = tl.sum(acc, axis=1) / cols\n")
    return stats + _rstd("var", s.fast_math) + LOOP + _ind(ld + affine, 4)


def _rmsnorm(s) -> str:
    looped = s.method != "row"
    ld = _load("0.0", looped)
    scale = ("wt = tl.load(w_ptr + offs, mask=offs < cols, other=0.0).to(tl.float32)\n"
             "y = x * rstd[:, None] * wt[None, :]\n" + STORE)
    if s.method == "row":
        return ld + _rstd("tl.sum(x * x, axis=1) / cols", s.fast_math) + scale
    return ("acc = tl.zeros([ROWS, BLOCK], tl.float32)  # per-lane partial sums of squares\n" + LOOP
            + _ind(ld + "acc += x * x\n", 4) + _rstd("tl.sum(acc, axis=1) / cols", s.fast_math)
            + LOOP + _ind(ld + scale, 4))


def _kernel(s, w) -> str:
    body = {"softmax": _softmax, "layernorm": _layernorm, "rmsnorm": _rmsnorm}[w.kind](s)
    block = ("row_ids = blk * ROWS + tl.arange(0, ROWS)\nrow_ok = row_ids[:, None] < n_rows\n"
             "base = tl.minimum(row_ids, n_rows - 1).to(tl.int64)[:, None] * cols  # clamped: loads in bounds\n"
             + body)
    if s.persistent:
        inner = ("for blk in tl.range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):\n"
                 + _ind(block, 4))
    else:
        inner = "blk = tl.program_id(0)\n" + block
    return (f"@triton.jit\ndef {w.kind}_kernel({PARAMS[w.kind]}, ROWS: tl.constexpr, BLOCK: tl.constexpr):\n"
            + _ind(inner, 4))


def _forward(s, w) -> str:
    x = w.args[0]
    lines = [f"x2 = {x}.contiguous().reshape(-1, {x}.shape[-1])", "out = torch.empty_like(x2)",
             "n_rows, cols = x2.shape"]
    args = ["x2"]
    if w.kind == "layernorm":
        ln = f"self.{w.module}"
        lines.append(f"assert {ln}.weight.numel() == cols and {ln}.bias is not None, 'LayerNorm over the last dim'")
        args += [f"{ln}.weight", f"{ln}.bias"]
    elif w.kind == "rmsnorm":
        lines.append(f"assert {w.weight}.numel() == cols, 'RMSNorm over the last dim'")
        args.append(f"{w.weight}")
    args += ["out", "n_rows", "cols"]
    if w.kind == "layernorm":
        args.append(f"{ln}.eps")
    elif w.kind == "rmsnorm":
        args.append(f"float({w.eps})")
    block = "triton.next_power_of_2(cols)" if s.method == "row" else "BLOCK"
    blocks = "triton.cdiv(n_rows, ROWS)"
    grid = f"(min({blocks}, PROGRAMS_PER_SM * _num_sms(x2.device)),)" if s.persistent else f"({blocks},)"
    lines += [f"grid = {grid}",
              f"{w.kind}_kernel[grid](" + ", ".join(args) + f", ROWS=ROWS, BLOCK={block}, num_warps=NUM_WARPS, "
              "num_stages=NUM_STAGES)", f"return out.reshape({x}.shape)"]
    return f"    def forward(self, {x}):\n" + _ind("\n".join(lines), 8) + "\n"


def render(s, w, description: str) -> str:
    imports = ("import functools\n\n" if s.persistent else "") + \
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
    consts = f"ROWS = {s.rows}\n" + ("" if s.method == "row" else f"BLOCK = {s.block}\n") + \
        f"NUM_WARPS, NUM_STAGES = {s.num_warps}, {s.num_stages}\n"
    helper = ""
    if s.persistent:
        consts += f"PROGRAMS_PER_SM = {max(1, min(8, 32 // s.num_warps))}\n"
        helper = ("\n\n@functools.lru_cache(maxsize=None)\ndef _num_sms(device):\n"
                  "    # the CPU interpreter gets two programs, so that each still loops over several row blocks\n"
                  "    return torch.cuda.get_device_properties(device).multi_processor_count "
                  "if device.type == \"cuda\" else 2\n")
    why = comment(f"{WHAT[w.kind]}, {_rows_word(s.rows)} per program, with {WHY[s.method]}. Statistics in fp32; "
                  "the output rounded once to its dtype." + (" A few programs per SM loop over the row blocks."
                                                            if s.persistent else ""))
    return wrap_all(comment(f"Schedule: {description}.") + imports + "\n" + consts + "\n\n" + why + _kernel(s, w)
                    + helper + "\n\nclass ModelNew(nn.Module):\n" + w.init.rstrip() + "\n\n" + _forward(s, w))


def _rows_word(n: int) -> str:
    return "one row" if n == 1 else f"{n} rows"
