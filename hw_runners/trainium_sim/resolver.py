"""Resolving a stream's accesses pattern by pattern (trusted side): see Resolver."""
from __future__ import annotations

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.program import Access, StreamError, TensorDecl, _row_major, expr_array, resolve


class Resolver:
    """resolve() with its work shared between accesses of one shape: a kernel's accesses repeat a few
    patterns (the same tensor and index terms) at many offsets, so the first access of a pattern is resolved
    and checked in full, and the next ones reuse what does not depend on the offsets (the tile shape, the
    row length, the axis checks, the index arrays at offset 0) and recompute their bounds. Masked accesses
    are always resolved in full."""

    def __init__(self, tensors: list[TensorDecl]) -> None:
        self.tensors, self.patterns = tensors, {}
        kinds: dict[tuple, int] = {}      # tensors alike in all but their tid share patterns
        self.kind = [kinds.setdefault((t.buffer, t.shape, t.dtype, t.pdim, t.alias), len(kinds)) for t in tensors]

    def __call__(self, enc, what: str, mask: np.ndarray | None = None) -> Access:
        return self.keyed(enc, what, mask)[0]

    def keyed(self, enc, what: str, mask: np.ndarray | None = None) -> tuple[Access, tuple | None]:
        """The access and its pattern (what every access of that pattern shares, offsets aside), or None for a
        masked access (resolved in full)."""
        key, consts = self._pattern(enc) if mask is None else (None, None)
        if key is None:
            return resolve(enc, self.tensors, what, mask), None
        tpl = self.patterns.get(key)
        if tpl is None:
            a = resolve(enc, self.tensors, what)
            self.patterns[key] = _Template(a, enc[1], consts)
            return a, key
        return tpl.instance(self.tensors[enc[0]], consts, what), key

    def _pattern(self, enc):
        """(hashable pattern, offsets) of an encoded access, or (None, None) when it is not well formed (then
        resolve() says why)."""
        try:
            tid, idx = enc
        except (TypeError, ValueError):
            return None, None
        if type(tid) is not int or not 0 <= tid < len(self.tensors):
            return None, None
        return _pattern(self.kind[tid], idx)


def _pattern(kind: int, idx):
    try:
        parts, consts = [], []
        for e in idx:
            if type(e) is int:
                parts.append(None)
                consts.append(e)
                continue
            c, terms = e
            if type(c) is not int:
                return None, None
            parts.append(tuple(map(tuple, terms)))
            consts.append(c)
        return (kind, tuple(parts)), consts
    except (TypeError, ValueError):
        return None, None


class _Template:
    """What an access pattern shares at every offset (built from a fully resolved and checked access)."""

    def __init__(self, a: Access, idx: list, consts: list[int]) -> None:
        self.a = a
        self.bounds = [(lo - c, hi - c, n) for lo, hi, c, n in zip(a.lo, a.hi, consts, a.tensor.shape)]
        self.fast = not any(isinstance(x, np.ndarray) for x in a.index[1:])
        if self.fast:        # per dim: an int, or a slice (start, stop - start, step) relative to the offset
            self.parts = [None if isinstance(x, (int, np.integer)) else (x.stop - x.start, x.step)
                          for x in a.index[1:]]
        else:                # the index arrays at offset 0, in their compact (broadcastable) form
            rank = max(len(a.shape), 1)
            self.parts = [None if isinstance(e, int) else expr_array([0, e[1]], rank, "") for e in idx]
            if a.strided is not None:
                self.first = a.strided[0] - sum(c * s for c, s in zip(consts, _row_major(a.tensor.shape)))

    def instance(self, t: TensorDecl, consts: list[int], what: str) -> Access:
        a = self.a
        lo, hi = [], []
        for d, (c, (lo_off, hi_off, n)) in enumerate(zip(consts, self.bounds)):
            if c + lo_off < 0 or c + hi_off >= n:
                raise StreamError(f"{what} accesses indices {c + lo_off}..{c + hi_off} of dimension {d} of a tensor "
                                  f"of shape {t.shape}: out of bounds")
            lo.append(c + lo_off)
            hi.append(c + hi_off)
        if self.fast:
            index = (slice(None), *[c if p is None else slice(c, c + p[0], p[1]) for c, p in zip(consts, self.parts)])
        else:
            index = (slice(None), *[np.broadcast_to(np.int64(c) if p is None else p + c, a.shape)
                                    for c, p in zip(consts, self.parts)])
        strided = None
        if a.strided is not None:
            strided = (self.first + sum(c * s for c, s in zip(consts, _row_major(t.shape))), a.strided[1])
        return Access(t, a.shape, index, tuple(lo), tuple(hi), a.run_bytes, a.axis0_is_partition, a.dense, strided,
                      a.lanes)
