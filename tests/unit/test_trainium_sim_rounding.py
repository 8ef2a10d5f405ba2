"""trainium-sim's bf16 rounding, bit for bit, on the patterns where a shortcut would go wrong."""
from __future__ import annotations

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim.ops import to_bf16


def _reference(bits: int) -> int:
    """Round-to-nearest-even of an fp32 pattern to its upper 16 bits, one value at a time; NaN stays as is."""
    exp, frac = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if exp == 0xFF and frac:
        return bits
    lower, upper = bits & 0xFFFF, bits >> 16
    if lower > 0x8000 or (lower == 0x8000 and upper & 1):
        upper += 1
    return (upper << 16) & 0xFFFFFFFF


def test_bf16_rounding_matches_the_scalar_rule_on_ties_overflow_nan_and_random_patterns():
    special = [0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
               0x7F800001, 0x7FC00000, 0xFFFFFFFF, 0x7FFFFFFF, 0x00000000, 0x80000000, 0x00008000, 0x00018000]
    rng = np.random.default_rng(7)
    bits = np.concatenate([np.array(special, dtype=np.uint32), rng.integers(0, 2**32, 4096, dtype=np.uint32)])
    for shape in [(bits.size,), (2, bits.size // 2)]:
        x = bits.reshape(shape).view(np.float32)
        got = to_bf16(x).view(np.uint32).reshape(-1)
        want = np.array([_reference(int(b)) for b in bits], dtype=np.uint32)
        np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(to_bf16(x), x)          # the input is never rounded in place
    strided = bits.view(np.float32)[::3]
    np.testing.assert_array_equal(to_bf16(strided).view(np.uint32),
                                  np.array([_reference(int(b)) for b in bits[::3]], dtype=np.uint32))
