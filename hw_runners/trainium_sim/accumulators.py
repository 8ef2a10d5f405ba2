"""The Scalar engine's accumulator registers (trusted side): nisa.activation's reduce_cmd.

NeuronCore-v2's Scalar engine has 128 accumulator registers, one per partition, shared by the activation
instructions that name a reduce_cmd: `reset` zeroes them, `reduce` adds (reduce_op) this instruction's
free-axis reduction to them, `reset_reduce` does both, `idle` leaves them; reduce_res, when given, receives
their values after the command. The Replayer keeps them (`act_acc`, NaN until reset: garbage) across the
instruction stream, which the Scalar engine executes in order.
"""
from __future__ import annotations

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim import ops
from autocomp_zmq.hw_runners.trainium_sim.program import PARTITIONS, StreamError

ACC_CMDS = ("idle", "reset", "reduce", "reset_reduce")     # nisa.reduce_cmd
ACC_OPS = ("add", "maximum", "minimum", "multiply")        # what the registers combine with


def accumulate(rp, cmd, x, r: np.ndarray, writes, attrs, step, what: str, mask=None) -> None:
    """Apply `cmd` to the registers of the data tile `x`'s partitions; r is the activation's result
    (sets, *x.shape) before rounding to the destination's dtype; with a mask, only its elements count."""
    if cmd not in ACC_CMDS:
        raise StreamError(f"{what}: unknown reduce_cmd {cmd!r}")
    if cmd in ("reduce", "reset_reduce") and attrs.get("reduce") not in ACC_OPS:
        raise StreamError(f"{what}: unsupported reduce_op {attrs.get('reduce')!r} for the accumulator registers")
    if not rp.sets:          # a dry run (replay.Replayer.decode): checked, the registers are left alone
        if len(writes) > 1:
            rp._fits((x.partitions, 1), writes[1].shape, what)
            step.extra["reduce"] = True
        return
    if getattr(rp, "act_acc", None) is None:
        rp.act_acc = np.full((rp.sets, PARTITIONS), np.nan, dtype=np.float32)
    first = x.lo[x.tensor.pdim]
    rows = slice(first, first + x.partitions)
    if cmd in ("reset", "reset_reduce"):
        rp.act_acc[:, rows] = 0.0
    if cmd in ("reduce", "reset_reduce"):
        op = attrs.get("reduce")
        if op not in ACC_OPS:
            raise StreamError(f"{what}: unsupported reduce_op {op!r} for the accumulator registers")
        vals = ops.round_to(r, writes[0].tensor.dtype)
        where = {}
        if mask is not None and mask.size == np.prod(r.shape[1:]):
            where = {"where": mask.reshape(r.shape[1:])[None], "initial": ops.REDUCE_INITIAL.get(op, 0.0)}
            where["initial"] = 1.0 if op == "multiply" else where["initial"]
        with np.errstate(all="ignore"):
            part = ops.REDUCE[op](vals, axis=tuple(range(2, r.ndim)), **where)
            rp.act_acc[:, rows] = ops.BINARY[op](rp.act_acc[:, rows], part.reshape(rp.sets, -1))
    if len(writes) > 1:
        value = rp.act_acc[:, rows].reshape(rp.sets, x.partitions, 1)
        rp._fits(value.shape[1:], writes[1].shape, what)
        rp.write(writes[1], value, None)
        step.extra["reduce"] = True
