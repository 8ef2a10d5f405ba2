import numpy as np

bfloat16, float32, float16 = "bfloat16", "float32", "float16"
shared_hbm, sbuf, psum = "shared_hbm", "sbuf", "psum"


def static_cast(array, dtype):
    return np.asarray(array, dtype=np.float32)
