"""Micro-benchmarks for the published NeuronCore-v2 rules of thumb (NKI Performance Guide, architecture
guide, DMA guides), written for calibration. Each kernel repeats its pattern `n` times so a calibration
can take the slope between two values of n (the time one repetition adds), free of load/store latency.

  scalar_chain        - Opt #5a: back-to-back 1-element ScalarE activations (identity with scale and bias),
                        each reading the previous one's output
  matvec              - Opt #7: [1, 128] x [128, 128] on TensorE with the short operand moving
                        (short_moving=True) or stationary
  reduce_partitions   - Opt #5b: two 64-partition tensor_reduce instructions per repetition
                        (vectorized=False) or one 128-partition instruction
  combine             - Opt #6: multiply by a per-partition scale, add a bias, exp: three instructions
                        (combined=False) or one nisa.activation; each repetition consumes the previous one's result
  dma_stream          - DMA size sweep: n independent [128, cols] fp32 loads (bytes per partition = 4 * cols)
"""
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def scalar_chain(x, n=1):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    v = nl.load(x[0:128, 0:1])
    scale = nl.load(x[0:128, 1:2])
    bias = nl.load(x[0:128, 2:3])
    for _ in nl.sequential_range(n):
        v = nisa.activation(op=nl.copy, data=v, scale=scale, bias=bias)
    nl.store(out[0:128, 0:1], value=v)
    return out


@nki.jit
def matvec(w, v, n=1, short_moving=True):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    w_t = nl.load(w[0:128, 0:128])           # the long operand
    v_t = nl.load(v[0:128, 0:1])             # the short one (one column)
    for _ in nl.affine_range(n):
        if short_moving:
            r = nisa.nc_matmul(w_t, v_t)     # result [128, 1]
        else:
            r = nisa.nc_matmul(v_t, w_t)     # result [1, 128]
    res = nl.copy(r, dtype=nl.float32)
    if short_moving:
        nl.store(out[0:128, 0:1], value=res)
    else:
        nl.store(out[0:1, 0:128], value=res)
    return out


@nki.jit
def reduce_partitions(x, n=1, vectorized=False):
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x[0:128, 0:512])
    for _ in nl.affine_range(n):
        r = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.sbuf)
        if vectorized:
            r[0:128, 0:1] = nisa.tensor_reduce(np.add, t[0:128, 0:512], axis=[1])
        else:
            r[0:64, 0:1] = nisa.tensor_reduce(np.add, t[0:64, 0:512], axis=[1])
            r[64:128, 0:1] = nisa.tensor_reduce(np.add, t[64:128, 0:512], axis=[1])
    nl.store(out[0:128, 0:1], value=r)
    return out


@nki.jit
def combine(x, n=1, combined=False):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    v = nl.load(x[0:128, 0:512])
    scale = nl.load(x[0:128, 512:513])
    bias = nl.load(x[0:128, 513:514])
    for _ in nl.sequential_range(n):
        if combined:
            v = nisa.activation(op=nl.exp, data=v, bias=bias, scale=scale)
        else:
            v = nl.exp(nl.add(nl.multiply(v, scale), bias))
    nl.store(out[0:128, 0:512], value=v)
    return out


@nki.jit
def dma_stream(x, n=1):
    rows, cols = x.shape
    out = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n):
        t = nl.load(x[i * 128:(i + 1) * 128, 0:cols])
    nl.store(out[0:128, 0:cols], value=t)
    return out
