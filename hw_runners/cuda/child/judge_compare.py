"""Comparing a candidate's outputs, received as sealed memory, with the reference's own (the reference child's side:
trusted code only). Everything is compared, every element of every output of every input set and timed run, a piece
at a time on the device (so outputs of any size need no more memory than one piece of each): shape, dtype, NaN/Inf
where the reference is finite, and |got - want| <= atol + rtol * |want| (exact equality for integer and bool outputs;
equal infinities, and NaN where the reference has NaN, count as equal)."""
import fcntl
import math
import mmap
import os

import numpy as np
import torch

import judge_common as h


class Tally:
    """What the pieces of one output showed so far."""

    def __init__(self, shape):
        self.shape, self.nonfinite, self.first_nonfinite = shape, 0, None
        self.outside, self.worst, self.where, self.got, self.want, self.max_err = 0, -math.inf, None, 0.0, 0.0, 0.0

    def index(self, flat):
        return [int(i) for i in np.unravel_index(int(flat), self.shape)] if self.shape else []


def _work_dtype(dtype):
    if dtype == torch.float64 or not h.CUDA:
        return torch.float64
    return torch.float32


def _add(tally, got, want, offset, atol, rtol):
    if got.is_complex():
        got, want = torch.view_as_real(got).reshape(-1), torch.view_as_real(want).reshape(-1)
    if not want.is_floating_point():                       # integers and bools: exact
        bad = got != want
        n = int(bad.sum())
        if n:
            i = int(bad.nonzero()[0, 0])
            if tally.outside == 0:
                tally.where, tally.got, tally.want, tally.worst = offset + i, float(got[i]), float(want[i]), 1.0
            tally.outside += n
        return
    work = _work_dtype(want.dtype)
    g, w = got.to(work), want.to(work)
    finite_w, finite_g = torch.isfinite(w), torch.isfinite(g)
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    nonfinite = finite_w & ~finite_g
    n = int(nonfinite.sum())
    if n:
        if tally.first_nonfinite is None:
            tally.first_nonfinite = offset + int(nonfinite.nonzero()[0, 0])
        tally.nonfinite += n
    both = finite_w & finite_g
    err = torch.where(both, (g - w).abs(), torch.zeros_like(g))
    excess = torch.where(both & ~same, err - (atol + rtol * w.abs()), torch.full_like(g, -math.inf))
    outside = (excess > 0) | (~finite_w & ~same)
    tally.outside += int(outside.sum())
    if err.numel():
        tally.max_err = max(tally.max_err, float(err.max()))
        i = int(torch.argmax(torch.where(~finite_w & ~same, torch.full_like(excess, math.inf), excess)))
        value = float(excess[i]) if bool(finite_w[i]) else math.inf
        if value > 0 and value > tally.worst:
            tally.worst, tally.where, tally.got, tally.want = value, offset + i, float(g[i]), float(w[i])


def _piece(fd, size, dtype):
    """A received piece as a tensor of `dtype` on the device (the sealed file mapped privately: nothing is copied
    until it is moved)."""
    if os.fstat(fd).st_size != size or not fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE:
        raise ValueError("a piece of an output is not sealed memory of the announced size")
    with mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) as mm:
        raw = torch.frombuffer(mm, dtype=torch.uint8, count=size).view(dtype).to(h.DEVICE, copy=True)
    return raw


def compare(meta, fds, wanted, atol, rtol):
    """(why the received outputs are not the reference's `wanted`, or None; the largest absolute error seen)."""
    try:
        if not isinstance(meta, list) or len(meta) != len(wanted):
            return "forward returned %d tensors; the reference returns %d" % (
                len(meta) if isinstance(meta, list) else 0, len(wanted)), 0.0
        worst = 0.0
        pieces = iter(fds)
        for i, (m, want) in enumerate(zip(meta, wanted)):
            name = "output %d" % i
            dtype = str(want.dtype).replace("torch.", "")
            if list(m.get("shape", ())) != list(want.shape):
                return "%s has shape %s, expected %s" % (name, list(m.get("shape", ())), list(want.shape)), worst
            if m.get("dtype") != dtype:
                return ("%s is %s; the reference returns %s (forward must return the reference's dtype)"
                        % (name, m.get("dtype"), dtype)), worst
            flat = want.detach().contiguous().reshape(-1)
            nbytes, size = flat.numel() * flat.element_size(), flat.element_size()
            if m.get("nbytes") != nbytes or m.get("chunks") != -(-nbytes // h.CHUNK):
                return "%s was handed over in pieces that do not add up to its size" % name, worst
            tally = Tally(list(want.shape))
            for start in range(0, nbytes, h.CHUNK):
                got = _piece(next(pieces), min(h.CHUNK, nbytes - start), want.dtype)
                lo = start // size
                _add(tally, got, flat[lo:lo + got.numel()], lo, atol, rtol)
            worst = max(worst, tally.max_err)
            if tally.nonfinite:
                return ("%s has %s NaN/Inf elements where the reference is finite (first at %s)"
                        % (name, format(tally.nonfinite, ","), tally.index(tally.first_nonfinite))), worst
            if tally.outside:
                return ("%s of %s elements of %s are outside the tolerance (atol %g, rtol %g); worst at %s: got %.6g, "
                        "expected %.6g" % (format(tally.outside, ","), format(flat.numel(), ","), name, atol, rtol,
                                           tally.index(tally.where), tally.got, tally.want)), worst
        return None, worst
    finally:
        for fd in fds:
            os.close(fd)
