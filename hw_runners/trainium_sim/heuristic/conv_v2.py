"""The depthwise conv1d schedules of conv.py rendered as NKI v2 kernels (the nki2 ISA profile): the same tiles
of NB padded images, taps, engines, diagonal matmuls and pipeline, written the v2 way. Every instruction
writes the dst it is given (padding columns by nisa.memset); the partition axis is first (the hoisted filters
and diagonals are [P, C/P, ...] tiles); a PSUM tile's first matmul overwrites and the next accumulate, so no
zeroed PSUM tile; the identity is an affine_select pattern; the merged [P, NB, W] transfers are access
patterns (`tensor.ap`, Python-int offsets: static loops) instead of index grids. The head and the tile loop
are conv.py's (head, driver). What a knob changes is said in conv.py."""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic.conv import Schedule, driver, head
from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm_v2 import _evict


def _tap(s: Schedule, dst: str, w: str, col: str) -> str:
    """dst = the window of tap w (all NB images at once) times the per-channel filter column `col`."""
    if s.mul == "scalar":
        return f"nisa.activation(dst={dst}, op=nl.copy, data=xp[:, {w}:{w} + L], scale={col})"
    return f"nisa.tensor_scalar(dst={dst}, data=xp[:, {w}:{w} + L], op0=nl.multiply, operand0={col})"


def _add(eng: str) -> str:
    on = ", engine=nisa.gpsimd_engine" if eng == "gpsimd" else ""
    return f"nisa.tensor_tensor(dst=acc, data1=acc, data2=prod, op=nl.add{on})"


def body(s: Schedule) -> str:
    fcol = "fl_all[:, cb, {w}:{w} + 1]" if s.hoist else "fl[:, {w}:{w} + 1]"
    code = head(s)
    if s.hoist:
        code += """    fl_all = nl.ndarray((P, C // P, WF), dtype=nl.float32, buffer=nl.sbuf)
    for cb in nl.affine_range(C // P):
        nisa.dma_copy(dst=fl_all[:, cb, :], src=filt[cb * P:(cb + 1) * P, 0:WF])
"""
    if s.method == "tensor":
        code += """    ones = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    ident = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(dst=ident, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=ones, on_false_value=0.0,
                       cmp_op=nl.equal, offset=0)       # partition k, column m: k - m == 0
"""
        if s.hoist:
            code += """    diags = nl.ndarray((P, C // P, WF, P), dtype=nl.float32, buffer=nl.sbuf)
    for cb in nl.affine_range(C // P):
        for w in nl.static_range(WF):        # diag(filter[:, w]): a matmul with it scales each channel
            nisa.tensor_scalar(dst=diags[:, cb, w, :], data=ident, op0=nl.multiply, operand0=fl_all[:, cb, w:w + 1])
"""
    pads = ("        for j in nl.static_range(NB):          # zero the padding columns of every image\n"
            "            if pl:\n                nisa.memset(dst=xp[:, j * WP:j * WP + pl], value=0.0)\n"
            "            if pr:\n                nisa.memset(dst=xp[:, j * WP + pl + W:(j + 1) * WP], value=0.0)\n")
    alloc = "        xp = nl.ndarray((P, NB * WP), dtype=nl.float32, buffer=nl.sbuf)\n"
    code += "    def new_tile():\n" + alloc + pads + "        return xp\n"
    if s.bufs == 1:
        code += "\n    xp_one = new_tile()\n"
    # one DMA per image: whole contiguous rows on both sides (the taps still cover all NB images at once)
    fill = ("        for j in nl.static_range(NB):\n"
            "            nisa.dma_copy(dst=xp[:, j * WP + pl:j * WP + pl + W], src=img_ref[n0 + j, cb * P:(cb + 1) * P, 0, 0:W])\n")
    if s.merged:      # the NB images' rows in one transfer: xp[c, n * WP + pl + w] = img_ref[n0 + n, cb * P + c, 0, w]
        fill = ("        nisa.dma_copy(dst=xp.ap([[NB * WP, P], [WP, NB], [1, W]], offset=pl),\n"
                "                      src=img_ref.ap([[W, P], [C * W, NB], [1, W]], offset=(n0 * C + cb * P) * W))\n")
    code += f"""
    def load(n0, cb):                            # images n0 .. n0+NB-1, channels cb*P .. cb*P+P-1
        xp = {"xp_one" if s.bufs == 1 else "new_tile()"}
{fill}        return xp

    def finish(xp, n0, cb):
"""
    if not s.hoist:
        code += ("        fl = nl.ndarray((P, WF), dtype=nl.float32, buffer=nl.sbuf)\n"
                 "        nisa.dma_copy(dst=fl, src=filt[cb * P:(cb + 1) * P, 0:WF])\n")
    code += "        acc = nl.ndarray((P, L), dtype=nl.float32, buffer=nl.sbuf)\n"
    if s.method == "vector":
        if s.add == "split":
            accum = (f"            if w % 2:\n                {_add('vector')}\n"
                     f"            else:\n                {_add('gpsimd')}\n")
        else:
            accum = f"            {_add(s.add)}\n"
        code += (f"        {_tap(s, 'acc', '0', fcol.format(w='0'))}\n"
                 f"        for w in nl.static_range(1, WF):\n"
                 f"            prod = nl.ndarray((P, L), dtype=nl.float32, buffer=nl.sbuf)\n"
                 f"            {_tap(s, 'prod', 'w', fcol.format(w='w'))}\n" + accum)
    else:
        diag = "diags[:, cb, w, :]" if s.hoist else "dg[:, w, :]"
        if not s.hoist:
            code += ("        dg = nl.ndarray((P, WF, P), dtype=nl.float32, buffer=nl.sbuf)\n"
                     "        for w in nl.static_range(WF):\n"
                     "            nisa.tensor_scalar(dst=dg[:, w, :], data=ident, op0=nl.multiply, operand0=fl[:, w:w + 1])\n")
        code += f"""        for c0 in nl.static_range(0, L, 512):          # one PSUM bank of output columns at a time
            sz = min(512, L - c0)
            ps = nl.ndarray((P, sz), dtype=nl.float32, buffer=nl.psum)
            for w in nl.static_range(WF):                # the first matmul overwrites, the next accumulate
                nisa.nc_matmul(dst=ps, stationary={diag}, moving=xp[:, c0 + w:c0 + w + sz])
            {_evict(s.evict, "acc[:, c0:c0 + sz]", "ps", "c0 // 512")}
"""
    if s.merged:
        code += ("        nisa.dma_copy(dst=out.ap([[WO, P], [C * WO, NB], [1, WO]], offset=(n0 * C + cb * P) * WO),\n"
                 "                      src=acc.ap([[L, P], [WP, NB], [1, WO]]))\n")
    else:
        code += ("        for j in nl.static_range(NB):\n"
                 "            nisa.dma_copy(dst=out[n0 + j, cb * P:(cb + 1) * P, 0, 0:WO], src=acc[:, j * WP:j * WP + WO])\n")
    return code + driver(s.prefetch, "nl.static_range" if s.merged else "nl.affine_range")
