"""The evaluator keeps freed memory for its next evaluation (glibc's malloc tuned once per process)."""
from __future__ import annotations

import platform

import pytest

from autocomp_zmq.hw_runners.trainium_sim import heap
from autocomp_zmq.hw_runners.trainium_sim.target import Options


def test_retaining_freed_memory_is_applied_on_glibc_and_off_when_zero():
    assert heap.retain_freed_memory(0) is False
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    assert heap.retain_freed_memory(256 << 20) is True
    assert heap.retain_freed_memory(256 << 20) is True          # once per process: the second call is a no-op


def test_a_negative_retained_size_is_refused():
    with pytest.raises(ValueError, match="retain_heap_bytes"):
        Options(retain_heap_bytes=-1)
