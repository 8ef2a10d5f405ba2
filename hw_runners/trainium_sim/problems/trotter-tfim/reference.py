"""Symmetric Trotter steps of the 2-D transverse-field Ising model on a 3 x 3 lattice (Autocomp's trn-internal
workload 7, harnesses/trn-internal/7_trotter_test.py): a 9-qubit state vector (512 amplitudes, laid out (128, 4),
amplitude index = row * 4 + column, qubit q at bit 8 - q) evolves by n_steps of
Rx(all qubits) . ZZ phases . Rx(all qubits), with Rx = cos I + i sin X (the harness's full_trotter_step_cpu).

make_inputs builds what the harness's prepare_trotter_inputs gives the kernel (the ZZ phases of the lattice's
bonds, Rx's cos and sin, the fused 128 x 128 Rx matrix of the seven partition qubits as real blocks, the XOR index
tables of the two free-axis qubits); the reference evolves the state from the phases, cos and sin alone."""
import numpy as np

L, J, H = 3, 1.0, 1.0


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    rows, f = shapes["psi_real_in"]
    n = int(np.log2(rows * f))
    dt = float(rng.choice([0.01, 0.015]))     # the harness's two input sets: dt = 0.01 + 0.005 * seed
    bits = (np.arange(rows * f)[:, None] >> (n - 1 - np.arange(n))[None, :]) & 1
    z = 1 - 2 * bits                                                      # (amplitude, qubit)
    bonds = [(r * L + c, r * L + c + 1) for r in range(L) for c in range(L - 1)] + \
            [(r * L + c, (r + 1) * L + c) for r in range(L - 1) for c in range(L)]
    angle = J * dt * sum(z[:, a] * z[:, b] for a, b in bonds)
    c, s = np.cos(H * dt / 2), np.sin(H * dt / 2)
    rx = np.array([[c, 1j * s], [1j * s, c]])
    m = np.ones((1, 1))
    for _ in range(int(np.log2(rows))):                                   # the partition index's qubits
        m = np.kron(m, rx)
    free = [1 << (n - 1 - q) for q in range(n) if (1 << (n - 1 - q)) < f]
    psi = np.zeros((rows, f), np.float32)
    psi[0, 0] = 1.0                                                       # |00...0>, as the harness starts
    f32 = lambda a: np.asarray(a, dtype=np.float32)  # noqa: E731
    return {"psi_real_in": psi, "psi_imag_in": np.zeros_like(psi),
            "zz_phase_real": f32(np.cos(angle).reshape(rows, f)), "zz_phase_imag": f32(np.sin(angle).reshape(rows, f)),
            "cos_val_in": np.full((rows, 1), c, np.float32), "sin_val_in": np.full((rows, 1), s, np.float32),
            "n_steps_dummy": np.zeros(shapes["n_steps_dummy"], np.float32),
            "rx_mat_rr_T_in": f32(m.real.T), "rx_mat_ri_T_in": f32(-m.imag.T),
            "rx_mat_ir_T_in": f32(m.imag.T), "rx_mat_ii_T_in": f32(m.real.T),
            "free_xor_indices_in": np.stack([np.tile(np.arange(f) ^ st, (rows, 1)) for st in free]).astype(np.int32)}


def reference(psi_real_in, psi_imag_in, zz_phase_real, zz_phase_imag, cos_val_in, sin_val_in, n_steps_dummy,
              rx_mat_rr_T_in, rx_mat_ri_T_in, rx_mat_ir_T_in, rx_mat_ii_T_in, free_xor_indices_in):
    shape = psi_real_in.shape
    n = int(np.log2(psi_real_in.size))
    c, s = float(cos_val_in[0, 0]), float(sin_val_in[0, 0])
    psi = (psi_real_in.astype(np.float64) + 1j * psi_imag_in).reshape((2,) * n)
    zz = (zz_phase_real.astype(np.float64) + 1j * zz_phase_imag).reshape((2,) * n)

    def rx_all(p):
        for q in range(n):                     # axis q of the (2,) * n view is the qubit at bit n - 1 - q
            p = c * p + 1j * s * np.flip(p, axis=q)
        return p
    for _ in range(n_steps_dummy.shape[0]):
        psi = rx_all(zz * rx_all(psi))
    return psi.real.reshape(shape), psi.imag.reshape(shape)
