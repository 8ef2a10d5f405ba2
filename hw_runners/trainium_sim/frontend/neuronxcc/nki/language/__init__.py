"""neuronxcc.nki.language as trainium-sim provides it: the nl.* calls lowered to recorded instructions.

A package, as in the Neuron SDK (kernels import `neuronxcc.nki.language.constants` and
`from neuronxcc.nki.language import par_dim`): constants (dtypes, buffers, tile sizes), memory (allocation,
loads and stores, loops), compute (elementwise functions, reductions, tile operators); _base holds the
helpers nisa.* shares.
"""
from __future__ import annotations

from neuronxcc.nki._index import IndexExpr, arange, mgrid, tile_broadcast  # noqa: F401
from neuronxcc.nki._trace import DTYPES, RECORDER  # noqa: F401
from neuronxcc.nki.language import compute as _compute_mod, constants, memory as _memory_mod
from neuronxcc.nki.language._base import (_HBM, _LoopReduce, _attrs, _compute, _copy_into, _ew,  # noqa: F401
                                          _fill, _new, _result_dtype, _view)
from neuronxcc.nki.language.compute import _reduce  # noqa: F401
from neuronxcc.nki._trace import _core  # noqa: F401


def _export(module) -> list[str]:
    names = [n for n in getattr(module, "__all__", vars(module)) if not n.startswith("_") and n != "annotations"]
    g = globals()
    for n in names:
        g[n] = getattr(module, n)
    return names


__all__ = sorted(set(_export(constants) + _export(_memory_mod) + _export(_compute_mod)
                     + ["arange", "mgrid", "IndexExpr", "DTYPES", "constants"]))
