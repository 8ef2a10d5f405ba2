"""neuronxcc.nki.typing as trainium-sim provides it: the types kernels annotate their parameters with
(`def k(a: nt.tensor, ...)`, `nki.tensor`) and the tensor descriptions benchmark harnesses build
(`nt.tensor[[128, 512], nl.bfloat16]`). Annotations mean nothing to the trace; `isinstance(x, nt.tensor)`
holds for the kernel's tensors and tiles."""
from __future__ import annotations

from neuronxcc.nki._index import NKIError, _int
from neuronxcc.nki._trace import Tensor, View, dtype_name


class TensorType:
    """`nt.tensor[shape, dtype]`: a description of a tensor (what harnesses pass to nki.benchmark); a kernel
    traced by trainium-sim gets real tensors instead, so this is only ever a description."""

    def __init__(self, shape, dtype) -> None:
        shape = shape if isinstance(shape, (tuple, list)) else (shape,)
        self.shape, self.dtype = tuple(_int(s) for s in shape), dtype_name(dtype)

    def __repr__(self) -> str:
        return f"tensor[{list(self.shape)}, {self.dtype}]"


class _TensorMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, (Tensor, View))

    def __getitem__(cls, key) -> TensorType:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise NKIError("nt.tensor[...] takes a shape and a dtype: nt.tensor[[128, 512], nl.float32]")
        return TensorType(*key)


class tensor(metaclass=_TensorMeta):
    """The type of NKI tensors, for annotations and isinstance; tensors come from nl.ndarray and friends."""

    def __new__(cls, *args, **kwargs):
        raise NKIError("nt.tensor is a type for annotations: allocate tensors with nl.ndarray / nl.zeros")


mutable_tensor = tensor


class _Qualifier:
    """nt.mutable / nt.immutable: annotation qualifiers (`a: nt.mutable[nt.tensor]`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getitem__(self, item):
        return item

    def __repr__(self) -> str:
        return f"nt.{self.name}"


mutable, immutable = _Qualifier("mutable"), _Qualifier("immutable")

__all__ = ["tensor", "mutable_tensor", "mutable", "immutable", "TensorType"]
