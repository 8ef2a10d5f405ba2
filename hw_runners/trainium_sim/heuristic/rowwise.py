"""Row-wise schedules (a float32 [R, C] tensor, rows on the partitions) and their NKI kernels: a row softmax,
an element-wise scale + bias + activation with per-column vectors, and a row reduction. They serve the
problems a user brings in a problem file that declares no family: rowwise_kind.py recognises the computation
from the file's reference and binds it (the kernel's parameter names and roles, R and C) into the schedule,
so that a schedule alone determines its kernel.

The knobs: rows per partition in one DMA (`batch`: the [R, C] tensor seen as [R / batch, batch * C], so a
128-partition transfer moves 128 * batch rows with batch * C contiguous elements per partition: fewer, larger
transfers), free-axis tiles of the element-wise kind (`chunk` columns: more tiles, a shorter pipeline fill and
drain), prefetching the next tile's load ahead of this tile's work (loads and stores sit in separate DMA
queues, so they overlap), and the engines: for softmax, statistics fused into a negated max reduce plus one
Scalar exp whose free-axis sum comes with it (activation_reduce), and the normalisation as a Vector divide,
a Vector tensor_scalar by the reciprocal, or a Scalar copy scaled by it; for the element-wise kind, the
multiply on Vector or GpSimd and the activation on Vector or Scalar, so consecutive passes use two engines;
for a reduction, a Vector tensor_reduce or (sum, mean) the free-axis sum of a Scalar copy.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT

BATCHES = (1, 2, 4, 8, 16)
NORMS = ("divide", "vector", "scalar")
CHUNKS = (0, 512, 1024, 2048)
REDUCTIONS = ("sum", "max", "mean")


@dataclass(frozen=True)
class RowSchedule:
    kind: str = "softmax"      # softmax | affine: act(x * scale + bias), scale and bias per column | reduce
    params: str = ""           # the kernel's parameters, comma-separated, in the signature's order
    x: str = ""                # the [R, C] input; scale, bias: the [C] inputs ("" when absent)
    scale: str = ""
    bias: str = ""
    act: str = "copy"          # affine's activation: relu or copy
    rows: int = 0              # R and C
    cols: int = 0
    batch: int = 1             # rows per partition in one DMA
    prefetch: bool = False     # the next tile's load is issued before this tile's work
    fuse: bool = False         # softmax: negated max reduce + exp with its sum in one Scalar activation_reduce
    norm: str = "divide"       # softmax: how e / sum is applied (NORMS)
    mul: str = "vector"        # affine: the engine of the multiply (vector or gpsimd)
    act_on: str = "vector"     # affine: the engine of the activation (vector or scalar)
    chunk: int = 0             # affine, one row per partition: columns per tile (0: whole rows)
    reduce: str = "sum"        # reduce: the row reduction (sum, max or mean), into an [R] or [R, 1] output
    keepdims: bool = False     # reduce: the output is [R, 1]
    reduce_on: str = "vector"  # reduce: tensor_reduce on Vector, or (sum, mean) a copy activation's sum on Scalar
    family: str = "rowwise"


def _sbuf(s: RowSchedule) -> int:
    """Bytes per partition: the row tile (two with prefetching), the output tile, two row temporaries and the
    broadcast vectors."""
    row = s.batch * s.cols * 4
    return row * (2 if s.prefetch else 1) + row + 2 * s.cols * 4 + 2 * s.cols * 4 * (s.kind == "affine")


def fits(s: RowSchedule, d: dict) -> bool:
    if s.kind not in ("softmax", "affine", "reduce") or not s.x or s.rows < 1 or s.cols < 1:
        return False
    if s.batch not in BATCHES or s.rows % s.batch or s.norm not in NORMS:
        return False
    if s.chunk and (s.kind != "affine" or s.batch > 1 or s.chunk >= s.cols or s.chunk % 128):
        return False
    if s.batch > 1 and s.rows // s.batch < 128:   # a transfer on P partitions uses only ceil(P / 8) DMA queues
        return False
    if s.mul not in ("vector", "gpsimd") or s.act_on not in ("vector", "scalar") or s.act not in ("relu", "copy"):
        return False
    if s.reduce not in REDUCTIONS or s.reduce_on not in ("vector", "scalar"):
        return False
    if s.reduce == "max" and s.reduce_on == "scalar":   # an activation's free-axis reduction only adds
        return False
    return _sbuf(s) <= SBUF_LIMIT


def _softmax_step(s: RowSchedule, seg: str) -> str:
    """Lines computing y = softmax of the [p, C] rows `seg`."""
    if s.fuse:
        stats = (f"            m = nisa.tensor_reduce(nl.max, {seg}, axis=1, keepdims=True, negate=True)\n"
                 f"            z = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                 f"            e = nisa.activation_reduce(op=nl.exp, data={seg}, reduce_op=nl.add, reduce_res=z, "
                 f"bias=m)\n")
    else:
        stats = (f"            m = nl.max({seg}, axis=1, keepdims=True)\n"
                 f"            e = nl.exp(nl.subtract({seg}, m))\n"
                 f"            z = nl.sum(e, axis=1, keepdims=True)\n")
    norm = {"divide": "            y = nl.divide(e, z)\n",
            "vector": "            y = nisa.tensor_scalar(e, nl.multiply, nisa.reciprocal(z))\n",
            "scalar": "            y = nisa.activation(op=nl.copy, data=e, scale=nisa.reciprocal(z))\n"}[s.norm]
    return stats + norm


def _affine_step(s: RowSchedule, seg: str, cols: str) -> str:
    """Lines computing y = act(seg * scale + bias) on the rows `seg`, whose columns are `cols` of the vectors."""
    out, y = "", seg
    if s.scale:
        mul = ("nl.multiply(" + y + ", g_b[0:p, " + cols + "])" if s.mul == "vector" else
               "nisa.tensor_tensor(" + y + ", g_b[0:p, " + cols + "], nl.multiply, engine=nisa.engine.gpsimd)")
        out += f"            y = {mul}\n"
        y = "y"
    if s.bias:
        out += f"            y = nl.add({y}, b_b[0:p, {cols}])\n"
        y = "y"
    if s.act == "relu":
        out += ("            y = nl.maximum(" + y + ", 0.0)\n" if s.act_on == "vector" else
                "            y = nisa.activation(op=nl.relu, data=" + y + ")\n")
    elif y != "y":
        out += f"            y = nl.copy({y})\n"
    return out


def _reduce_step(s: RowSchedule, seg: str) -> str:
    """Lines computing the [p, 1] reduction y of the rows `seg`."""
    scale = f", scale={1.0 / s.cols!r}" if s.reduce == "mean" else ""
    if s.reduce_on == "scalar":
        return (f"            y = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
                f"            nisa.activation_reduce(op=nl.copy, data={seg}, reduce_op=nl.add, reduce_res=y{scale})\n")
    op = "nl.max" if s.reduce == "max" else "nl.add"
    out = f"            y = nisa.tensor_reduce({op}, {seg}, axis=1, keepdims=True)\n"
    if s.reduce == "mean":
        out += f"            y = nisa.tensor_scalar(y, nl.multiply, {1.0 / s.cols!r})\n"
    return out


def body(s: RowSchedule) -> str:
    b, chunked = s.batch, s.chunk > 0
    view = (lambda t: t) if b == 1 else (lambda t: f"{t}.reshape((R // {b}, {b} * C))")
    vectors = ""
    for name, tile in ((s.scale, "g_b"), (s.bias, "b_b")):
        if name and s.kind == "affine":   # per-column vectors on every partition, once
            vectors += f"    {tile} = nl.load({name}.reshape((1, C))).broadcast_to((128, C))\n"
    load = "nl.load(xv[{t} * 128:{t} * 128 + parts({t}), {c} * W:{c} * W + width({c})])"
    nxt = "(k + 1) // NC", "(k + 1) % NC"
    if s.prefetch:
        head = (f"    x_next = {load.format(t='0', c='0')}\n"
                f"    for k in nl.static_range(T * NC):\n"
                f"        x = x_next\n"
                f"        if k + 1 < T * NC:             # prefetch: the next tile's load goes first\n"
                f"            x_next = {load.format(t=nxt[0], c=nxt[1])}\n")
    else:
        head = (f"    for k in nl.static_range(T * NC):\n"
                f"        x = {load.format(t='k // NC', c='k % NC')}\n")
    shape, ow, put_at = "(R, C)", "w", "0:p, j * C:(j + 1) * C"
    if s.kind == "reduce":   # one output column per row: the [R] (or [R, 1]) output seen as [R / b, b]
        shape, ow, put_at = ("(R, 1)" if s.keepdims else "(R,)"), str(b), "0:p, j:j + 1"
        view = lambda t: f"{t}.reshape((R // {b}, {b}))" if t == "out" else (t if b == 1 else  # noqa: E731
                                                                             f"{t}.reshape((R // {b}, {b} * C))")
    if chunked:   # one segment: this tile's columns, and the vectors' same columns
        step = _affine_step(s, "x[0:p, 0:w]", "c * W:c * W + w")
        segments, put = "        for j in nl.static_range(1):\n", "            o[0:p, 0:w] = y\n"
    else:         # `b` segments of C columns: one row each
        seg = "x[0:p, j * C:(j + 1) * C]"
        step = {"softmax": lambda: _softmax_step(s, seg), "reduce": lambda: _reduce_step(s, seg),
                "affine": lambda: _affine_step(s, seg, "0:C")}[s.kind]()
        segments, put = f"        for j in nl.static_range({b}):\n", f"            o[{put_at}] = y\n"
    return f"""@nki.jit
def solution({s.params}):
    R, C = {s.rows}, {s.cols}
    out = nl.ndarray({shape}, dtype={s.x}.dtype, buffer=nl.shared_hbm)
    xv, ov = {view(s.x)}, {view('out')}   # {b} row(s) per partition per transfer
    W = {s.chunk or f"{b} * C"}                                  # columns per tile
    T, NC = (R // {b} + 127) // 128, ({b} * C + W - 1) // W      # tiles down and across (the last may be smaller)

    def parts(t):
        return min(128, R // {b} - t * 128)

    def width(c):
        return min(W, {b} * C - c * W)
{vectors}{head}\
        t, c = k // NC, k % NC
        p, w = parts(t), width(c)
        o = nl.ndarray((p, {ow}), dtype=nl.float32, buffer=nl.sbuf)
{segments}{step}{put}\
        nl.store(ov[t * 128:t * 128 + p, {"0:" + ow if s.kind == "reduce" else "c * W:c * W + w"}], value=o)
    return out
"""


_NORM_WORDS = {"divide": "a Vector divide", "vector": "a Vector tensor_scalar", "scalar": "a Scalar activation"}


def describe(s: RowSchedule) -> str:
    what = {"softmax": "row softmax", "reduce": f"row {s.reduce}",
            "affine": f"{s.act}({s.x}{' * ' + s.scale if s.scale else ''}{' + ' + s.bias if s.bias else ''})"}[s.kind]
    if s.kind == "reduce":
        engines = f"reduced on {s.reduce_on}"
    elif s.kind == "softmax":
        stats = ("fused statistics (negated max reduce, exp with its sum on Scalar)" if s.fuse else
                 "separate max, exp and sum")
        engines = f"{stats}, normalised by {_NORM_WORDS[s.norm]}"
    else:
        engines = f"multiply on {s.mul}, activation on {s.act_on}"
    width = f"{s.chunk}-column tiles" if s.chunk else f"{s.batch * s.cols} contiguous elements per transfer"
    return (f"{what} over 128-partition tiles of {s.batch} row(s) per partition ({width}), {engines}"
            f"{', next tile prefetched' if s.prefetch else ''}")


def candidates(mutation: str, s: RowSchedule, d: dict) -> list:
    if mutation == "large_dma":
        return [replace(s, batch=b) for b in BATCHES if b != s.batch]
    if mutation == "prefetch":
        return [replace(s, prefetch=not s.prefetch)]
    if mutation == "chunk":   # narrower tiles: more of them in flight, a shorter pipeline fill and drain
        return [replace(s, chunk=c, batch=1, prefetch=True) for c in CHUNKS if c != s.chunk] \
            if s.kind == "affine" else []
    if mutation == "fuse":
        return [replace(s, fuse=True), replace(s, fuse=True, norm="vector")] if s.kind == "softmax" and not s.fuse \
            else []
    if mutation == "engine":
        if s.kind == "reduce":
            return [replace(s, reduce_on="scalar" if s.reduce_on == "vector" else "vector")]
        if s.kind == "softmax":
            return [replace(s, norm=n) for n in NORMS if n != s.norm]
        out = [replace(s, mul="gpsimd" if s.mul == "vector" else "vector")] if s.scale else []
        return out + ([replace(s, act_on="scalar" if s.act_on == "vector" else "vector")] if s.act == "relu" else [])
    return []


ROWWISE = SimpleNamespace(
    DIMS=(), Schedule=RowSchedule, default=lambda dims: RowSchedule(), fits=fits, body=body, describe=describe,
    candidates=candidates,
    OPTIONS={"large-dma": "large_dma", "block-bigger": "large_dma", "max-tiles": "large_dma",
             "fewer-bigger-instructions": "large_dma", "multi-buffer": "prefetch", "spread-dma": "chunk",
             "fuse-activation": "fuse", "combine-vector-ops": "fuse", "online-softmax": "fuse",
             "engine-balance": "engine", "evict-efficiently": "engine"},
    SAFER=({"chunk": 0}, {"prefetch": False}, {"batch": 1}, {"norm": "divide"}, {"fuse": False}, {"mul": "vector"},
           {"act_on": "vector"}, {"reduce_on": "vector"}))


def bound(start: RowSchedule) -> SimpleNamespace:
    """The family for one recognised problem: its starting schedule is `start` (the binding and the plain
    knobs), whatever the dims say."""
    return SimpleNamespace(**{**vars(ROWWISE), "default": lambda dims: start})
