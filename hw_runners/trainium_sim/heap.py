"""Keep the evaluator's freed memory for the next evaluation instead of handing it back to the kernel.

An evaluation allocates and frees tens to hundreds of MiB of numpy arrays (set-stacked tensors, tiles, the
values compared). glibc serves every block over 128 KiB-32 MiB with a fresh mmap and unmaps it on free, so the
next evaluation takes page faults on all of it again and the kernel zeroes every page first: on cumsum's
hand-tuned kernel that zeroing (clear_page under huge-page faults, seen with perf) was half the evaluation's
time. Serving everything from the heap and trimming it only past a threshold reuses the same pages from one
evaluation to the next; what is kept stays bounded by the threshold.
"""
from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4        # glibc's malloc.h
_done: set[int] = set()


def retain_freed_memory(keep_bytes: int) -> bool:
    """Ask glibc's malloc (once per process) to serve large blocks from the heap and to keep up to keep_bytes
    of freed memory there. False where that is not possible (not glibc, keep_bytes 0): nothing changes then."""
    if keep_bytes <= 0 or keep_bytes in _done:
        return bool(keep_bytes > 0)
    try:
        libc = ctypes.CDLL(None)           # this process's own C library (find_library would run ldconfig)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    keep = min(keep_bytes, 2**31 - 1)                  # mallopt takes an int
    ok = mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, keep) and mallopt(M_TOP_PAD, min(keep, 64 << 20))
    if ok:
        _done.add(keep_bytes)
    return bool(ok)
