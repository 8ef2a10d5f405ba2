"""conv2d (and conv2d-small): 2-D cross-correlation, NCHW image, OIHW filter, zero padding, stride, no bias."""
import numpy as np


def make_inputs(rng: np.random.Generator, shapes: dict[str, tuple]) -> dict[str, np.ndarray]:
    # A positive image and filters of mean 0.25 keep every output far from zero (no cancellation, so a relative
    # tolerance means something), while the filters' spread makes a wrong tap, channel or weight layout move
    # outputs by several percent.
    img = rng.random(shapes["img_ref"], dtype=np.float32)
    w = rng.uniform(-0.5, 1.0, size=shapes["filter_ref"]).astype(np.float32)
    return {"img_ref": img, "filter_ref": w}


def reference(img_ref, filter_ref, **kwargs):
    (pt, pb), (pl, pr) = kwargs["padding"]
    sh, sw = kwargs.get("stride", (1, 1))
    n, c_in, h, w = img_ref.shape
    c_out, _, hf, wf = filter_ref.shape
    k0 = (h + pt + pb - hf) // sh + 1
    k1 = (w + pl + pr - wf) // sw + 1
    weights = filter_ref.reshape(c_out, c_in * hf * wf)
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
