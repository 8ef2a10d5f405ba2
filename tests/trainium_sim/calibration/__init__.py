"""Calibration of trainium-sim against AWS's published trn1 measurements (see harness.py).

The kernel files here (matmul.py, mamba.py, micro.py) re-express the published kernels and micro-benchmarks
in our own words; harness.py holds every published number with its source and conditions, runs the
kernels at the published shapes through a timing-only replay and builds the calibration table that
bench/bench_trainium_sim.py --calibration prints and test_calibration.py checks.
"""
