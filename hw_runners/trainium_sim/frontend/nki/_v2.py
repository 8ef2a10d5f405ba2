"""What NKI v2's front end adds to the v1 recorder: destination passing, the platform, refused v1 forms.

NKI v2 (Neuron SDK 2.27+, `import nki`) records into the same RECORDER, tensors and views as v1
(neuronxcc/nki/_trace.py): a v2 call is the v1 call that records the same instruction, with that
instruction's result redirected into the `dst` the kernel passed (the migration guide: "all ISA functions
now require a destination parameter"). So the trusted validator, replayer and cost model see one stream
format for both dialects, and nothing here is trusted either.

Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/_sources/nki/migration/index.rst
(NKI 0.1.0 -> 0.2.0 -> ... -> 0.6.0), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.isa.html,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.language.html.
"""
from __future__ import annotations

import functools

from neuronxcc.nki._index import NKIError
from neuronxcc.nki._trace import RECORDER, Tensor, View, _core
from nki._reshape import refuse_merged  # noqa: E402  (also gives v2 tiles NkiTensor.reshape)

# the platform the evaluator chose (trn1 | trn2 | trn3); the child sets it from the job before the kernel runs
PLATFORM = {"name": "trn2"}
NC_VERSION = {"trn1": "gen2", "trn2": "gen3", "trn3": "gen4"}

MASK_REMOVED = ("{what}: the mask= parameter was removed in NKI 0.2.0 (Beta 2); build in-bounds slices instead, "
                "e.g. p = slice(i * 128, min(n, (i + 1) * 128)) and index t[p, f] (NKI migration guide, "
                "'Deprecation of masking')")
REMOVED = {
    "arange": "nl.arange was removed in NKI 0.2.0: index with integer slices (t[0:128, 0:512], nl.ds(start, size))",
    "mgrid": "nl.mgrid was removed in NKI 0.2.0: index with integer slices (t[0:128, 0:8 * 64] instead of "
             "t[i_p, i_f0 * 64 + i_f1])",
    "par_dim": "nl.par_dim (block dimensions) was removed in NKI 0.2.0: the partition dimension is always the "
               "first; use a list of tiles or fold the block dimension into the free dimension (block dimension "
               "migration guide)",
    "loop_reduce": "nl.loop_reduce is not part of NKI v2: accumulate with nisa.tensor_tensor(dst=acc, data1=acc, "
                   "data2=x, op=nl.add)",
    "static_cast": "nl.static_cast is not part of NKI v2: convert with nisa.tensor_copy(dst=tile_of_new_dtype, src=x)",
    "tile_broadcast": "not part of NKI v2",
}


def refuse_mask(fn, what: str):
    """A v2 API that turns `mask=` into the v2 error (the real compiler rejects the parameter)."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "mask" in kwargs:
            raise NKIError(MASK_REMOVED.format(what=what))
        return fn(*args, **kwargs)
    return call


def view(x, what: str) -> View:
    if isinstance(x, Tensor):
        return x.view()
    if isinstance(x, View):
        return x
    raise NKIError(f"{what} must be a tensor or a tile (nl.ndarray), not {type(x).__name__}")


def on_chip(x, what: str, buffers=("sbuf", "psum")) -> View:
    v = view(x, what)
    if v.buffer not in buffers:
        raise NKIError(f"{what} must be in {' or '.join(b.upper() for b in buffers)}, not {v.buffer.upper()}")
    refuse_merged(v, what)
    return v


# -- PSUM accumulation groups (nc_matmul accumulate=None) ---------------------------------------------------
# nisa.nc_matmul: "accumulate=None (default): the compiler automatically infers the correct flag - first write
# overwrites, subsequent writes accumulate". The trace infers it the same way per PSUM tensor: a matmul opens
# a group over the region it writes; a later matmul into an overlapping open region accumulates; any other
# read or write of the tensor (evicting the result, a memset) closes its groups, so the next matmul overwrites.
_OPEN: dict[int, list] = {}


def box(v: View) -> list[tuple[int, int]]:
    """The bounding box (lo, hi) per tensor dimension of a view's index."""
    out = []
    for e in v.idx:
        if isinstance(e, int):
            out.append((e, e))
            continue
        const, terms = e
        out.append((const + sum(min(0, c * (n - 1)) for n, _, _, c in terms),
                    const + sum(max(0, c * (n - 1)) for n, _, _, c in terms)))
    return out


def _overlap(a, b) -> bool:
    return all(lo1 <= hi2 and lo2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(a, b))


def accumulates(dst: View) -> bool:
    b = box(dst)
    return any(_overlap(b, o) for o in _OPEN.get(dst.tensor.tid, ()))


def opened(dst: View) -> None:
    _OPEN.setdefault(dst.tensor.tid, []).append(box(dst))


def touched(*operands) -> None:
    """Operands read or written by anything but a matmul: their PSUM accumulation groups end."""
    for o in operands:
        if isinstance(o, (View, Tensor)) and o.buffer == "psum":
            _OPEN.pop(o.tensor.tid if isinstance(o, View) else o.tid, None)
        elif isinstance(o, (list, tuple)):
            touched(*o)


# -- destination passing ----------------------------------------------------------------------------------
def into(dst, what: str, make, *operands, closes_dst: bool = True) -> list:
    """Run `make()`, a v1 call recording one instruction that writes a fresh tile and returns it, and make that
    instruction write `dst` instead (what NKI v2 means by passing dst). The fresh tile is never written: it
    is declared dead, as v1's `dst[...] = nisa.op(...)` does when the compiler writes straight into dst."""
    d = view(dst, f"{what}'s dst")
    if d.buffer == "hbm":
        raise NKIError(f"{what} writes SBUF or PSUM, not HBM: move results to HBM with nisa.dma_copy")
    touched(*operands, *((d,) if closes_dst else ()))
    before = len(RECORDER.instrs)
    result = make()
    if not isinstance(result, View) or len(RECORDER.instrs) == before:
        raise NKIError(f"{what}: internal error, no instruction was recorded")
    instr = RECORDER.instrs[-1]
    if instr[2][0][0] != result.tensor.tid:
        raise NKIError(f"{what}: internal error, the instruction does not write its result first")
    if _core(result.shape) != _core(d.shape):
        raise NKIError(f"{what}: dst has shape {d.shape} but the result has shape {result.shape}")
    instr[2][0] = d.encode()
    RECORDER.tensors[result.tensor.tid][0] = "dead"    # never written: needs no memory
    result.tensor.producer = None
    result.tensor.gone = f"an internal tile of {what} (write to dst instead)"
    d.tensor.producer = len(RECORDER.instrs) - 1
    return instr


# -- access patterns (NkiTensor.ap) ------------------------------------------------------------------------
def access_pattern(t, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
    """`tensor.ap([[stride, num], ...], offset)`: the elements offset + sum(stride_j * i_j) of the tensor's
    row-major storage, as a tile of shape (num_0, num_1, ...) (the NKI language guide's access patterns; the
    first pair walks the partitions of an on-chip tensor). Each stride is expressed along the tensor's
    dimensions, so the recorded access is an ordinary affine index the trusted side checks as any other; a
    pattern whose steps cross dimension boundaries is refused. Dynamic offsets (scalar_offset /
    vector_offset) and dtype reinterpretation are not simulated."""
    from neuronxcc.nki._index import _int
    if scalar_offset is not None or vector_offset is not None or dtype is not None:
        raise NKIError(".ap(): scalar_offset / vector_offset (dynamic access) and dtype= are not simulated by "
                       "trainium-sim")
    if isinstance(t, View):
        if not t.is_whole():
            raise NKIError(".ap() applies to a whole tensor (its pattern addresses the tensor's storage)")
        t = t.tensor
    pairs = [(_int(s), _int(n)) for s, n in pattern]
    if not pairs or any(n < 1 or s < 0 for s, n in pairs):
        raise NKIError(f".ap(): a pattern is a non-empty list of [stride >= 0, size >= 1] pairs, got {pattern}")
    shape, rank = t.shape, len(pairs)
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    const, rest = [0] * len(shape), _int(offset or 0)
    for d in range(len(shape)):
        const[d], rest = divmod(rest, strides[d])
    terms = [[] for _ in shape]
    for j, (s, n) in enumerate(pairs):
        d = next((d for d in range(len(shape)) if s % strides[d] == 0), len(shape) - 1) if s else 0
        terms[d].append([n, rank, j, s // strides[d]])
    for d, n in enumerate(shape):
        hi = const[d] + sum(c * (e - 1) for e, _, _, c in terms[d])
        if hi >= n:
            raise NKIError(f".ap(): the pattern {pattern} (offset {offset}) runs past dimension {d} of the tensor's "
                           f"shape {shape}; trainium-sim needs patterns whose steps stay inside each dimension")
    idx = [[const[d], terms[d]] if terms[d] else const[d] for d in range(len(shape))]
    return View(t, idx, tuple(n for _, n in pairs))


Tensor.ap = access_pattern
View.ap = access_pattern
