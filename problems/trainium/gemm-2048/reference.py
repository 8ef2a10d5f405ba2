"""Trusted numpy reference for gemm-2048: result = lhsT.T @ rhs (bf16 in and out, fp32 accumulation)."""
import numpy as np

K, M, N = 2048, 2048, 2048


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even) so the kernel's bf16 inputs equal ours."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Zero-mean operands with rhs scaled by 1/sqrt(K) keep every output near N(0, 1): a wrong tile or a
    # missing partial sum moves results far beyond the bf16 output tolerance.
    lhsT = _bf16(rng.standard_normal((K, M), dtype=np.float32))
    rhs = _bf16(rng.standard_normal((K, N), dtype=np.float32) / np.float32(np.sqrt(K)))
    return {"lhsT": lhsT, "rhs": rhs}


def reference(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.matmul(lhsT.T.astype(np.float32), rhs.astype(np.float32))
