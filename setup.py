"""Packages are found, not listed: every folder of the checkout with an __init__.py is a subpackage of autocomp_zmq
(pyproject.toml maps autocomp_zmq to this folder), so adding a target's package needs no change here. problems/ and
prompts/ hold data only (their files are package data, pyproject.toml)."""
from setuptools import find_packages, setup

SKIP = ["tests", "tests.*", "bench", "bench.*", "docs", "docs.*", "build", "build.*"]
DATA_ONLY = ["problems", "prompts"]


def packages() -> list[str]:
    return ["autocomp_zmq"] + [f"autocomp_zmq.{p}" for p in find_packages(".", exclude=SKIP) + DATA_ONLY]


if __name__ == "__main__":
    setup(packages=packages())
