"""The old import path of the targets' heuristic toolkit, now hw_runners/toolkit/: kept only because
hw_runners/trainium_sim/heuristic/agent.py still imports it from here while that folder is being rewritten.
Nothing else may import this package (tests/unit/test_layers.py allows trainium_sim alone, by name); delete it
once that file imports autocomp_zmq.hw_runners.toolkit."""
