"""Which Neuron packages this Python has, as one JSON line on stdout (read by hw_runners/trainium/neuron.py).

find_spec and package metadata only: importing neuronxcc or nki can take a minute the first time, and a
probe must be cheap. Distribution names: neuronx-cc (module neuronxcc), nki (module nki, NKI v2's own wheel
since Neuron SDK 2.27), nrtpy (the runtime's Python API, SDK 2.32+, in an environment of its own)."""
import importlib.util
import json
import sys

try:
    from importlib import metadata
except ImportError:          # Python 3.7
    metadata = None


def version(dist):
    if metadata is None:
        return None
    try:
        return metadata.version(dist)
    except Exception:
        return None


def has(module):
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:        # a parent package that fails to import
        return False


def facts():
    return {
        "python": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "neuronxcc": version("neuronx-cc"),
        "nki": version("nki"),
        "nrtpy": version("nrtpy"),
        "v1_api": has("neuronxcc") and has("neuronxcc.nki"),
        "v2_api": has("nki"),
        "nrtpy_api": has("nrtpy"),
    }


if __name__ == "__main__":
    print(json.dumps(facts()))
