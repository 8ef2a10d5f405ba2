"""trainium-sim: an embedded NeuronCore-v2 simulator for NKI kernels (see target.py)."""
from autocomp_zmq.hw_runners.trainium_sim import target  # noqa: F401  (registers the target)
