"""conv1d: depthwise 1-D cross-correlation along W with zero padding, NCHW with H = 1."""
import numpy as np


def make_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    # Signed inputs and per-channel filters: a tap applied at the wrong offset, a wrong channel's filter or a
    # missing zero pad all change the result by far more than the tolerance.
    return {"img_ref": rng.standard_normal((8, 512, 1, 2048), dtype=np.float32),
            "filter_ref": rng.standard_normal((512, 1, 1, 3), dtype=np.float32)}


def reference(img_ref, filter_ref, **kwargs):
    (pt, pb), (pl, pr) = kwargs["padding"]
    n, c, h, w = img_ref.shape
    _, _, hf, wf = filter_ref.shape
    img = np.pad(img_ref.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    k0 = h + pt + pb - hf + 1
    k1 = w + pl + pr - wf + 1
    out = np.zeros((n, c, k0, k1))
    for a in range(hf):
        for b in range(wf):
            out += img[:, :, a:a + k0, b:b + k1] * filter_ref[None, :, 0, a, b, None, None]
    return out
