"""The target toolkit: what a target's own code (its offline heuristic above all) may share with every other
target without depending on the application that loads it. A target imports hw_runners.base, this package,
protocols/ and sandbox/, never agents/ (tests/unit/test_layers.py checks it)."""
