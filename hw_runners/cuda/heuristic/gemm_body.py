"""The Triton source of a GEMM schedule (gemm.Schedule) for a workload (workload.Workload): the kernel, the
launch and ModelNew, with only the machinery the schedule uses (so that the kernel reads as written by hand
and an LLM can continue from it)."""
from __future__ import annotations

from autocomp_zmq.hw_runners.cuda.heuristic.source import comment, indent as _indent, wrap_all

DTYPES = {"float32": "tl.float32", "float16": "tl.float16", "bfloat16": "tl.bfloat16"}
TORCH_OPS = {"gelu": "torch.nn.functional.gelu(y)", "relu": "torch.relu(y)", "scale": "y * {arg}",
             "div": "y / {arg}", "residual": "y + {arg}"}


def _epilogue_args(w, fused: bool) -> tuple[list[str], list[str], list[str]]:
    """(kernel parameters, launch arguments, kernel lines) of the linear epilogue ops the kernel applies: the bias
    always (it is part of nn.Linear's product), the rest only when fused."""
    params, launch, lines = ["bias_ptr"], ["bias"], [
        "bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)",
        "v = acc + bias[None, :]"]
    if not fused:
        return params, launch, lines
    for i, (op, arg) in enumerate(w.epilogue):
        if op == "gelu":     # exact GELU, as torch's default: 0.5 v (1 + erf(v / sqrt 2))
            lines.append("v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))")
        elif op == "relu":
            lines.append("v = tl.maximum(v, 0.0)")
        elif op in ("scale", "div"):
            sym = "*" if op == "scale" else "/"
            if arg.startswith("self."):          # a module attribute: passed at launch, as the reference reads it
                params.append(f"alpha{i}")
                launch.append(f"float({arg})")
                lines.append(f"v = v {sym} alpha{i}")
            else:
                lines.append(f"v = v {sym} {arg}")
        elif op == "residual":
            params.append(f"res{i}_ptr")
            launch.append(f"{arg}2")
            lines.append(f"v = v + tl.load(res{i}_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask_m & mask_n, "
                         "other=0.0).to(tl.float32)")
    return params, launch, lines


def _kernel(s, w) -> str:
    batched, linear, tma = w.kind == "bmm", w.kind == "linear", s.tma
    upcast = w.dtype == "bfloat16"
    e_params, _, e_lines = _epilogue_args(w, s.fuse_epilogue) if linear else ([], [], [])
    a, b = ("a_desc", "b_desc") if tma else ("a_ptr", "b_ptr")
    params = [a, b, "c_ptr", *e_params, "M", "N", "K"] + (["BATCH"] if batched else [])
    if not tma:
        params += ["stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk", "stride_bn"]
    consts = ["BLOCK_M", "BLOCK_N", "BLOCK_K"] + (["GROUP_M"] if s.group_m > 1 else []) + \
        ([] if tma else ["EVEN"]) + (["UPCAST"] if upcast else [])
    head = "@triton.jit\ndef gemm_kernel(" + ", ".join(params + [f"{c}: tl.constexpr" for c in consts]) + "):\n"
    order = ("num_pid_in_group = GROUP_M * num_pid_n\ngroup_id = pid // num_pid_in_group\n"
             "first_pid_m = group_id * GROUP_M\ngroup_size_m = min(num_pid_m - first_pid_m, GROUP_M)\n"
             "pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)\n"
             "pid_n = (pid % num_pid_in_group) // group_size_m\n") if s.group_m > 1 else \
        "pid_m = pid // num_pid_n\npid_n = pid % num_pid_n\n"
    dot_args = f', input_precision="{s.precision}"' if w.dtype == "float32" else ""
    up = ("if UPCAST:  # on the CPU interpreter, whose tl.dot multiplies bf16 bit patterns (triton#11584)\n"
          "    a = a.to(tl.float32)\n    b = b.to(tl.float32)\n") if upcast else ""
    body = ("offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\noffs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n"
            "mask_m = offs_m[:, None] < M\nmask_n = offs_n[None, :] < N\n"
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n")
    if tma:     # descriptors zero-fill outside the tensor: no masks in the K loop
        ia = "[batch, pid_m * BLOCK_M, k * BLOCK_K]" if batched else "[pid_m * BLOCK_M, k * BLOCK_K]"
        if linear:      # W (N, K) is K-major: load (BLOCK_N, BLOCK_K) tiles and feed their transpose
            lb = "b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T"
        else:
            lb = ("b_desc.load([batch, k * BLOCK_K, pid_n * BLOCK_N]).reshape(BLOCK_K, BLOCK_N)" if batched
                  else "b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])")
        la = f"a_desc.load({ia})" + (".reshape(BLOCK_M, BLOCK_K)" if batched else "")
        body += (f"for k in range(0, tl.cdiv(K, BLOCK_K)):\n    a = {la}\n    b = {lb}\n" + _indent(up, 4)
                 + f"    acc = tl.dot(a, b, acc{dot_args})\n")
    else:
        off_a = "batch.to(tl.int64) * stride_ab + " if batched else ""
        off_b = "batch.to(tl.int64) * stride_bb + " if batched else ""
        body += ("offs_k = tl.arange(0, BLOCK_K)\n"
                 f"a_ptrs = a_ptr + {off_a}offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak\n"
                 f"b_ptrs = b_ptr + {off_b}offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn\n"
                 "for k in range(0, tl.cdiv(K, BLOCK_K)):\n"
                 "    if EVEN:  # whole tiles only: unmasked, vectorized loads\n"
                 "        a = tl.load(a_ptrs)\n        b = tl.load(b_ptrs)\n"
                 "    else:\n        k_left = K - k * BLOCK_K\n"
                 "        a = tl.load(a_ptrs, mask=mask_m & (offs_k[None, :] < k_left), other=0.0)\n"
                 "        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n, other=0.0)\n"
                 + _indent(up, 4) + f"    acc = tl.dot(a, b, acc{dot_args})\n"
                 "    a_ptrs += BLOCK_K * stride_ak\n    b_ptrs += BLOCK_K * stride_bk\n")
    out = "v = acc\n" if not e_lines else "\n".join(e_lines) + "\n"
    off_c = "batch.to(tl.int64) * M * N + " if batched else ""
    body += out + (f"c_ptrs = c_ptr + {off_c}offs_m[:, None] * N + offs_n[None, :]\n"
                   "tl.store(c_ptrs, v.to(c_ptr.dtype.element_ty), mask=mask_m & mask_n)\n")
    grid = "num_pid_m = tl.cdiv(M, BLOCK_M)\nnum_pid_n = tl.cdiv(N, BLOCK_N)\n"
    if s.persistent:    # one program per SM walks the tiles: no tail wave of launches, prologues overlap
        total = "num_pid_m * num_pid_n" + (" * BATCH" if batched else "")
        loop = (f"for tile in tl.range(tl.program_id(0), {total}, tl.num_programs(0)):\n"
                + ("    batch = tile // (num_pid_m * num_pid_n)\n"
                   "    pid = tile % (num_pid_m * num_pid_n)\n" if batched else "    pid = tile\n")
                + _indent(order + body, 4))
        return head + _indent(grid + loop, 4)
    first = "pid = tl.program_id(0)\n" + ("batch = tl.program_id(1)\n" if batched else "")
    return head + _indent(first + grid + order + body, 4)


def _why(s, w, what: str) -> str:
    text = (f"{what}. Each program computes a BLOCK_M x BLOCK_N tile of the output with tl.dot into an fp32 "
            "accumulator in registers, walking K in BLOCK_K slabs (num_stages of them in flight in shared memory).")
    if s.group_m > 1:
        text += (" Programs are numbered in groups of GROUP_M row tiles, so that those in flight share A rows and B "
                 "columns in L2.")
    if s.persistent:
        text += " One program per SM (PROGRAMS_PER_SM) loops over the tiles: no tail wave of launches."
    if w.kind == "linear":
        text += " W (N, K), as nn.Linear stores it, is read as the B operand W^T through its strides: no copy."
    if s.fuse_epilogue:
        text += " The epilogue runs on the fp32 accumulator before the single store: y makes one trip to DRAM."
    elif w.epilogue:
        text += " The epilogue runs in torch after the kernel, as the reference runs it."
    if s.tma:
        text += " A and B tiles arrive through TMA descriptors (zero-filled past the edges: no masks)."
    return comment(text)


OP_WORDS = {"gelu": "GELU", "relu": "ReLU", "scale": "* {arg}", "div": "/ {arg}", "residual": "+ {arg}"}


def _forward(s, w) -> str:
    """ModelNew.forward: shapes, the output, the launch and (unfused) the reference's epilogue in torch."""
    x, y = w.args[0], w.args[1] if len(w.args) > 1 else None
    lines, rename = [], ([f"A, B = {x}, {y}"] if (x, y) != ("A", "B") else [])
    if w.kind == "linear":
        lines += [f"W, bias = self.{w.module}.weight, self.{w.module}.bias",
                  f"A = {x}.reshape(-1, {x}.shape[-1])",
                  "M, K = A.shape", "N = W.shape[0]",
                  "assert W.shape[1] == K, 'x (..., IN) with the layer (OUT, IN)'"]
        for op, arg in w.epilogue:
            if op == "residual" and s.fuse_epilogue:
                lines.append(f"{arg}2 = {arg}.reshape(M, N).contiguous()")
        lines.append("C = torch.empty((M, N), device=A.device, dtype=A.dtype)")
        b_operand, b_strides = "W", "0, W.stride(1), W.stride(0)"
        a_strides = "0, A.stride(0), A.stride(1)"
    elif w.kind == "bmm":
        lines += rename + ["assert A.dim() == 3 and B.dim() == 3 and A.shape[2] == B.shape[1]",
                  "BATCH, M, K = A.shape", "N = B.shape[2]",
                  "C = torch.empty((BATCH, M, N), device=A.device, dtype=A.dtype)"]
        b_operand, a_strides, b_strides = "B", "A.stride(0), A.stride(1), A.stride(2)", \
            "B.stride(0), B.stride(1), B.stride(2)"
    else:
        lines += rename + ["assert A.dim() == 2 and B.dim() == 2 and A.shape[1] == B.shape[0]",
                  "M, K = A.shape", "N = B.shape[1]", "C = torch.empty((M, N), device=A.device, dtype=A.dtype)"]
        b_operand, a_strides, b_strides = "B", "0, A.stride(0), A.stride(1)", "0, B.stride(0), B.stride(1)"
    _, e_launch, _ = _epilogue_args(w, s.fuse_epilogue) if w.kind == "linear" else ([], [], [])
    if s.tma:
        lead = "[1, " if w.kind == "bmm" else "["
        bblock = "[BLOCK_N, BLOCK_K]" if w.kind == "linear" else f"{lead}BLOCK_K, BLOCK_N]"
        lines += ["A = A.contiguous()", f"{b_operand} = {b_operand}.contiguous()",
                  f"a_desc = TensorDescriptor.from_tensor(A, {lead}BLOCK_M, BLOCK_K])",
                  f"b_desc = TensorDescriptor.from_tensor({b_operand}, {bblock})"]
        args = ["a_desc", "b_desc", "C", *e_launch, "M", "N", "K"] + (["BATCH"] if w.kind == "bmm" else [])
    else:
        args = ["A", b_operand, "C", *e_launch, "M", "N", "K"] + (["BATCH"] if w.kind == "bmm" else []) + [
            a_strides, b_strides]
    tiles = "triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)"
    if s.persistent:
        total = tiles + (" * BATCH" if w.kind == "bmm" else "")
        lines.append(f"grid = (min({total}, PROGRAMS_PER_SM * _num_sms(A.device)),)")
    else:
        lines.append(f"grid = ({tiles}, {'BATCH' if w.kind == 'bmm' else 1})")
    kw = ["BLOCK_M=BLOCK_M", "BLOCK_N=BLOCK_N", "BLOCK_K=BLOCK_K"] + (["GROUP_M=GROUP_M"] if s.group_m > 1 else [])
    if not s.tma:
        kw.append("EVEN=M % BLOCK_M == 0 and N % BLOCK_N == 0 and K % BLOCK_K == 0")
    if w.dtype == "bfloat16":
        kw.append("UPCAST=not A.is_cuda")
    kw += ["num_warps=NUM_WARPS", "num_stages=NUM_STAGES"]
    lines.append("gemm_kernel[grid](" + ", ".join(args + kw) + ")")
    if w.kind == "linear":
        lines.append(f"y = C.reshape(*{x}.shape[:-1], N)")
        if not s.fuse_epilogue:     # the reference's own torch ops, in its order and dtype
            lines += ["y = " + TORCH_OPS[op].format(arg=arg) for op, arg in w.epilogue]
        lines.append("return y")
    else:
        lines.append("return C")
    sig = ", ".join(["self", *w.args])
    return f"    def forward({sig}):\n" + _indent("\n".join(lines), 8) + "\n"


def render(s, w, description: str) -> str:
    what = {"matmul": "C = A @ B", "bmm": "C[b] = A[b] @ B[b]",
            "linear": "y = x @ W^T + b" + "".join(", then " + OP_WORDS[op].format(arg=arg)
                                                  for op, arg in w.epilogue)}[w.kind]
    imports = "import functools\n\n" if s.persistent else ""
    imports += "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
    if s.tma:
        imports += "from triton.tools.tensor_descriptor import TensorDescriptor\n"
    consts = (f"BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = {s.block_m}, {s.block_n}, {s.block_k}, {s.group_m}\n"
              f"NUM_WARPS, NUM_STAGES = {s.num_warps}, {s.num_stages}\n")
    helper = ""
    if s.persistent:
        per_sm = max(1, min(2, (200 * 1024) // max(1, s.num_stages * (s.block_m + s.block_n) * s.block_k * w.itemsize)))
        consts += f"PROGRAMS_PER_SM = {per_sm}\n"
        helper = ("\n\n@functools.lru_cache(maxsize=None)\ndef _num_sms(device):\n"
                  "    # the CPU interpreter gets two programs, so that each still loops over several tiles\n"
                  "    return torch.cuda.get_device_properties(device).multi_processor_count "
                  "if device.type == \"cuda\" else 2\n")
    return wrap_all(comment(f"Schedule: {description}.") + imports + "\n" + consts + "\n\n" + _why(s, w, what)
                    + _kernel(s, w) + helper + "\n\nclass ModelNew(nn.Module):\n" + w.init.rstrip() + "\n\n"
                    + _forward(s, w))
