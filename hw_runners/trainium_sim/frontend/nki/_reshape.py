"""NkiTensor.reshape on SBUF/PSUM tensors (NKI v2): another shape over the same on-chip storage.

AWS documents it for v2 tiles: 'You can also create a tensor from an existing tensor using the reshape method ...
a new reference to the same memory with a different shape' (NKI language guide), with the constraints of
NkiTensor.reshape (nki/api/nki/language/__init__.py stubs): the element count is kept, 'On-chip tensors: shape[0]
must equal t.shape[0] (partition dim preserved)', and it 'fails if the current memory layout is incompatible'.

A reshape that only splits free dimensions is an affine view of the tensor (dim = sum of coef * new axis), usable
by any instruction. One that only merges free dimensions is not affine in the tensor's dimensions, so its accesses
are recorded over the tensor's own dimensions: trainium-sim accepts such a tile, whole, as a nisa.dma_copy operand
(the DMA moves each partition's elements in row-major order, 'the total number of data elements in src must
match that of dst'; the trusted replayer checks exactly that) and refuses it elsewhere by name. NKI v1 kernels keep
v1's rule (HBM tensors only): the tiles NKI v2's allocation calls make are marked (`v2`).
"""
from __future__ import annotations

import math

from neuronxcc.nki._index import NKIError, _int, index, whole_index
from neuronxcc.nki._trace import Tensor, View

_hbm_reshape = Tensor.reshape


class MergedView(View):
    """A whole on-chip tensor seen with merged free dimensions (see the module's docstring)."""
    merged = True

    def __getitem__(self, key) -> View:
        per_axis, shape = index(self.shape, key)
        if shape == self.shape and per_axis == whole_index(self.shape):
            return self
        raise NKIError(f"a reshape that merges dimensions of an on-chip tile ({self.tensor.shape} -> {self.shape}) "
                       f"is used whole by trainium-sim (index the tile before reshaping it)")

    def is_whole(self) -> bool:
        return False


def _groups(old: tuple, new: tuple) -> list[tuple[list, list]] | None:
    """The shortest runs of old and new free dimensions with equal products, or None."""
    groups, i, j = [], 0, 0
    while i < len(old) and j < len(new):
        a, b, pa, pb = [i], [j], old[i], new[j]
        while pa != pb:
            if pa < pb and i + 1 < len(old):
                i += 1
                a.append(i)
                pa *= old[i]
            elif pb < pa and j + 1 < len(new):
                j += 1
                b.append(j)
                pb *= new[j]
            else:
                return None
        groups.append((a, b))
        i, j = i + 1, j + 1
    return groups if i == len(old) and j == len(new) else None


def reshape(self: Tensor, shape) -> Tensor | View:
    if self.buffer == "hbm" or not getattr(self, "v2", False):
        return _hbm_reshape(self, shape)
    shape = tuple(_int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    old = self.shape
    if self.gone or self.redirect is not None:
        raise NKIError("reshape this tile's destination instead (its value was written into another tile)")
    if len(shape) < 2 or shape[0] != old[0] or math.prod(shape) != math.prod(old):
        raise NKIError(f"cannot reshape an on-chip tile of shape {old} to {shape}: the element count and the "
                       f"partition dimension (shape[0]) must stay the same")
    groups = _groups(old[1:], shape[1:])
    if groups is None:
        raise NKIError(f"cannot reshape {old} to {shape}")
    rank = len(shape)
    if all(len(a) == 1 for a, _ in groups):           # splits only: an affine view
        idx = [[0, [[old[0], rank, 0, 1]]]] + [None] * (len(old) - 1)
        for (d,), axes in groups:
            terms, coef = [], 1
            for ax in reversed(axes):
                terms.insert(0, [shape[ax + 1], rank, ax + 1, coef])
                coef *= shape[ax + 1]
            idx[d + 1] = [0, terms]
        return View(self, idx, shape)
    if all(len(b) == 1 for _, b in groups):           # merges only: recorded over the tensor's dimensions
        return MergedView(self, whole_index(old), shape)
    raise NKIError(f"trainium-sim reshapes an on-chip tile by splitting or by merging free dimensions, not both "
                   f"({old} -> {shape}); reshape in two steps through a copy")


def refuse_merged(v: View, what: str) -> None:
    if getattr(v, "merged", False):
        raise NKIError(f"{what}: a tile reshaped by merging free dimensions ({v.tensor.shape} -> {v.shape}) is a "
                       f"nisa.dma_copy operand only in trainium-sim; copy with the tile's own shape instead")


Tensor.reshape = reshape
