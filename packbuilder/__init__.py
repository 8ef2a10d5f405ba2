"""Building a target's prompt pack from its documentation (`launch.py build-target`).

This package owns the whole build: reading a folder of documentation into sourced chunks (sources.py), the
model calls that write the pack, recorded for replay and held under a spending cap (calls.py), reading the
model's answers into cited, size-bounded pack files (compose.py), and checking the result with the product's
own pack loader before the folder is written for review (build.py). The instructions given to the model are
data, in prompts/build-target/parts.toml. Nothing here installs a pack: the output is a folder a person reads.
"""
