"""One forward of the candidate's ModelNew on the first input set, for Nsight Compute (ncu runs this script and
profiles the kernels it launches; hw_runners/cuda/ncu.py reads the metrics). Only kernels already judged correct get
here, in the candidate's own directory, so its compiled extensions and Triton cache are reused, not rebuilt."""
import torch

import judge_common as h

reference = h.timed("import", lambda: h.load_module("reference.py", "reference"))
kernel = h.timed("import", lambda: h.load_module("kernel.py", "kernel"))
model = h.timed("init", lambda: h.make_model(kernel.ModelNew, reference, h.JOB["init_seed"]))
with torch.no_grad():
    inputs, _ = h.make_inputs(reference, next(iter(h.JOB["sets"].values()))["seed"])
    h.timed("run", lambda: (model(*inputs), h.synchronize()))
h.tell({"finished": True, "seconds": dict(h.SECONDS)})
h._exit(0)
