"""nki.typing (NKI 0.3.0) as trainium-sim provides it: `nt.tensor[128, 512]` annotates a kernel parameter with its
shape (annotations mean nothing to the trace); isinstance(x, nt.tensor) holds for the kernel's tensors.
Reference: the NKI 0.3.0 section of https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/_sources/nki/migration/index.rst"""
from __future__ import annotations

from neuronxcc.nki._index import NKIError, _int
from neuronxcc.nki._trace import Tensor, View


class _TensorMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, (Tensor, View))

    def __getitem__(cls, shape) -> tuple:
        shape = shape if isinstance(shape, tuple) else (shape,)
        return tuple(_int(s) for s in shape)


class tensor(metaclass=_TensorMeta):
    """The type of NKI tensors, for annotations; tensors come from nl.ndarray."""

    def __new__(cls, *args, **kwargs):
        raise NKIError("nt.tensor is a type for annotations: allocate tensors with nl.ndarray")


__all__ = ["tensor"]
