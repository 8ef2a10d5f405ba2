"""The three kernels of the NKI "Fused Mamba" tutorial (the selective-scan core of a Mamba layer),
re-expressed for calibration with the tutorial's loop nests and instruction choices as published with
its latencies (SDK 2.20-2.26, trn1), written anew.

Inputs: delta, u [batch, channels, seq]; A [channels, states]; B, C [batch, states, seq] (float32).
Output [batch, channels, seq]: for every state, deltaA = exp(delta * A), deltaBu = delta * u * B, a scan
h[t] = deltaA[t] * h[t-1] + deltaBu[t], then the sum over states of C * h.

  v1 - loops batch, state, channel tile: delta and u are reloaded for every state
  v2 - loops batch, channel tile, state: delta and u loaded once per channel tile (loop reordering)
  v3 - v2 with the sequence also tiled (512 columns), the scan carried between sequence tiles
"""
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128


@nki.jit
def v1(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    _, states = A.shape
    assert channels % P == 0
    tiles = channels // P
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        total = nl.zeros((tiles, nl.par_dim(P), seq), dtype=delta.dtype)
        for s in nl.affine_range(states):
            for t in nl.affine_range(tiles):
                c0 = t * P
                delta_t = nl.load(delta[b, c0:c0 + P, 0:seq])
                a_col = nl.load(A[c0:c0 + P, s])
                d_a = nisa.activation(op=nl.exp, data=delta_t, scale=a_col)     # exp(delta * A), ScalarE
                u_t = nl.load(u[b, c0:c0 + P, 0:seq])
                b_row = nl.load(B[b, s:s + 1, 0:seq])
                d_u = nisa.tensor_tensor(delta_t, u_t, op=nl.multiply)
                d_bu = nisa.tensor_tensor(d_u, b_row.broadcast_to((P, seq)), op=nl.multiply)
                h = nisa.tensor_tensor_scan(d_a, d_bu, initial=0, op0=np.multiply, op1=np.add)
                c_row = nl.load(C[b, s:s + 1, 0:seq])
                contrib = nisa.tensor_tensor(h, c_row.broadcast_to((P, seq)), op=nl.multiply)
                total[t, 0:P, 0:seq] += contrib
        for t in nl.affine_range(tiles):
            nl.store(out[b, t * P:(t + 1) * P, 0:seq], total[t, 0:P, 0:seq])
    return out


@nki.jit
def v2(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    _, states = A.shape
    assert channels % P == 0
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        for t in nl.affine_range(channels // P):
            c0 = t * P
            total = nl.zeros((nl.par_dim(P), seq), dtype=delta.dtype)
            delta_t = nl.load(delta[b, c0:c0 + P, 0:seq])      # reused by every state
            u_t = nl.load(u[b, c0:c0 + P, 0:seq])
            for s in nl.affine_range(states):
                a_col = nl.load(A[c0:c0 + P, s])
                d_a = nisa.activation(op=nl.exp, data=delta_t, scale=a_col)
                b_row = nl.load(B[b, s:s + 1, 0:seq])
                d_u = nisa.tensor_tensor(delta_t, u_t, op=nl.multiply)
                d_bu = nisa.tensor_tensor(d_u, b_row.broadcast_to((P, seq)), op=nl.multiply)
                h = nisa.tensor_tensor_scan(d_a, d_bu, initial=0, op0=np.multiply, op1=np.add)
                c_row = nl.load(C[b, s:s + 1, 0:seq])
                contrib = nisa.tensor_tensor(h, c_row.broadcast_to((P, seq)), op=nl.multiply)
                total[0:P, 0:seq] += contrib
            nl.store(out[b, c0:c0 + P, 0:seq], total[0:P, 0:seq])
    return out


@nki.jit
def v3(delta, u, A, B, C):
    batch, channels, seq = delta.shape
    _, states = A.shape
    width = 512                                   # sequence tile (the tutorial's empirical choice)
    assert channels % P == 0 and seq % width == 0
    out = nl.ndarray((batch, channels, seq), dtype=delta.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        for t in nl.affine_range(channels // P):
            c0 = t * P
            total = nl.zeros((nl.par_dim(P), seq), dtype=delta.dtype)
            delta_t = nl.load(delta[b, c0:c0 + P, 0:seq])
            u_t = nl.load(u[b, c0:c0 + P, 0:seq])
            for s in nl.affine_range(states):
                a_col = nl.load(A[c0:c0 + P, s])
                carry = nl.zeros((P, 1), dtype=delta_t.dtype)      # the scan's state between sequence tiles
                for j in nl.static_range(seq // width):
                    x0 = j * width
                    d_a = nisa.activation(op=nl.exp, data=delta_t[0:P, x0:x0 + width], scale=a_col)
                    b_row = nl.load(B[b, s:s + 1, x0:x0 + width])
                    d_u = nisa.tensor_tensor(delta_t[0:P, x0:x0 + width], u_t[0:P, x0:x0 + width], op=nl.multiply)
                    d_bu = nisa.tensor_tensor(d_u, b_row.broadcast_to((P, width)), op=nl.multiply)
                    h = nisa.tensor_tensor_scan(d_a, d_bu, initial=carry, op0=np.multiply, op1=np.add)
                    carry[...] = h[0:P, width - 1]
                    c_row = nl.load(C[b, s:s + 1, x0:x0 + width])
                    contrib = nisa.tensor_tensor(h, c_row.broadcast_to((P, width)), op=nl.multiply)
                    total[0:P, x0:x0 + width] += contrib
            nl.store(out[b, c0:c0 + P, 0:seq], total[0:P, 0:seq])
    return out
