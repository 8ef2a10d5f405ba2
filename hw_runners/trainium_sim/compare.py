"""Comparing a replayed output with its expected values (trusted side): the value check's verdict in words.

Compared in cache-sized pieces (one pass over memory); the elements a sampled check selects are compared by
gathering them where they are few, and in place with the others ignored where they are most of a piece."""
from __future__ import annotations

import numpy as np

COMPARE_CHUNK = 1 << 18


def finite_tolerance(want: np.ndarray, atol: float, rtol: float) -> bool:
    """Whether every expected value and its tolerance are finite (integers are): mismatch(finite=True) holds."""
    if not np.issubdtype(want.dtype, np.floating) or not want.size:
        return True
    # min and max carry any NaN or inf through, and need no temporary array: two passes over an output that can
    # be a GiB (isfinite and abs made two copies of it)
    lo, hi = want.min(keepdims=True), want.max(keepdims=True)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        return False
    tol = np.maximum(-lo, hi)                    # the largest tolerance, in want's dtype as mismatch computes it
    with np.errstate(over="ignore"):
        tol *= rtol
        tol += atol
    return bool(np.isfinite(tol).all())


def mismatch(got: np.ndarray, want: np.ndarray, atol: float, rtol: float, reveal: bool = True,
             mask: np.ndarray | None = None, finite: bool = False) -> str:
    """What is wrong, in words, over the elements `mask` selects (None: all); a hidden set's values are never
    quoted (they are kept per evaluator). Compared in want's dtype (float32 for floating outputs: the
    tolerance dwarfs float32's rounding of the difference). finite: every value of `want` and its tolerance are
    known to be finite (finite_tolerance); then a computed inf or NaN fails |got - want| <= tol by itself, and
    it is not looked for apart (a pass less over the values)."""
    flat_got, flat_want = got.reshape(-1), want.reshape(-1)
    flat_mask = None if mask is None else mask.reshape(-1)
    bad, first = 0, None
    for lo in range(0, flat_got.size, COMPARE_CHUNK):       # in cache-sized pieces: one pass over memory
        g, w = flat_got[lo:lo + COMPARE_CHUNK], flat_want[lo:lo + COMPARE_CHUNK]
        at = skip = None           # positions within the piece, when gathered; elements not compared, when not
        if flat_mask is not None:
            chosen = flat_mask[lo:lo + COMPARE_CHUNK]
            count = int(np.count_nonzero(chosen))
            if not count:
                continue
            if count * 4 < chosen.size:
                at = np.flatnonzero(chosen)
                g, w = g[at], w[at]
            elif count < chosen.size:      # most of the piece: compared whole (no gathers), the rest ignored
                skip = ~chosen
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.subtract(g, w, dtype=want.dtype)
            np.abs(err, out=err)
            tol = np.abs(w)
            tol *= rtol
            tol += atol
            ok = err <= tol            # NaN (a value computed from unwritten memory) is never within it
        if not finite:                 # an infinite expected value has an infinite tolerance
            ok &= np.isfinite(g)
        if skip is not None:
            ok |= skip
        n = ok.size - int(np.count_nonzero(ok))
        if n:
            bad += n
            if first is None:
                i = int(np.argmin(ok))
                first = lo + (i if at is None else int(at[i]))
    if not bad:
        return ""
    at = [int(i) for i in np.unravel_index(first, got.shape)]
    selected = got if mask is None else got[mask]
    unwritten = int(np.isnan(selected).sum())
    note = f"; {unwritten:,} elements hold no value (computed from memory never written)" if unwritten else ""
    values = f": got {float(got.flat[first]):.6g}, expected {float(want.flat[first]):.6g}" if reveal else ""
    scope = f"of {got.size:,} elements" if mask is None else f"of {selected.size:,} checked elements"
    return f"{bad:,} {scope} outside atol {atol:g} + rtol {rtol:g}; first at {at}{values}{note}"


