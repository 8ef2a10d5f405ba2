"""Llama-3.2-1B MLP at decode, batch 32 (Autocomp's trn-e2e workload 11): out = (silu(x @ gate_w) * (x @ up_w)) @ down_w.

Rounded where the harness's reference kernel rounds (harnesses/trn-e2e/3_llama_mlp_decode_nki.py, `ref`): the
two projections and their product are bfloat16 tiles, the down projection accumulates in float32 (the batch-32
harness holds no reference kernel of its own)."""
import numpy as np


def bf16(a) -> np.ndarray:
    """Round to the nearest bfloat16 (ties to even), held in float64."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32).astype(np.float64)


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: every tensor standard normal, cast to bfloat16 (the cast happens on loading)
    return {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def reference(x_dev, up_w, gate_w, down_w):
    x = x_dev.reshape(-1, x_dev.shape[-1]).astype(np.float64)
    up = bf16(x @ up_w)
    gate = bf16(x @ gate_w)
    act = bf16(gate / (1.0 + np.exp(-gate)) * up)
    return (act @ down_w).reshape(*x_dev.shape[:-1], down_w.shape[1])
