"""Autocomp's newer Trainium workloads as trainium-sim problems (tags autocomp-e2e, autocomp-internal): each loads
with the signature and shapes of its harness and a description naming where it comes from, and each reference
agrees with a direct computation (loops, or another formulation) on a small input."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from autocomp_zmq.hw_runners.trainium_sim.workloads import load_problems, load_specs

PROBLEMS = Path(__file__).resolve().parents[2] / "hw_runners" / "trainium_sim" / "problems"

# problem -> (tag, the harness it comes from, the kernel's parameters as the harness passes them)
WORKLOADS = {
    "llama-mlp-decode": ("autocomp-e2e", "trn-e2e/3_llama_mlp_decode_nki.py", "lhs, up_w, gate_w, down_w"),
    "llama-mlp-decode-b32": ("autocomp-e2e", "trn-e2e/11_llama_mlp_decode_b32_nki.py", "x_dev, up_w, gate_w, down_w"),
    "llama-attention-decode": ("autocomp-e2e", "trn-e2e/5_llama_attention_nki.py",
                               "Q, K, V, past_k, past_v, attention_mask"),
    "llama-attention-decode-b32": ("autocomp-e2e", "trn-e2e/9_llama_attention_b32_nki.py",
                                   "Q, K, V, past_key_value, attention_mask"),
    "llama-logits-decode": ("autocomp-e2e", "trn-e2e/7_llama_logits_nki.py", "hidden_states, lm_head_weight"),
    "llama-logits-decode-b32": ("autocomp-e2e", "trn-e2e/13_llama_logits_b32_nki.py", "hidden_states, lm_head_weight"),
    "triangle-attention": ("autocomp-internal", "trn-internal/3_triattn_test.py", "q, k, v, bias, scale"),
    "triangle-multiply": ("autocomp-internal", "trn-internal/4_trimul_test.py", "a, b"),
    "fft256": ("autocomp-internal", "trn-internal/5_fft256_test.py",
               "X_real_hbm, X_imag_hbm, W_128_real_hbm, W_128_imag_hbm, twiddle_real_hbm, twiddle_imag_hbm"),
    "mamba-scan": ("autocomp-internal", "trn-internal/6_mamba_scan_test.py",
                   "dA_exp_t, dBx_t, C_t, Dx_t, x_t, hd_range, ss_range"),
    "trotter-tfim": ("autocomp-internal", "trn-internal/7_trotter_test.py",
                     ("psi_real_in, psi_imag_in, zz_phase_real, zz_phase_imag, cos_val_in, sin_val_in, n_steps_dummy, "
                      "rx_mat_rr_T_in, rx_mat_ri_T_in, rx_mat_ir_T_in, rx_mat_ii_T_in, free_xor_indices_in")),
    "deltanet-recurrent": ("autocomp-internal", "trn-internal/8_deltanet_recurrent_test.py",
                           "query, key, value, g_in, beta_in"),
    "openfold3-trimul": ("autocomp-internal", "trn-internal/10_openfold3_trimul_test.py", "a_ki, b_kj"),
    "flashvsr-attention": ("autocomp-internal", "trn-internal/12_flashvsr_fp32attn_test.py", "q, k, v, scale"),
    "gemm-bf16": ("autocomp-internal", "trn-internal/15_gemm_test.py", "a_t_hbm, b_hbm"),
}


def ref(name: str):
    spec = importlib.util.spec_from_file_location(f"ref_{name.replace('-', '_')}", PROBLEMS / name / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def softmax(x):
    e = np.exp(np.asarray(x, dtype=np.float64) - np.max(x))
    return e / e.sum()


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_each_problem_loads_as_its_harness_defines_it(name):
    tag, harness, params = WORKLOADS[name]
    spec = load_specs(PROBLEMS)[name]
    problem = next(p for p in load_problems("trainium-sim", PROBLEMS) if p.name == name)
    assert problem.tags == (tag,) and "paper" not in problem.tags
    assert spec.signature.replace("\n", " ") == f"solution({params})"
    assert f"harnesses/{harness}" in problem.description and "Autocomp's" in problem.description
    assert "github.com/ucb-bar/autocomp" in problem.description
    inputs = spec.make_inputs(0)
    assert [tuple(a.shape) for a in inputs.values()] == [t.shape for t in spec.inputs]
    got = spec.reference(inputs)
    assert [g.shape for g in got] == [t.shape for t in spec.outputs] and all(np.isfinite(g).all() for g in got)


def test_the_paper_problems_are_listed_apart():
    tags = {p.name: p.tags for p in load_problems("trainium-sim", PROBLEMS)}
    assert {n for n, t in tags.items() if any(x.startswith("autocomp-") for x in t)} == set(WORKLOADS)


def test_bf16_rounds_to_nearest_even():
    bf16 = ref("llama-mlp-decode").bf16
    one = 1.0
    assert bf16(one + 2 ** -8) == one                   # a tie: to the even neighbour
    assert bf16(one + 3 * 2 ** -8) == one + 2 ** -6     # a tie: up to the even one
    assert bf16(one + 2 ** -8 + 2 ** -12) == one + 2 ** -7


@pytest.mark.parametrize("name, xname", [("llama-mlp-decode", "lhs"), ("llama-mlp-decode-b32", "x_dev")])
def test_mlp_reference_rounds_where_the_harness_kernel_rounds(name, xname):
    rng = np.random.default_rng(1)
    x, up, gate, down = (rng.standard_normal(s) for s in [(2, 1, 8), (8, 16), (8, 16), (16, 8)])
    bf16 = ref(name).bf16
    want = np.zeros((2, 1, 8))
    for b in range(2):
        act = []
        for j in range(16):
            u = bf16(sum(x[b, 0, k] * up[k, j] for k in range(8)))
            g = bf16(sum(x[b, 0, k] * gate[k, j] for k in range(8)))
            act.append(bf16(g / (1 + np.exp(-g)) * u))
        want[b, 0] = [sum(act[j] * down[j, n] for j in range(16)) for n in range(8)]
    got = ref(name).reference(**{xname: x, "up_w": up, "gate_w": gate, "down_w": down})
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _attention_direct(q, keys, vals, k_new, v_new, visible):
    """One query head: softmax over the visible cache positions and the new token, by loops."""
    scores = [q @ keys[s] / np.sqrt(q.size) for s in range(len(keys)) if visible[s]] + [q @ k_new / np.sqrt(q.size)]
    rows = [vals[s] for s in range(len(keys)) if visible[s]] + [v_new]
    return sum(w * r for w, r in zip(softmax(scores), rows))


def test_attention_references_against_loops():
    rng = np.random.default_rng(2)
    b, s, d = 2, 6, 4
    Q, K, V = rng.standard_normal((b, 16, 1, d)), rng.standard_normal((b, 4, 1, d)), rng.standard_normal((b, 4, 1, d))
    pk, pv = rng.standard_normal((b, 4, s, d)), rng.standard_normal((b, 4, s, d))
    mask = rng.integers(0, 2, (b, 16, 1, s)).astype(np.uint8)
    want = np.array([[[_attention_direct(Q[i, h, 0], pk[i, h // 4], pv[i, h // 4], K[i, h // 4, 0], V[i, h // 4, 0],
                                         mask[i, h, 0])] for h in range(16)] for i in range(b)])
    got = ref("llama-attention-decode-b32").reference(Q, K, V, np.stack([pk, pv]), mask)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    # batch 1: one mask row for every head
    one = mask[:1, :1]
    want1 = np.array([[[_attention_direct(Q[0, h, 0], pk[0, h // 4], pv[0, h // 4], K[0, h // 4, 0], V[0, h // 4, 0],
                                          one[0, 0, 0])] for h in range(16)]])
    got1 = ref("llama-attention-decode").reference(Q[:1], K[:1], V[:1], pk[:1], pv[:1], one)
    np.testing.assert_allclose(got1, want1, rtol=1e-10)


def test_the_masks_are_fair_coin_bytes():
    m = load_specs(PROBLEMS)["llama-attention-decode-b32"].make_inputs(3)["attention_mask"]
    assert set(np.unique(m)) == {0, 1} and 0.48 < m.mean() < 0.52


def test_products_against_loops():
    rng = np.random.default_rng(4)
    h, w = rng.standard_normal((2, 1, 5)), rng.standard_normal((5, 3))
    want = [[[sum(h[b, 0, k] * w[k, n] for k in range(5)) for n in range(3)]] for b in range(2)]
    np.testing.assert_allclose(ref("llama-logits-decode").reference(h, w), want, rtol=1e-12)
    a, bb = rng.standard_normal((4, 4, 3)), rng.standard_normal((4, 4, 3))
    want = [[[sum(a[i, k, d] * bb[j, k, d] for k in range(4)) for d in range(3)] for j in range(4)] for i in range(4)]
    np.testing.assert_allclose(ref("triangle-multiply").reference(a, bb), want, rtol=1e-12)
    m1, m2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    want = [[sum(m1[k, i] * m2[k, j] for k in range(5)) for j in range(4)] for i in range(3)]
    np.testing.assert_allclose(ref("openfold3-trimul").reference(m1, m2), want, rtol=1e-12)
    np.testing.assert_allclose(ref("gemm-bf16").reference(m1, m2), want, rtol=1e-12)


def test_triangle_attention_against_loops():
    rng = np.random.default_rng(5)
    n, heads, d = 4, 2, 3
    q, k, v = (rng.standard_normal((n, n, heads * d)) for _ in range(3))
    bias, scale = rng.standard_normal((n, n, heads)), 0.7
    want = np.zeros((n, n, heads * d))
    for i in range(n):
        for h in range(heads):
            c = slice(h * d, (h + 1) * d)
            for j in range(n):
                w = softmax([scale * q[i, j, c] @ k[i, kk, c] + bias[j, kk, h] for kk in range(n)])
                want[i, j, c] = sum(w[kk] * v[i, kk, c] for kk in range(n))
    np.testing.assert_allclose(ref("triangle-attention").reference(q, k, v, bias, scale), want, rtol=1e-10)


def test_flashvsr_attention_against_loops():
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((1, 3, 4)), rng.standard_normal((1, 4, 5)), rng.standard_normal((1, 5, 4))
    want = [[sum(w * v[0, j] for j, w in enumerate(softmax([0.5 * q[0, i] @ k[0, :, j] for j in range(5)])))
             for i in range(3)]]
    np.testing.assert_allclose(ref("flashvsr-attention").reference(q, k, v, 0.5), want, rtol=1e-10)


def test_fft_reference_is_the_dft_and_its_inputs_make_the_radix2_split():
    x = np.random.default_rng(7).standard_normal((3, 8))
    yr, yi = ref("fft256").reference(x, np.zeros_like(x), None, None, None, None)
    dft = np.exp(-2j * np.pi * np.outer(np.arange(8), np.arange(8)) / 8)
    np.testing.assert_allclose(yr + 1j * yi, x @ dft.T, atol=1e-12)
    # the harness's algorithm on make_inputs's DFT matrix and twiddles gives the same transform
    inp = load_specs(PROBLEMS)["fft256"].make_inputs(8)
    xc = inp["X_real_hbm"] + 1j * inp["X_imag_hbm"]
    w = inp["W_128_real_hbm"] + 1j * inp["W_128_imag_hbm"]
    tw = inp["twiddle_real_hbm"] + 1j * inp["twiddle_imag_hbm"]
    even, odd = xc[:, 0::2] @ w.T, (xc[:, 1::2] @ w.T) * tw
    yr, yi = ref("fft256").reference(*inp.values())
    np.testing.assert_allclose(np.concatenate([even + odd, even - odd], axis=1), yr + 1j * yi, atol=2e-3)
    assert not inp["X_real_hbm"][64:].any() and not inp["X_imag_hbm"].any()


def test_mamba_scan_against_the_unpacked_recurrence():
    rng = np.random.default_rng(9)
    nh, sl, hd, ss = 3, 5, 2, 4
    x, dt = rng.standard_normal((sl, nh, hd)), 0.1 * rng.random((sl, nh))
    a, b, c, d = -np.arange(1.0, nh + 1), rng.standard_normal((sl, nh, ss)), rng.standard_normal((sl, nh, ss)), \
        rng.uniform(0.5, 2, nh)
    packed = {"dA_exp_t": np.zeros((nh, sl)), "dBx_t": np.zeros((hd * ss * nh, sl)), "C_t": np.zeros((ss * nh, sl)),
              "Dx_t": np.zeros((hd * nh, sl)), "x_t": np.zeros((hd * nh, sl))}
    state, y = np.zeros((nh, hd, ss)), np.zeros((hd * nh, sl))
    for t in range(sl):
        for h in range(nh):
            packed["dA_exp_t"][h, t] = np.exp(dt[t, h] * a[h])
            for s in range(ss):
                packed["C_t"][s * nh + h, t] = c[t, h, s]
            for p in range(hd):
                packed["Dx_t"][p * nh + h, t], packed["x_t"][p * nh + h, t] = d[h] * x[t, h, p], x[t, h, p]
                for s in range(ss):
                    packed["dBx_t"][p * ss * nh + s * nh + h, t] = dt[t, h] * b[t, h, s] * x[t, h, p]
                    state[h, p, s] = np.exp(dt[t, h] * a[h]) * state[h, p, s] + dt[t, h] * b[t, h, s] * x[t, h, p]
                y[p * nh + h, t] = state[h, p] @ c[t, h] + d[h] * x[t, h, p]
    got_y, got_state = ref("mamba-scan").reference(**packed, hd_range=np.zeros(hd), ss_range=np.zeros(ss))
    np.testing.assert_allclose(got_y, y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_state[:, 0], [state[h, p, s] for p in range(hd) for s in range(ss)
                                                 for h in range(nh)], rtol=1e-10)


def test_deltanet_against_its_matrix_form():
    spec = load_specs(PROBLEMS)["deltanet-recurrent"]
    inp = spec.make_inputs(10)
    q, k, v, g, beta = (inp[n].astype(np.float64) for n in ("query", "key", "value", "g_in", "beta_in"))
    assert (g < 0).all() and ((beta > 0) & (beta < 1)).all() and (g == g[:, :1]).all()
    s, out = np.zeros((128, 128)), []
    for t in range(len(q)):    # S <- (I - beta k k^T) e^g S + beta k v^T
        s = (np.eye(128) - beta[t, 0] * np.outer(k[t], k[t])) @ (np.exp(g[t, 0]) * s) + beta[t, 0] * np.outer(k[t], v[t])
        out.append(s.T @ q[t])
    np.testing.assert_allclose(spec.reference(inp)[0], out, rtol=1e-9, atol=1e-15)


def test_trotter_against_dense_operators_and_its_inputs_as_the_kernel_uses_them():
    spec = load_specs(PROBLEMS)["trotter-tfim"]
    inp = spec.make_inputs(11)
    c, s = float(inp["cos_val_in"][0, 0]), float(inp["sin_val_in"][0, 0])
    rx = np.array([[c, 1j * s], [1j * s, c]])
    dense = np.ones((1, 1))
    for _ in range(9):
        dense = np.kron(dense, rx)
    zz = np.diag((inp["zz_phase_real"] + 1j * inp["zz_phase_imag"]).ravel())
    psi = (inp["psi_real_in"] + 1j * inp["psi_imag_in"]).ravel()
    for _ in range(10):
        psi = dense @ (zz @ (dense @ psi))
    out_r, out_i = spec.reference(inp)
    np.testing.assert_allclose(out_r.ravel() + 1j * out_i.ravel(), psi, atol=1e-6)
    # the fused partition matrix (real blocks, transposed) and the XOR tables apply the same Rx to every qubit
    m = (inp["rx_mat_rr_T_in"] + 1j * inp["rx_mat_ir_T_in"]).T.astype(np.complex128)
    np.testing.assert_allclose(inp["rx_mat_ri_T_in"], -inp["rx_mat_ir_T_in"])
    state = np.random.default_rng(0).standard_normal((128, 4)) + 0j
    step = m @ state
    for table in inp["free_xor_indices_in"]:
        step = c * step + 1j * s * np.take_along_axis(step, table.astype(np.int64), axis=1)
    np.testing.assert_allclose(step.ravel(), dense @ state.ravel(), atol=1e-6)
