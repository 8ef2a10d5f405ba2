"""Instruction forms already decoded and checked (trusted side): see KnownForms.

A kernel's stream repeats a few instruction forms at many offsets (every loop body, once per iteration): the
same operation, engine, attributes and immediate operands, each operand an access of the same pattern (the
tensor's kind and the index terms: Resolver's key) and the same operands naming the same storage. Everything
the decode-time checks of an instruction read is in its form: the memories it may touch, the engine's
capabilities, its dry run (shapes, dtypes, partition axes, sizes; replay.Replayer.decode computes no value).
None of them reads an offset or a value: bounds are checked on every access by the resolver, and what depends
on values is checked when the instruction is computed. So the first instruction of a form is checked in full,
and the next ones of that form take its Step, the checks' outcome, with their own accesses and site. A masked
instruction is always checked in full.
"""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.program import Access


def form_of(op: str, engine: str, attrs: dict, reads: list, writes: list[Access], keys: list) -> tuple | None:
    """The form of a resolved instruction (keys: each operand's pattern, writes first), or None when one of
    its operands has none (masked, or resolved in full)."""
    if None in keys:
        return None
    storage = {}
    shared = tuple(storage.setdefault(a.tensor.alias if a.tensor.alias != -1 else a.tensor.tid, i)
                   if isinstance(a, Access) else -1 for i, a in enumerate(writes + reads))
    return op, engine, repr(attrs), tuple(keys), shared


class KnownForms:
    """The Step of the first checked instruction of each form, as a template for the next ones."""

    def __init__(self) -> None:
        self.forms: dict[tuple, tuple[type, dict, list[int], list[int]]] = {}

    def step(self, form: tuple | None, site: int, reads: list, writes: list[Access]):
        """A Step for this instruction from its form's first instruction, or None when the form is new."""
        known = self.forms.get(form) if form is not None else None
        if known is None:
            return None
        cls, state, read_at, write_at = known
        operands = writes + reads
        step = object.__new__(cls)
        step.__dict__.update(state)
        step.site, step.extra = site, dict(state["extra"])
        step.reads, step.writes = [operands[i] for i in read_at], [operands[i] for i in write_at]
        return step

    def add(self, form: tuple | None, step, reads: list, writes: list[Access]) -> None:
        """Remember a fully checked instruction's Step for its form (the accesses it holds by their operand
        position: an instruction may read its destination again, as a DMA that adds into it does)."""
        if form is None:
            return
        operands = writes + reads
        position = {id(a): i for i, a in reversed(list(enumerate(operands)))}
        if not all(id(a) in position for a in step.reads + step.writes):
            return
        state = dict(step.__dict__, extra=dict(step.extra))
        self.forms[form] = (type(step), state, [position[id(a)] for a in step.reads],
                            [position[id(a)] for a in step.writes])
