"""The cuda target: KernelBench-style problems (a PyTorch reference Model, get_inputs, get_init_inputs) and
candidate kernels (a ModelNew of inline CUDA and/or Triton), judged on an NVIDIA GPU (target.py)."""
from autocomp_zmq.hw_runners.cuda import target  # noqa: F401  (registers the target)
