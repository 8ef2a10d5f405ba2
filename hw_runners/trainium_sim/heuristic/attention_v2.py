"""The attention and sd-attention schedules of attention.py rendered as NKI v2 kernels (the nki2 ISA profile): the
loops, pipelining and tiles of attention_body (written once for both dialects), with the statements written the
v2 way by the dialect object V2 below. Every instruction writes the dst it is given, so a tile that v1 makes by
returning it is allocated first (nl.ndarray, partition axis first: no par_dim) and the instruction then writes
it; a PSUM tile's first matmul overwrites it and the next ones accumulate (nc_matmul's accumulate=None), so v1's
`acc[...] =` / `+=` pair is one nisa.nc_matmul; loads and stores are nisa.dma_copy (a DMA casts to the dst dtype);
v1's nl.copy (a Scalar-engine copy) is nisa.activation(op=nl.copy). What a knob changes is said in attention.py.
"""
from __future__ import annotations

from autocomp_zmq.hw_runners.trainium_sim.heuristic import attention_body
from autocomp_zmq.hw_runners.trainium_sim.heuristic.gemm_v2 import _evict


def _opt(**kw) -> str:
    return "".join(f", {k}={v}" for k, v in kw.items() if v)


class V2:
    """NKI v2: an operation is a function of its destination, giving the destination-passing call."""
    def par(self, p): return p

    def psum_dt(self, mdt):           # matmul results are fp32 in PSUM on trn2: a bf16 max pass keeps bf16 maxima
        return "nl.float32"

    def load(self, src, cast=False): return lambda d: f"nisa.dma_copy(dst={d}, src={src})"
    def copy(self, x, dtype="dt"): return lambda d: f"nisa.activation(dst={d}, op=nl.copy, data={x})"
    def tr(self, x): return lambda d: f"nisa.nc_transpose(dst={d}, data={x})"
    def mm(self, a, b): return lambda d: f"nisa.nc_matmul(dst={d}, stationary={a}, moving={b})"
    def memset(self, shape, value): return lambda d: f"nisa.memset(dst={d}, value={value})"
    def recip(self, x): return lambda d: f"nisa.reciprocal(dst={d}, data={x})"
    def tt(self, a, b, op, dtype): return lambda d: f"nisa.tensor_tensor(dst={d}, data1={a}, data2={b}, op={op})"
    def ts(self, x, op, operand): return lambda d: f"nisa.tensor_scalar(dst={d}, data={x}, op0={op}, operand0={operand})"

    def act(self, fn, x, dtype, bias=None, scale=None, red=None):
        if red:      # the row sums of the exponentials come with them (the Scalar engine's reduction)
            return lambda d: (f"nisa.activation_reduce(dst={d}, op={fn}, data={x}, reduce_op=nl.add, reduce_res={red}"
                              + _opt(bias=bias, scale=scale) + ")")
        return lambda d: f"nisa.activation(dst={d}, op={fn}, data={x}" + _opt(bias=bias, scale=scale) + ")"

    def reduce(self, op, x, dtype=None, negate=False, lead="", mid=" "):
        return lambda d: f"nisa.tensor_reduce(dst={d}, op={op}, data={x}, axis=1{_opt(negate=negate)}, keepdims=True)"

    def evict(self, engine, src, parity):
        return (lambda d: _evict("scalar" if engine == "copy" else engine, d, src, parity))

    def put(self, ind, dst, op, acc=False, c=""):       # acc: the matmul accumulates by itself
        return f"{ind}{op(dst.removesuffix('[...]'))}{c}\n"

    def let(self, ind, name, shape, dtype, op, c=""):   # every new tile of the schedules is in SBUF
        return f"{ind}{name} = nl.ndarray({shape}, dtype={dtype}, buffer=nl.sbuf)\n" + self.put(ind, name, op, c=c)

    def val(self, ind, name, shape, dtype, op): return self.let(ind, name, shape, dtype, op), name
    def store(self, ind, dst, src): return f"{ind}nisa.dma_copy(dst={dst}, src={src})\n"

    ROWS = "transposed before every matmul"
    def row_matmul(self, ind, q, k):
        """Scores of query rows [128, d] (qt=matmul): as v1's nl.matmul does, a Tensor-engine transpose of the
        rows and a copy before every matmul."""
        return (f"{ind}q_ps = small_ps()\n" + self.put(ind, "q_ps[0:d_head, 0:P]", self.tr(q))
                + self.let(ind, "q_t", "(d_head, P)", "dt", self.copy("q_ps[0:d_head, 0:P]"))
                + self.put(ind, "s_ps", self.mm("q_t", k)))

    def v_bigdma(self):
        """V in one DMA (key tile t holds keys p * n_t + t, as K), spread into the [P, n_t, DV] tiles by a copy."""
        return ("    v_all = nl.ndarray((P, n_t, d_head), dtype=dt, buffer=nl.sbuf)   # one DMA, keys as K\n"
                "    nisa.dma_copy(dst=v_all, src=v_ref.reshape((P, n_t, d_head)))\n"
                + self.put("    ", "vx[:, :, 0:d_head]", self.copy("v_all")))

    ACC = ("    def acc_mm(acc, t, p_t, v_t):           # [o | l] += P^T-tile x V-tile (key tile 0's overwrites)\n"
           "        nisa.nc_matmul(dst=acc, stationary=p_t, moving=v_t)\n\n")
    # v1's nl.max / nl.subtract / nl.exp / nl.sum / nl.reciprocal / nl.multiply, one nisa instruction each
    SOFTMAX = ("        row_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
               "        nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=scores, axis=1, keepdims=True)\n"
               "        nisa.tensor_scalar(dst=scores, data=scores, op0=nl.subtract, operand0=row_max)\n"
               "        e = nl.ndarray((P, seqlen), dtype=nl.float32, buffer=nl.sbuf)\n"
               "        nisa.activation(dst=e, op=nl.exp, data=scores)\n"
               "        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)\n"
               "        nisa.tensor_reduce(dst=row_sum, op=nl.add, data=e, axis=1, keepdims=True)\n"
               "        nisa.reciprocal(dst=row_sum, data=row_sum)\n"
               "        probs = nl.ndarray((P, seqlen), dtype=dt, buffer=nl.sbuf)\n"
               "        nisa.tensor_scalar(dst=probs, data=e, op0=nl.multiply, operand0=row_sum)\n")


V2_DIALECT = V2()


def body(s) -> str:
    return attention_body.body(s, V2_DIALECT)
