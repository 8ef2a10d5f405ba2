"""gemmini-sim: the embedded, host-native Gemmini target (registers on import)."""
from autocomp_zmq.hw_runners.gemmini_sim.target import GemminiSim

__all__ = ["GemminiSim"]
