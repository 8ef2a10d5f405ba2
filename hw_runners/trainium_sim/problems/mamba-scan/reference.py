"""Mamba-2's selective scan, one sequence (Autocomp's trn-internal workload 6), on the host-prepared inputs of
harnesses/trn-internal/6_mamba_scan_test.py (prepare_scan_inputs): per head h, head channel p and state s,
state_t = exp(dt_t * A_h) * state_{t-1} + dt_t * B_t[s] * x_t[p], and y_t[p] = sum_s state_t * C_t[s] + D_h * x_t[p]
(the harness's selective_scan_reference), in the kernel's flattened layouts:

    dA_exp_t (NH, SL)            exp(dt * A), head-major
    dBx_t    (HD * SS * NH, SL)  row p * SS * NH + s * NH + h
    C_t      (SS * NH, SL)       row s * NH + h
    Dx_t, x_t (HD * NH, SL)      row p * NH + h
    y        (HD * NH, SL)       row p * NH + h;  final_state (HD * SS * NH, 1) as dBx_t's rows
"""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: x, B, C standard normal, dt uniform in [0, 0.1), A = -(1 .. NH), D = 1; then packed
    nh, sl = shapes["dA_exp_t"]
    hd, ss = shapes["hd_range"][0], shapes["ss_range"][0]
    x = rng.standard_normal((sl, nh, hd))
    dt = 0.1 * rng.random((sl, nh))
    a = -np.arange(1, nh + 1, dtype=np.float64)
    b = rng.standard_normal((sl, nh, ss))
    c = rng.standard_normal((sl, nh, ss))
    d = np.ones(nh)
    dbx = (dt[:, :, None] * b)[:, :, None, :] * x[:, :, :, None]          # (SL, NH, HD, SS)
    flat = lambda t: np.ascontiguousarray(t.reshape(sl, -1).T).astype(np.float32)  # noqa: E731  (rows, SL)
    return {"dA_exp_t": flat(np.exp(dt * a)), "dBx_t": flat(dbx.transpose(0, 2, 3, 1)),
            "C_t": flat(c.transpose(0, 2, 1)), "Dx_t": flat((d[None, :, None] * x).transpose(0, 2, 1)),
            "x_t": flat(x.transpose(0, 2, 1)), "hd_range": np.zeros(hd, np.float32),
            "ss_range": np.zeros(ss, np.float32)}


def reference(dA_exp_t, dBx_t, C_t, Dx_t, x_t, hd_range, ss_range):
    nh, sl = dA_exp_t.shape
    hd, ss = hd_range.shape[0], ss_range.shape[0]
    da = dA_exp_t.astype(np.float64)
    dbx = dBx_t.astype(np.float64).reshape(hd, ss, nh, sl)
    c = C_t.astype(np.float64).reshape(ss, nh, sl)
    state = np.zeros((hd, ss, nh))
    y = np.zeros((hd, nh, sl))
    for t in range(sl):
        state = da[None, None, :, t] * state + dbx[:, :, :, t]
        y[:, :, t] = np.einsum("psh,sh->ph", state, c[:, :, t])
    return y.reshape(hd * nh, sl) + Dx_t, state.reshape(-1, 1)
