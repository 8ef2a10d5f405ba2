"""A 256-point FFT along rows (Autocomp's trn-internal workload 5): Y = fft(X_real + i X_imag, axis=-1), as
harnesses/trn-internal/5_fft256_test.py checks it against numpy.fft.fft. The kernel also gets the 128-point DFT
matrix and the radix-2 twiddle factors; make_inputs computes them as the harness does."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness makes them: 64 rows of standard normal signal padded with zero rows to 128, no imaginary part
    rows, n = shapes["X_real_hbm"]
    x = np.zeros((rows, n), dtype=np.float32)
    x[:64] = rng.standard_normal((64, n), dtype=np.float32)
    half = n // 2
    kn = np.arange(half, dtype=np.float64)
    dft = -2.0 * np.pi * np.outer(kn, kn) / half
    tw = np.tile(-2.0 * np.pi * kn / n, (rows, 1))
    f32 = lambda a: a.astype(np.float32)  # noqa: E731
    return {"X_real_hbm": x, "X_imag_hbm": np.zeros_like(x), "W_128_real_hbm": f32(np.cos(dft)),
            "W_128_imag_hbm": f32(np.sin(dft)), "twiddle_real_hbm": f32(np.cos(tw)), "twiddle_imag_hbm": f32(np.sin(tw))}


def reference(X_real_hbm, X_imag_hbm, W_128_real_hbm, W_128_imag_hbm, twiddle_real_hbm, twiddle_imag_hbm):
    y = np.fft.fft(X_real_hbm.astype(np.float64) + 1j * X_imag_hbm.astype(np.float64), axis=-1)
    return y.real, y.imag
