"""The Vector, Scalar and GpSimd instructions of the trusted replayer: elementwise, tensor_scalar, reductions,
activation with its accumulators, scans, batch-norm statistics, select, iota, gathers and fills. Mixed into
replay.Replayer, whose read/write they use; each checks its operands and writes its result."""
from __future__ import annotations

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim import ops
from autocomp_zmq.hw_runners.trainium_sim.accumulators import accumulate
from autocomp_zmq.hw_runners.trainium_sim.program import Access, StreamError, expr_array, mask_array



def _multiply_add_scan(prev: np.ndarray, d0: np.ndarray, d1: np.ndarray) -> np.ndarray:
    """out[i] = d0[i] * out[i-1] + d1[i] in fp32, rounding exactly as the step-by-step loop does. A run of
    columns where data0 is 1 everywhere is a running sum (1 * x is x, inf and nan included), accumulated in
    order in one pass; the other columns are stepped through (_stepped). Cumsum's forms (data0 all ones, or 0
    where a row restarts) take a few passes instead of one per column."""
    out = np.empty(d0.shape, dtype=np.float32)
    ones = (d0 == 1).reshape(-1, d0.shape[-1]).all(axis=0)
    i, n = 0, d0.shape[-1]
    while i < n:
        same = ones[i:] if ones[i] else ~ones[i:]
        j = i + int(np.argmin(same)) if not same.all() else n
        if ones[i]:
            run = np.add.accumulate(np.concatenate([prev[..., None], d1[..., i:j]], axis=-1), axis=-1,
                                    dtype=np.float32)
            out[..., i:j] = run[..., 1:]
        else:
            out[..., i:j] = _stepped(prev, d0[..., i:j], d1[..., i:j])
        prev, i = out[..., j - 1], j
    return out


def _stepped(prev: np.ndarray, d0: np.ndarray, d1: np.ndarray) -> np.ndarray:
    """The scan's columns one step each, as d0[..., i] * prev + d1[..., i] in fp32 (the same two roundings),
    over a copy with the columns laid out contiguously and each step multiplying and adding into its output
    column in place: no strided gathers or temporaries per column (they were most of a mamba evaluation)."""
    c0 = np.ascontiguousarray(np.moveaxis(d0, -1, 0))
    c1 = np.ascontiguousarray(np.moveaxis(d1, -1, 0))
    out = np.empty(c1.shape, dtype=np.float32)
    for i in range(len(out)):
        prev = np.multiply(c0[i], prev, out=out[i])
        np.add(prev, c1[i], out=prev)
    return np.moveaxis(out, 0, -1)

class EngineOps:
    def _ew(self, step, reads, writes, attrs, mask, what):
        fn = attrs.get("fn")
        vals = ops.free_aligned([self.read(r) if isinstance(r, Access) else r for r in reads])
        if any(v is None for v in vals):
            raise StreamError(f"{what}: missing operand")
        with np.errstate(all="ignore"):
            if fn in ops.UNARY and len(vals) == 1:
                r = ops.UNARY[fn](np.asarray(vals[0], dtype=np.float32))
            elif fn in ops.BINARY and len(vals) == 2:
                r = ops.BINARY[fn](*vals)
            elif fn == "where" and len(vals) == 3:
                r = np.where(np.asarray(vals[0]) != 0, vals[1], vals[2])
            else:
                raise StreamError(f"{what}: unsupported function {fn!r} with {len(vals)} operands")
        self._fits(np.shape(r)[1:], writes[0].shape, what)
        self.write(writes[0], r, mask)

    def _tensor_scalar(self, step, reads, writes, attrs, mask, what):
        """tensor_scalar, scalar_tensor_tensor (tensor1: operand1 is a whole tile) and tensor_scalar_reduce."""
        x = self.read(reads[0])
        r = x
        for i, key in enumerate(("op0", "op1")):
            if key not in attrs:
                break
            if attrs[key] not in ops.BINARY or len(reads) < i + 2:
                raise StreamError(f"{what}: unsupported operator {attrs[key]!r}")
            operand = reads[i + 1]
            if key == "op1" and attrs.get("tensor1") and isinstance(operand, Access):
                self._fits(operand.shape, reads[0].shape, what)
                operand = self.read(operand)
                step.extra["tensor1"] = True
            elif isinstance(operand, Access):
                if ops.core_shape(operand.shape) not in ((1,), (reads[0].partitions,)):
                    raise StreamError(f"{what}: a tile operand must be per-partition, shape ({reads[0].partitions}, 1)")
                operand = ops.per_partition(self.read(operand), x.ndim)
            with np.errstate(all="ignore"):
                f = ops.BINARY[attrs[key]]
                r = f(operand, r) if attrs.get("reverse" + key[-1]) else f(r, operand)
        self.write(writes[0], r, mask)
        if len(writes) > 1:
            self._reduce_into(writes[1], r, writes[0].tensor.dtype, attrs.get("reduce"), step, what)

    def _reduce_into(self, dst: Access, r: np.ndarray, dtype: str, op, step, what) -> None:
        """The free-axis reduction some instructions also write (activation's, tensor_scalar_reduce's)."""
        if op not in ops.REDUCE:
            raise StreamError(f"{what}: unsupported reduce_op {op!r}")
        with np.errstate(all="ignore"):
            out = ops.REDUCE[op](ops.round_to(r, dtype), axis=tuple(range(2, r.ndim)), keepdims=True)
        out = out.reshape(out.shape[:2] + (1,))
        self._fits(out.shape[1:], dst.shape, what)
        self.write(dst, out, None)
        step.extra["reduce"] = True

    def _reduce(self, step, reads, writes, attrs, mask, what):
        (x,), (dst,) = reads, writes
        axes, op = attrs.get("axes"), attrs.get("op")
        if op not in ops.REDUCE or not isinstance(axes, list) or not axes or \
                not all(isinstance(a, int) and 0 < a < len(x.shape) for a in axes):
            raise StreamError(f"{what}: unsupported reduction {op!r} over axes {axes} (free axes only)")
        v = self.read(x)
        axis = tuple(a + 1 for a in axes)
        masked = {} if mask is None else {"where": mask[None], "initial": ops.REDUCE_INITIAL.get(op)}
        masked = {k: w for k, w in masked.items() if w is not None}
        with np.errstate(all="ignore"):
            r = ops.REDUCE[op](v, axis=axis, keepdims=True, **masked)
        # Without keepdims the reduced axes go, but a tile keeps at least one free axis: (P,) is (P, 1).
        kept = [1 if d in axes else n for d, n in enumerate(x.shape) if attrs.get("keepdims") or d not in axes] + [1]
        kept = kept[:max(2, len(kept) - 1)]
        r = r.reshape((self.sets, *kept))
        if attrs.get("negate"):
            r = -r
        self._fits(r.shape[1:], dst.shape, what)
        rows = None if mask is None else np.broadcast_to(mask.any(axis=tuple(axes), keepdims=True).reshape(kept),
                                                         dst.shape)
        self.write(dst, r, rows)
        step.free = x.free

    def _activation(self, step, reads, writes, attrs, mask, what):
        x, scale, bias = (reads + [None, None])[:3]
        fn = attrs.get("fn")
        if fn not in ops.UNARY:
            raise StreamError(f"{what}: unsupported activation function {fn!r}")
        v = self.read(x)
        for name, operand in (("scale", scale), ("bias", bias)):
            if isinstance(operand, Access) and ops.core_shape(operand.shape) not in ((1,), (x.partitions,)):
                raise StreamError(f"{what}: {name} must be a number or a ({x.partitions}, 1) tile")
        s = ops.per_partition(self.read(scale), v.ndim) if isinstance(scale, Access) else \
            (1.0 if scale is None else scale)
        b = ops.per_partition(self.read(bias), v.ndim) if isinstance(bias, Access) else 0.0
        with np.errstate(all="ignore"):
            r = ops.UNARY[fn](v * s + b)
        self.write(writes[0], r, mask)
        if "reduce_cmd" in attrs:
            accumulate(self, attrs["reduce_cmd"], x, r, writes, attrs, step, what, mask)
        elif len(writes) > 1:
            self._reduce_into(writes[1], r, writes[0].tensor.dtype, attrs.get("reduce"), step, what)

    def _scan(self, step, reads, writes, attrs, mask, what):
        a, b, init = reads
        op0, op1 = attrs.get("op0"), attrs.get("op1")
        if op0 not in ops.BINARY or op1 not in ops.BINARY:
            raise StreamError(f"{what}: unsupported operators {op0!r}, {op1!r}")
        d0, d1 = np.broadcast_arrays(*ops.free_aligned([self.read(a), self.read(b)]))
        shape = d0.shape                        # the scan runs over all free axes of a partition, in order
        flat = shape[:2] + (int(np.prod(shape[2:])),)      # explicit: a dry run has zero sets
        d0, d1 = d0.reshape(flat), d1.reshape(flat)
        prev = (self.read(init).reshape(d0.shape[:2]) if isinstance(init, Access)
                else np.full(d0.shape[:-1], init, np.float32))
        f0, f1 = ops.BINARY[op0], ops.BINARY[op1]
        out = np.empty(d0.shape, dtype=np.float32)
        r0, r1 = bool(attrs.get("reverse0")), bool(attrs.get("reverse1"))
        with np.errstate(all="ignore"):
            if op0 == "add" and op1 == "add":
                out = prev[..., None] + np.cumsum(d0 + d1, axis=-1, dtype=np.float32)
            elif op0 == "multiply" and op1 == "add" and d0.dtype == d1.dtype == np.float32:
                out = _multiply_add_scan(prev.astype(np.float32), d0, d1)
            else:   # out[i] = op1(op0(data0[i], out[i-1]), data1[i]); reverseN swaps opN's operands
                for i in range(d0.shape[-1]):
                    a = f0(prev, d0[..., i]) if r0 else f0(d0[..., i], prev)
                    prev = f1(d1[..., i], a) if r1 else f1(a, d1[..., i])
                    out[..., i] = prev
        self.write(writes[0], out.reshape(shape), mask)

    def _bn_stats(self, step, reads, writes, attrs, mask, what):
        (x,), (dst,) = reads, writes
        if x.free > 512 or len(x.shape) != 2 or dst.shape != (x.partitions, 6):
            raise StreamError(f"{what}: bn_stats takes a (P, F<=512) tile and gives (P, 6), got {x.shape}")
        v = self.read(x).astype(np.float64)
        keep = np.ones(x.shape, dtype=bool) if mask is None else mask      # the elements counted
        count = keep.sum(axis=-1)
        with np.errstate(all="ignore"):
            mean = np.where(keep, v, 0.0).sum(axis=-1) / count
            m2 = np.where(keep, (v - mean[..., None]) ** 2, 0.0).sum(axis=-1)
        stats = np.zeros((self.sets, x.partitions, 6))
        stats[..., 0], stats[..., 1], stats[..., 2] = count, mean, m2
        self.write(dst, stats, None if mask is None else np.broadcast_to((count > 0)[:, None], dst.shape))
        step.free = x.free

    def _bn_aggr(self, step, reads, writes, attrs, mask, what):
        (x,), (dst,) = reads, writes
        if len(x.shape) != 2 or x.shape[1] % 6 or dst.shape != (x.partitions, 2):
            raise StreamError(f"{what}: bn_aggr takes (P, 6*k) bn_stats results and gives (P, 2), got {x.shape}")
        s = self.read(x).astype(np.float64).reshape(self.sets, x.partitions, x.shape[1] // 6, 6)
        n, mean, m2 = s[..., 0], s[..., 1], s[..., 2]
        total = n.sum(axis=-1)
        if (n <= 0).any():
            raise StreamError(f"{what}: its input is not bn_stats output")
        mu = (n * mean).sum(axis=-1) / total
        var = (m2 + n * (mean - mu[..., None]) ** 2).sum(axis=-1) / total
        self.write(dst, np.stack([mu, var], axis=-1), mask)

    def _select(self, step, reads, writes, attrs, mask, what):
        x, value = reads
        pred = mask_array(attrs.get("pred"), x.shape, what)
        self.write(writes[0], np.where(pred, self.read(x), value), mask)

    def _iota(self, step, reads, writes, attrs, mask, what):
        dst = writes[0]
        v = np.broadcast_to(expr_array(attrs.get("expr"), len(dst.shape), what), dst.shape)
        self.write(dst, v.astype(np.float64), mask)

    def _gather(self, step, reads, writes, attrs, mask, what):
        """nisa.nc_n_gather: in each partition, dst[p, j] = data[p, indices[p, j]] over the flattened free
        elements of data and indices (GpSimd; all three in SBUF; indices uint32; dst of data's dtype; values
        in [0, data's elements per partition)), per
        https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_n_gather.html"""
        (data, idx), (dst,) = reads, writes
        for role, a in (("data", data), ("indices", idx), ("dst", dst)):
            if a.tensor.buffer != "sbuf" or not a.axis0_is_partition:
                raise StreamError(f"{what}: {role} must be an SBUF tile whose first axis is its partition dimension")
        if idx.tensor.dtype != "uint32" or dst.tensor.dtype != data.tensor.dtype:
            raise StreamError(f"{what}: indices must be uint32 (got {idx.tensor.dtype}) and dst of data's dtype "
                              f"(got {dst.tensor.dtype} and {data.tensor.dtype})")
        if not data.shape[0] == idx.shape[0] == dst.shape[0] or idx.free != dst.free:
            raise StreamError(f"{what}: data {data.shape}, indices {idx.shape} and dst {dst.shape} must share the "
                              f"partition size, and dst hold as many elements per partition as indices")
        flat = (self.sets, data.shape[0])
        v = self.read(data).reshape(*flat, data.free)
        i = self.read(idx).reshape(*flat, idx.free)
        bad = (i < 0) | (i >= data.free)
        if bad.any():      # the hardware's result is unspecified (nl.gather_flattened: "garbage values")
            raise StreamError(f"{what}: an index {int(i[bad][0])} is outside [0, {data.free}), the elements per "
                              f"partition of data (the indices' values must be within that range)")
        self.write(dst, np.take_along_axis(v, i.astype(np.intp), axis=-1).reshape(self.sets, *dst.shape), mask)

    def _memset(self, step, reads, writes, attrs, mask, what):
        value = attrs.get("value")
        if not isinstance(value, float):
            raise StreamError(f"{what}: a fill value must be a number")
        self.write(writes[0], np.float32(value), mask)

    @staticmethod
    def _fits(shape, dst_shape, what) -> None:
        try:
            ok = np.broadcast_shapes(tuple(shape), tuple(dst_shape)) == tuple(dst_shape) \
                or ops.core_shape(shape) == ops.core_shape(dst_shape)
        except ValueError:
            ok = ops.core_shape(shape) == ops.core_shape(dst_shape)
        if not ok:
            raise StreamError(f"{what}: a result of shape {tuple(shape)} does not fit the destination {dst_shape}")
