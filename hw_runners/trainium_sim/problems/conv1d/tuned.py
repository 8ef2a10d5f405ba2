import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def solution(img_ref, filter_ref, **kwargs):
    # Depthwise 1-D convolution along W (H = 1), channels on the partitions, NB images per tile.
    # The taps are split over three engines so that none of them limits before the DMA does:
    #   Scalar: acc = x_centre * f_centre  (activation with a per-partition scale)
    #   Tensor: psum = diag(f_w) @ x_shifted_w for the other taps, accumulated in PSUM (a diagonal
    #           stationary scales each channel's row; exact in fp32)
    #   Vector: out = acc + psum, one cycle per element because one operand is in PSUM.
    # The padding is two zeroed columns per image row; the next tile is loaded before the current one is
    # computed, since instructions issue in program order.
    W_pad_l, W_pad_r = kwargs["padding"][1]
    N, C, H, W = img_ref.shape
    C_f, _, H_f, W_f = filter_ref.shape
    P = nl.tile_size.pmax
    assert H == 1 and H_f == 1 and C_f == C and C % P == 0
    W_padded = W + W_pad_l + W_pad_r
    K1 = W_padded - W_f + 1
    F = nl.tile_size.gemm_moving_fmax           # 512 outputs per matmul
    assert K1 % F == 0
    NB = 2 if N % 2 == 0 else 1                 # images per tile: 2 x 8 KiB per partition
    centre = W_f // 2
    out = nl.ndarray((N, C, 1, K1), dtype=img_ref.dtype, buffer=nl.shared_hbm)
    f32 = nl.float32

    # All filters first (one small DMA, ahead of the big image loads in the queues), then per channel
    # tile and off-centre tap a diagonal matrix diag(f_w) for the Tensor engine.
    CT = C // P
    taps = nl.ndarray((P, CT, W_f), dtype=f32, buffer=nl.sbuf)
    f_c, f_t, f_w = nl.mgrid[0:P, 0:CT, 0:W_f]
    taps[f_c, f_t, f_w] = nl.load(filter_ref[f_t * P + f_c, 0, 0, f_w])
    i_k, i_m = nl.mgrid[0:P, 0:P]
    ident = nisa.affine_select(i_k - i_m == 0, nl.ones((P, P), dtype=f32), 0.0)
    diags = nl.ndarray((P, CT, W_f, P), dtype=f32, buffer=nl.sbuf)
    for ct in nl.static_range(CT):
        for w in nl.static_range(W_f):
            if w != centre:
                diags[:, ct, w, :] = nisa.tensor_scalar(ident, np.multiply, taps[:, ct, w:w + 1])
    side_taps = [w for w in range(W_f) if w != centre]
    i_c, i_n, i_w = nl.mgrid[0:P, 0:NB, 0:W]
    o_c, o_n, o_w = nl.mgrid[0:P, 0:NB, 0:K1]

    jobs = [(ct, nb) for ct in range(C // P) for nb in range(N // NB)]

    def load(job):
        ct, nb = job
        x = nl.ndarray((P, NB, W_padded), dtype=img_ref.dtype, buffer=nl.sbuf)
        if W_pad_l:
            x[:, :, 0:W_pad_l] = 0.0
        if W_pad_r:
            x[:, :, W_pad_l + W:W_padded] = 0.0
        x[i_c, i_n, W_pad_l + i_w] = nl.load(img_ref[nb * NB + i_n, ct * P + i_c, 0, i_w])
        return x

    pending = load(jobs[0])
    for j in nl.static_range(len(jobs)):
        ct, nb = jobs[j]
        x = pending
        if j + 1 < len(jobs):
            pending = load(jobs[j + 1])
        acc = nl.ndarray((P, NB, K1), dtype=f32, buffer=nl.sbuf)
        for n in nl.static_range(NB):
            acc[:, n, :] = nisa.activation(nl.copy, x[:, n, centre:centre + K1], scale=taps[:, ct, centre:centre + 1])
            for q in nl.static_range(K1 // F):
                ps = nl.ndarray((P, F), dtype=f32, buffer=nl.psum)
                for t, w in enumerate(side_taps):
                    if t == 0:
                        ps[...] = nisa.nc_matmul(diags[:, ct, w, :], x[:, n, q * F + w:(q + 1) * F + w])
                    else:
                        ps += nisa.nc_matmul(diags[:, ct, w, :], x[:, n, q * F + w:(q + 1) * F + w])
                acc[:, n, q * F:(q + 1) * F] = nisa.tensor_tensor(acc[:, n, q * F:(q + 1) * F], ps, np.add)
        nl.store(out[nb * NB + o_n, ct * P + o_c, 0, o_w], value=acc[o_c, o_n, o_w])
    return out
