"""Cumulative-sum schedules (inclusive prefix sum along the last axis of a float32 [M, N] matrix) and kernels.

The work is one Vector tensor_tensor_scan per element (out[k] = out[k - 1] * 1 + x[k]), so the kernel is
bound by moving the matrix in and out. The naive kernel scans 128-row tiles F columns at a time and carries
each row's running total from one column chunk to the next (a copy of the last column). The knobs: the
columns per scan (whole rows need no carry), how the rows map to partitions ("tile": partition p holds row
t*128 + p of row tile t; "rows": partition p owns the M/128 consecutive rows p*M/128 .., contiguous in HBM,
so R rows of a partition are ONE contiguous run and a chunk of R rows is one DMA), how many rows one chunk
holds (side by side on the free axis), whether those rows are scanned one by one or by one scan whose
multiplier restarts the sum at each row's first column, how the carry is passed (copied into a [P, 1] tile,
or the previous chunk's last column used directly as the scan's initial value), and how many chunks ahead
the loads run (a software pipeline: DMAs start in program order, so a load issued after a store that waits
for the scan would sit behind it).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, step_choices

LAYOUTS = ("tile", "rows")
CARRIES = ("copy", "direct")
COLS = (128, 256, 512, 1024, 2048, 4096, 8192)      # columns per scan; 0 means whole rows
DEPTHS = (0, 1, 2, 3)


@dataclass(frozen=True)
class Schedule:
    layout: str = "tile"       # tile: partition p holds row t*128 + p; rows: partition p owns M/128 consecutive rows
    cols: int = 512            # columns per scan (0: whole rows, no carry)
    rows: int = 1              # rows per chunk, side by side on the free axis (whole-row scans only)
    merged: bool = False       # rows layout: one DMA per chunk (its rows are contiguous per partition)
    restart: bool = False      # one scan per chunk, restarted at each row's first column (else one scan per row)
    carry: str = "copy"        # column-chunked scans: copy the last column into a carry tile, or pass it directly
    depth: int = 0             # chunks loaded ahead of the scan (unrolled software pipeline); 0: plain loops
    family: str = "cumsum"


DIMS = ("M", "N")


def default(dims: dict) -> Schedule:
    n = dims["N"]
    return Schedule(cols=512 if n > 512 and n % 512 == 0 else 0)


def _width(s: Schedule, d: dict) -> int:
    return s.cols or d["N"]


def fits(s: Schedule, d: dict) -> bool:
    m, n = d["M"], d["N"]
    if s.layout not in LAYOUTS or s.carry not in CARRIES or s.depth not in DEPTHS or m % 128:
        return False
    if s.cols and (s.cols not in COLS or s.cols >= n or n % s.cols):
        return False
    slots = m // 128
    if s.rows < 1 or slots % s.rows or (s.rows > 1 and s.cols):
        return False                # several rows per chunk only with whole-row scans
    if s.merged and (s.layout != "rows" or s.cols):
        return False                # one DMA per chunk needs the chunk's rows contiguous per partition
    if s.restart and s.rows == 1:
        return False
    if s.carry == "direct" and not s.cols:
        return False                # nothing to carry
    w = s.rows * _width(s, d) * 4
    # the loaded chunks in flight (depth + 1), the sums, the ones / restart multiplier
    return (s.depth + 3) * w <= SBUF_LIMIT


def _src(s: Schedule, t: str, a: str, b: str, name: str = "x") -> str:
    """The HBM view of row slot t, columns a:b."""
    if s.layout == "rows":
        return f"{name}v[:, ({t}) * cols + {a}:({t}) * cols + {b}]"
    return f"{name}[({t}) * P:({t} + 1) * P, {a}:{b}]"


# The statements the two NKI dialects write differently; the loop structure around them (_body) is shared.
# whole(t): tile t as a whole destination; load/store/scan/copy: one statement each at an indent; const: a
# [P, F] (or [P, 1]) tile of `value` in the accumulation dtype.
V1 = SimpleNamespace(
    whole=lambda t: f"{t}[...]",
    load=lambda ind, dst, src: f"{ind}{dst} = nl.load({src})\n",
    store=lambda ind, dst, src: f"{ind}nl.store({dst}, value={src})\n",
    scan=lambda ind, dst, mul, data, init: (f"{ind}{dst} = nisa.tensor_tensor_scan({mul}, {data}, {init}, "
                                            f"nl.multiply, nl.add, dtype=acc)\n"),
    copy=lambda ind, dst, src: f"{ind}{dst} = nl.copy({src})\n",
    set=lambda ind, dst, value: f"{ind}{dst} = {value}\n",
    const=lambda ind, name, shape, value: f"{ind}{name} = nl.{'ones' if value else 'zeros'}({shape}, dtype=acc)\n",
)
# NKI v2 (the nki2 ISA profile): every instruction writes the dst it is given; DMAs are nisa.dma_copy
V2 = SimpleNamespace(
    whole=lambda t: t,
    load=lambda ind, dst, src: f"{ind}nisa.dma_copy(dst={dst}, src={src})\n",
    store=lambda ind, dst, src: f"{ind}nisa.dma_copy(dst={dst}, src={src})\n",
    scan=lambda ind, dst, mul, data, init: (f"{ind}nisa.tensor_tensor_scan(dst={dst}, data0={mul}, data1={data}, "
                                            f"initial={init}, op0=nl.multiply, op1=nl.add)\n"),
    copy=lambda ind, dst, src: f"{ind}nisa.tensor_copy(dst={dst}, src={src})\n",
    set=lambda ind, dst, value: f"{ind}nisa.memset(dst={dst}, value={value})\n",
    const=lambda ind, name, shape, value: (f"{ind}{name} = nl.ndarray({shape}, dtype=acc, buffer=nl.sbuf)\n"
                                           f"{ind}nisa.memset(dst={name}, value={float(value)})\n"),
)


def _io(s: Schedule, o, ind: str, c: str, j: str, tile: str, store: bool) -> str:
    """Load (or store) chunk (c, j) into (from) the SBUF tile `tile`."""
    if s.merged:
        view = f"v[:, {c} * R * cols:({c} + 1) * R * cols]"
        if store:
            return o.store(ind, f"y{view}", tile)
        return o.load(ind, o.whole(tile), f"x{view}")
    a, b = (f"{j} * F", f"({j} + 1) * F") if s.cols else ("0", "cols")
    if s.rows == 1:
        if store:
            return o.store(ind, _src(s, c, a, b, 'y'), tile)
        return o.load(ind, o.whole(tile), _src(s, c, a, b))
    t = f"{c} * R + r"
    part = f"{tile}[:, r * F:(r + 1) * F]"
    if store:
        return f"{ind}for r in nl.static_range(R):\n" + o.store(ind + "    ", _src(s, t, a, b, 'y'), part)
    return f"{ind}for r in nl.static_range(R):\n" + o.load(ind + "    ", part, _src(s, t, a, b))


def _scan(s: Schedule, o, ind: str, data: str, init: str) -> str:
    if s.rows == 1:
        return o.scan(ind, o.whole("sums"), "ones", data, init)
    if s.restart:
        return o.scan(ind, o.whole("sums"), "restart", data, "0.0")
    return (f"{ind}for r in nl.static_range(R):\n"
            + o.scan(ind + "    ", "sums[:, r * F:(r + 1) * F]", "ones", f"{data}[:, r * F:(r + 1) * F]", "0.0"))


def body(s: Schedule) -> str:
    return _body(s, V1)


def body_v2(s: Schedule) -> str:
    """The kernel of `s` in NKI v2 (the nki2 ISA profile): the same loops and chunks."""
    return _body(s, V2)


def _body(s: Schedule, o) -> str:
    head = f"""@nki.jit
def solution(x, axis=None, p_size=None, f_size=None, acc_dtype=None):
    assert axis in (None, -1, len(x.shape) - 1), "only the last axis is supported"
    rows, cols = x.shape
    P = nl.tile_size.pmax
    acc = nl.float32 if acc_dtype is None else acc_dtype
    F = {s.cols or "cols"}                          # columns per scan
    R = {s.rows}                             # rows per chunk, side by side on the free axis
    assert rows % P == 0 and cols % F == 0
    T = rows // P                     # row slots per partition
    NJ = cols // F                    # column chunks per row
    assert T % R == 0
    y = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
"""
    if s.layout == "rows":
        head += ("    xv = x.reshape((P, T * cols))      # partition p owns rows p*T .. p*T + T - 1, contiguous\n"
                 "    yv = y.reshape((P, T * cols))\n")
    if s.restart:
        head += (o.const("    ", "restart", "(P, R * F)", 1).replace(
            "\n", "   # out[k] = out[k - 1] * 0 + x[k] at each row start\n", 1)
            + o.set("    ", "restart[:, 0:R * F:F]", "0.0"))
    else:
        head += o.const("    ", "ones", "(P, F)", 1)
    chunked = bool(s.cols)
    alloc = "{i}{n} = nl.ndarray((P, R * F), dtype={t}, buffer=nl.sbuf)\n"
    if s.depth == 0:
        code = head + "    for c in nl.affine_range(T // R):\n"
        ind = "        "
        if chunked and s.carry == "copy":
            code += (o.const(ind, "carry", "(P, 1)", 0)
                     + f"{ind}for j in nl.sequential_range(NJ):\n")
            ind += "    "
        elif chunked:
            code += (f"{ind}prev = None\n"
                     f"{ind}for j in nl.static_range(NJ):   # the previous chunk's last column seeds the next\n")
            ind += "    "
        code += alloc.format(i=ind, n="data", t="x.dtype") + _io(s, o, ind, "c", "j", "data", False)
        init = "0.0" if not chunked else ("carry" if s.carry == "copy" else
                                          "(0.0 if prev is None else prev[:, F - 1:F])")
        code += alloc.format(i=ind, n="sums", t="acc") + _scan(s, o, ind, "data", init) + _io(s, o, ind, "c", "j", "sums", True)
        if chunked and s.carry == "copy":
            code += o.copy(ind, o.whole("carry"), "sums[:, F - 1:F]")
        elif chunked:
            code += f"{ind}prev = sums\n"
        return code + "    return y\n"
    # software pipeline, unrolled: the load of chunk k + D is issued before the scan and store of chunk k
    code = head + f"""    D = {s.depth}                             # chunks loaded ahead
    order = [(c, j) for c in range(T // R) for j in range(NJ)]
    n = len(order)

    def load(k):
        c, j = order[k]
{alloc.format(i="        ", n="data", t="x.dtype")}{_io(s, o, "        ", "c", "j", "data", False)}\
        return data

    loaded = [load(k) for k in range(min(D, n))]
    for k in nl.static_range(n):
        if k + D < n:
            loaded.append(load(k + D))
        c, j = order[k]
"""
    ind = "        "
    if chunked and s.carry == "copy":
        init = "(0.0 if j == 0 else carry)"
    elif chunked:
        code += f"{ind}prev = None if j == 0 else sums     # the previous chunk's last column seeds this one\n"
        init = "(0.0 if j == 0 else prev[:, F - 1:F])"
    else:
        init = "0.0"
    if chunked and s.carry == "copy":
        code += f"{ind}if j == 0:\n{ind}    carry = nl.ndarray((P, 1), dtype=acc, buffer=nl.sbuf)\n"
    code += (alloc.format(i=ind, n="sums", t="acc") + _scan(s, o, ind, "loaded[k]", init)
             + _io(s, o, ind, "c", "j", "sums", True))
    if chunked and s.carry == "copy":
        code += o.copy(ind, o.whole("carry"), "sums[:, F - 1:F]")
    return code + "    return y\n"


def describe(s: Schedule) -> str:
    lay = ("partition p owns M/128 consecutive rows" if s.layout == "rows" else "128-row tiles")
    scan = f"{s.cols}-column scans with the running total {'copied into a carry tile' if s.carry == 'copy' else 'passed directly'}" \
        if s.cols else "whole-row scans"
    rows = ""
    if s.rows > 1:
        rows = (f", {s.rows} rows per chunk ({'one restarted scan' if s.restart else 'one scan per row'}, "
                f"{'one DMA per chunk' if s.merged else 'one DMA per row'})")
    ahead = f", loads {s.depth} chunk(s) ahead (unrolled pipeline)" if s.depth else ", plain loops"
    return f"{lay}, {scan}{rows}{ahead}"


def _divisors(d: dict) -> tuple[int, ...]:
    """The row counts a chunk may hold: divisors of the M/128 rows each partition gets."""
    slots = d["M"] // 128
    return tuple(r for r in range(1, slots + 1) if slots % r == 0)


def candidates(mutation: str, s: Schedule, d: dict) -> list:
    n = d["N"]
    wider = [c for c in COLS if c > s.cols and c < n and n % c == 0][:1] + [0] if s.cols else []
    if mutation == "chunk":         # columns per scan, both ways
        narrower = [c for c in COLS if c < (s.cols or n) and n % c == 0][-1:]
        return [replace(s, cols=c, carry=s.carry if c else "copy") for c in wider + narrower]
    if mutation == "block":         # rows per chunk
        if s.cols:
            return [replace(s, cols=0, carry="copy", rows=2)]
        return [replace(s, rows=r, restart=s.restart and r > 1) for r in step_choices(s.rows, _divisors(d))]
    if mutation == "large_dma":     # fewer, longer DMA rows
        out = [replace(s, cols=c, carry=s.carry if c else "copy") for c in wider]
        if s.layout == "tile":
            out.append(replace(s, layout="rows"))
        elif not s.merged and not s.cols:
            out.append(replace(s, merged=True))
        if not s.cols and s.layout == "rows":
            out += [replace(s, rows=r, merged=True) for r in _divisors(d) if r > s.rows][:1]
        return out
    if mutation == "order":         # which rows share a partition
        return [replace(s, layout="rows" if s.layout == "tile" else "tile", merged=False)]
    if mutation == "prefetch":
        return [replace(s, depth=v) for v in step_choices(s.depth, DEPTHS)]
    if mutation == "fuse":          # fewer Vector/Scalar instructions
        out = [replace(s, carry="direct")] if s.cols and s.carry == "copy" else []
        return out + ([replace(s, restart=not s.restart)] if s.rows > 1 else [])
    return []


OPTIONS = {"large-dma": "large_dma", "fewer-bigger-instructions": "chunk", "block-bigger": "block",
           "max-tiles": "chunk", "loop-order": "order", "multi-buffer": "prefetch", "spread-dma": "prefetch",
           "combine-vector-ops": "fuse", "remove-redundant": "fuse", "fuse-through-sbuf": "fuse"}

SAFER = ({"depth": 0}, {"restart": False}, {"merged": False}, {"carry": "copy"}, {"rows": 1}, {"layout": "tile"})
