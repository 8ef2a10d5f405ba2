"""Llama-3.2-1B logits at decode (Autocomp's trn-e2e workloads 7 and 13): the last hidden state times the LM head,
hidden_states (B, 1, 2048) @ lm_head_weight (2048, 64128), exactly (float64)."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # as the harness draws them: standard normal, cast to bfloat16 (on loading)
    return {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()}


def reference(hidden_states, lm_head_weight):
    return np.einsum("bsk,kn->bsn", hidden_states.astype(np.float64), lm_head_weight.astype(np.float64))
