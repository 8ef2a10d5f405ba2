"""conv2d (and conv2d-small): 2-D cross-correlation, NCHW image, OIHW filter, zero padding, stride, no bias.

Kernels in NKI v2 get the filter pre-transposed instead, filter_T_ref (C_in, H_f, W_f, C_out) (problem.toml's
[nki2]; Autocomp's v2 harness transposes it on the host): the reference reads the weights from whichever it is given.
"""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # A positive image and filters of mean 0.25 keep every output far from zero (no cancellation, so a relative
    # tolerance means something), while the filters' spread makes a wrong tap, channel or weight layout move
    # outputs by several percent.
    img = rng.random(shapes["img_ref"], dtype=np.float32)
    if "filter_T_ref" in shapes:     # the v2 definition: drawn in OIHW like filter_ref, then transposed
        c_in, hf, wf, c_out = shapes["filter_T_ref"]
        w = rng.uniform(-0.5, 1.0, size=(c_out, c_in, hf, wf)).astype(np.float32)
        return {"img_ref": img, "filter_T_ref": pre_transpose(w)}
    w = rng.uniform(-0.5, 1.0, size=shapes["filter_ref"]).astype(np.float32)
    return {"img_ref": img, "filter_ref": w}


def pre_transpose(filter_ref: np.ndarray) -> np.ndarray:
    """(C_out, C_in, H_f, W_f) -> (C_in, H_f, W_f, C_out), as Autocomp's v2 harness's _pre_transpose_filter."""
    return np.ascontiguousarray(filter_ref.transpose(1, 2, 3, 0))


def reference(img_ref, filter_ref=None, filter_T_ref=None, **kwargs):
    (pt, pb), (pl, pr) = kwargs["padding"]
    sh, sw = kwargs.get("stride", (1, 1))
    n, c_in, h, w = img_ref.shape
    if filter_ref is not None:
        c_out, _, hf, wf = filter_ref.shape
        weights = filter_ref.reshape(c_out, c_in * hf * wf)
    else:       # [C_in * H_f * W_f, C_out] as it lies, transposed back (the inverse of the harness's reshapes)
        _, hf, wf, c_out = filter_T_ref.shape
        weights = filter_T_ref.reshape(c_in * hf * wf, c_out).T
    k0 = (h + pt + pb - hf) // sh + 1
    k1 = (w + pl + pr - wf) // sw + 1
    out = np.empty((n, c_out, k0, k1), dtype=np.float32)
    for i in range(n):                      # one image at a time keeps the im2col buffer small
        img = np.pad(img_ref[i], ((0, 0), (pt, pb), (pl, pr)))
        cols = np.empty((c_in, hf, wf, k0, k1), dtype=np.float32)
        for a in range(hf):
            for b in range(wf):
                cols[:, a, b] = img[:, a:a + sh * (k0 - 1) + 1:sh, b:b + sw * (k1 - 1) + 1:sw]
        # float32 BLAS: its accumulation error (~1e-6 relative) is far below the tolerance, and float64
        # would double the time of the paper-sized problem.
        out[i] = (weights @ cols.reshape(c_in * hf * wf, k0 * k1)).reshape(c_out, k0, k1)
    return out
