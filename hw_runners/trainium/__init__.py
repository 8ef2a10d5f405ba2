"""trainium: NKI kernels on real Trainium hosts through the Neuron SDK (registers on import)."""
from autocomp_zmq.hw_runners.trainium.target import Trainium

__all__ = ["Trainium"]
