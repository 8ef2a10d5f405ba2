import numpy as np

bfloat16, float32, float16 = "bfloat16", "float32", "float16"
shared_hbm, sbuf, psum = "shared_hbm", "sbuf", "psum"


class _Cast(np.ndarray):
    """An array nl.static_cast made: float32 values here, the dtype it was cast to kept for the NEFF."""
    standin_dtype = "float32"


def static_cast(array, dtype):
    out = np.asarray(array, dtype=np.float32).view(_Cast)
    out.standin_dtype = dtype
    return out
