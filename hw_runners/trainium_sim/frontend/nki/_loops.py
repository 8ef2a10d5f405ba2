"""NKI 0.6.0's compiled loops (Neuron SDK 2.32): nl.fori_loop and nl.while_loop, and the end of nl.dynamic_range.

Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.language.fori_loop.html,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.language.while_loop.html,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-loops.html and the migration guide,
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html ("Deprecated: dynamic
nl.dynamic_range and while loops"; NKI 0.7.0 removes them, v2.33.1 of the same guide).

trainium-sim records kernels by running them: a loop is traced by unrolling, as every other loop here. That is
exact for fori_loop with integer bounds: its iteration value is a NkiScalar, which "can be used almost anywhere
a Python int literal is used" (nki.isa.NkiScalar's reference), so the body sees the int it would hold on device.
Bounds or conditions that exist only on the device (a VirtualRegister, an NkiScalar loaded from a tile) have no
value in a trace: those are refused by name, never guessed.
"""
from __future__ import annotations

import numbers

from neuronxcc.nki._index import NKIError

_DEVICE_VALUE = ("trainium-sim records a kernel without running it on data, so a value that exists only on the "
                 "device (a VirtualRegister or NkiScalar from nisa.register_load / nisa.scalar_load) cannot drive "
                 "a loop in the trace; register and scalar loads are not simulated")


def _bound(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        if isinstance(x, numbers.Number):
            raise NKIError(f"nl.fori_loop: {what} must be an integer, not {type(x).__name__} {x!r}")
        raise NKIError(f"nl.fori_loop: {what} is a {type(x).__name__}; {_DEVICE_VALUE}. Use Python int bounds "
                       f"(the kernel's shapes give them)")
    if not -2 ** 31 <= int(x) < 2 ** 31:
        # "A bound must be 32-bit: the loop compiles into a compare-and-branch that has no 64-bit form"
        raise NKIError(f"nl.fori_loop: {what}={int(x)} does not fit 32 bits (the loop's compare-and-branch has no "
                       f"64-bit form)")
    return int(x)


def fori_loop(lower, upper, body_fun, step=1) -> None:
    """for i in range(lower, upper, step): body_fun(i). On the device one copy of the body runs in a hardware
    loop; traced here by unrolling (each iteration's instructions are recorded and timed as issued)."""
    lo, hi = _bound(lower, "lower"), _bound(upper, "upper")
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step <= 0:
        raise NKIError(f"nl.fori_loop: step must be a compile-time positive integer, got {step!r}")
    if not callable(body_fun):
        raise NKIError(f"nl.fori_loop: body_fun must be a function of the iteration value, (i) -> None; got "
                       f"{type(body_fun).__name__}")
    for i in range(lo, hi, int(step)):
        if body_fun(i) is not None:
            raise NKIError("nl.fori_loop: body_fun returns None (loop state is carried through SBUF/HBM, not "
                           "through return values)")


def while_loop(init, body_fun) -> None:
    """Refused: its condition is a register the device computes (the body returns the next one)."""
    if not callable(body_fun):
        raise NKIError(f"nl.while_loop: body_fun must be a function (r: VirtualRegister) -> VirtualRegister; got "
                       f"{type(body_fun).__name__}")
    if isinstance(init, (numbers.Number, bool)):
        raise NKIError(f"nl.while_loop: init must be a VirtualRegister (the condition register), not the "
                       f"{type(init).__name__} {init!r}; a condition known while tracing is a plain Python while "
                       f"loop (NKI loops deep dive: 'Python while loops ... unrolled at specialization time')")
    raise NKIError(f"nl.while_loop is part of NKI v2 but trainium-sim does not simulate it: the loop runs while a "
                   f"register computed on the device is nonzero; {_DEVICE_VALUE}")


def dynamic_range(*args, **kwargs):
    raise NKIError("nl.dynamic_range was deprecated in NKI 0.6.0 (Neuron SDK 2.32) and removed in NKI 0.7.0: "
                   "write nl.fori_loop(lower, upper, body_fun, step) with body_fun(i) the loop body (NKI migration "
                   "guide, 'Deprecated: dynamic nl.dynamic_range and while loops')")
