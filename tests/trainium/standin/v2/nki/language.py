bfloat16, float32, float16 = "bfloat16", "float32", "float16"
shared_hbm, sbuf, psum = "shared_hbm", "sbuf", "psum"
