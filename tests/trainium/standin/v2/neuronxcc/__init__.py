from importlib import metadata
__version__ = metadata.version("neuronx-cc")
