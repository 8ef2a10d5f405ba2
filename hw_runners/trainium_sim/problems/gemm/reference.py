"""Trusted numpy reference for gemm (and its siblings gemm-1024, gemm-2048): result = lhsT.T @ rhs (bf16 in and out, fp32 accumulation)."""
import numpy as np




def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # Zero-mean operands with rhs scaled by 1/sqrt(K) keep every output near N(0, 1): a wrong tile or a
    # missing partial sum moves results far beyond the bf16 output tolerance.
    k = shapes["lhsT"][0]
    lhsT = rng.standard_normal(shapes["lhsT"], dtype=np.float32)
    rhs = rng.standard_normal(shapes["rhs"], dtype=np.float32) / np.float32(np.sqrt(k))
    return {"lhsT": lhsT, "rhs": rhs}


def reference(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.matmul(lhsT.T.astype(np.float32), rhs.astype(np.float32))
