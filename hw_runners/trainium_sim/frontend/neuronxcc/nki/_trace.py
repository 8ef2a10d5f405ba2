"""The recording core of trainium-sim's NKI front end.

A kernel runs in a sandboxed process against this module. Nothing here holds a value of any tensor:
tensors are handles (shape, dtype, buffer), index expressions are affine forms of nl.arange axes, and
every NKI call appends one instruction to the RECORDER. The trusted replayer (outside the sandbox)
re-validates and executes that stream on its own inputs, so the stream cannot depend on input values
and nothing recorded here is trusted.

Wire format (plain lists, msgpack-friendly):
  tensor = [buffer, shape, dtype, pdim, site, alias]   buffer: "hbm" | "sbuf" | "psum"; alias: tid or -1
  instr  = [op, engine, dsts, srcs, attrs, site]       dsts/srcs: lists of accesses (srcs may hold numbers)
  access = [tid, [index per tensor dim]]              index: int | [const, [[extent, rank, pos, coef], ...]]
  attrs["mask"] = [[expr, cmp, value], ...]           expr: [const, terms] as above; all must hold
"""
from __future__ import annotations

import sys

import numpy as np

from neuronxcc.nki._index import NKIError, Predicate, _int, index, whole_index

KERNEL_FILE = "kernel.py"     # the filename the child compiles the candidate's source under
MAX_INSTRUCTIONS = 2_000_000


class bfloat16:
    """nl.bfloat16: numpy has no such type; the replayer rounds values to it."""
    name = "bfloat16"
    itemsize = 2

    def __init__(self):
        raise NKIError("nl.bfloat16 is a dtype, not a constructor")


# fp8 (NKI v2's nl.float8_*): numpy has no such types; NKI's dtypes are their names (DType = str in the nki
# stubs), and the replayer rounds values to them
FP8 = ("float8_e4m3", "float8_e4m3fn", "float8_e5m2")
DTYPES = {"float32": np.float32, "bfloat16": bfloat16, "float16": np.float16, "int32": np.int32,
          "int8": np.int8, "uint8": np.uint8, "uint32": np.uint32, **{n: n for n in FP8}}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "int32": 4, "int8": 1, "uint8": 1, "uint32": 4,
            **{n: 1 for n in FP8}}


_DTYPE_NAMES: dict = {}     # dtype spellings (strings, classes, numpy dtypes) already named


def dtype_name(dtype) -> str:
    """The wire name of any dtype spelling a kernel may use (nl.float32, np.float32, 'float32', ...)."""
    t = type(dtype)
    cacheable = t is str or t is type or isinstance(dtype, np.dtype)
    if cacheable:
        name = _DTYPE_NAMES.get(dtype)
        if name is not None:
            return name
        name = _dtype_name(dtype)
        _DTYPE_NAMES[dtype] = name
        return name
    return _dtype_name(dtype)


def _dtype_name(dtype) -> str:
    if dtype is bfloat16 or dtype == "bfloat16":
        return "bfloat16"
    if type(dtype) is str and dtype in FP8:
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in ITEMSIZE:
        raise NKIError(f"unsupported dtype {dtype!r}; use nl.float32, nl.bfloat16, nl.float16, nl.int32, nl.int8")
    return name


class Recorder:
    def __init__(self) -> None:
        self.tensors: list[list] = []
        self.instrs: list[list] = []
        self.grid: tuple = ()            # the SPMD launch grid being traced (kernel[g0, g1](...)), if any
        self.program: tuple = ()         # the instance being traced: its index along each grid dimension
        self.shared: list = []           # nl.shared_hbm tensors of the grid's first instance, in order
        self.shared_next = 0
        # affine_range iterations for the trusted loop model (_affine.py): [first instr, loop id, k (-1: end), trip]
        self.loops: list[list] = []
        self.loop_ids = 0
        self.loops_dropped = False      # past MAX_LOOP_EVENTS: none are sent (the kernel is timed in program order)

    def shared_tensor(self, shape, dtype) -> "Tensor":
        """nl.shared_hbm under a launch grid: every instance allocates the same tensors in the same order; the
        first instance's are the ones all instances share."""
        if self.shared_next == len(self.shared):
            if any(self.program):
                raise NKIError("an SPMD instance allocated more nl.shared_hbm tensors than the first one")
            self.shared.append(self.tensor("hbm", shape, dtype))
        t = self.shared[self.shared_next]
        if t.shape != tuple(_int(s) for s in shape) or t.dtype_name != dtype_name(dtype):
            raise NKIError(f"SPMD instances must allocate the same nl.shared_hbm tensors: {t.shape} {t.dtype_name} "
                           f"in the first, {tuple(shape)} {dtype_name(dtype)} in instance {self.program}")
        self.shared_next += 1
        return t

    def site(self) -> int:
        """The line of the kernel file that made the current call (0 if none)."""
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename == KERNEL_FILE:
                return f.f_lineno
            f = f.f_back
        return 0

    def tensor(self, buffer: str, shape, dtype, pdim: int = 0, alias: int = -1) -> "Tensor":
        dtype = dtype_name(dtype)
        shape = tuple(s if type(s) is int else _int(s) for s in shape)
        if not shape or min(shape) <= 0:
            raise NKIError(f"tensor shape {shape} must be non-empty with positive sizes")
        tid = len(self.tensors)
        self.tensors.append([buffer, list(shape), dtype, pdim, self.site(), alias])
        return Tensor(tid, shape, dtype, buffer)

    def emit(self, op: str, engine: str, dsts: list, srcs: list, attrs: dict | None = None) -> list | None:
        if attrs and attrs.get("mask") is False:      # masked off entirely: nothing runs, nothing is written
            for d in dsts:
                if d.tensor.producer is None and d.tensor.reads == 0:
                    d.tensor.skipped = True
            return None
        if len(self.instrs) >= MAX_INSTRUCTIONS:
            raise NKIError(f"the kernel issued more than {MAX_INSTRUCTIONS:,} instructions")
        for operands in (dsts, srcs):
            for v in operands:
                if isinstance(v, View) and v.opmask is not None:
                    raise NKIError("an operand mask (tile[predicate]) applies to the operands of nc_matmul / "
                                   "nl.matmul only; other instructions take mask=")
        instr = [op, engine, [d.encode() for d in dsts], [_encode_src(s) for s in srcs], attrs or {}, self.site()]
        instrs = self.instrs
        instrs.append(instr)
        for s in srcs:
            if isinstance(s, View):
                s.tensor.reads += 1
        n = len(instrs) - 1
        for d in dsts:
            d.tensor.producer = n
        return instr


RECORDER = Recorder()


def _encode_src(s):
    if type(s) is View:
        return s.encode()
    if isinstance(s, View):
        return s.encode()
    if isinstance(s, Tensor):
        return s.view().encode()
    if isinstance(s, bool):
        return float(s)
    if isinstance(s, (int, float)):
        return float(s)
    if s is None:
        return None
    raise NKIError(f"an operand must be a tile, a tensor view or a Python number, not {type(s).__name__} "
                   f"(NKI kernels cannot pass numpy arrays or other Python objects to instructions)")


def _core(shape) -> tuple:
    """A shape without trailing size-1 axes: a (P, 1) tile fills a (P,) view."""
    shape = tuple(shape)
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def _is_everything(key) -> bool:
    """`[...]` (checked by identity: comparing index expressions builds masks, not booleans)."""
    return key is Ellipsis or (type(key) is tuple and len(key) == 1 and key[0] is Ellipsis)


# -- tensors and views ----------------------------------------------------------------------------
class Tensor:
    """A tensor in HBM, SBUF or PSUM: a handle, never a value."""
    __array_priority__ = 1000
    _nki_handle = True

    def __init__(self, tid: int, shape: tuple, dtype: str, buffer: str) -> None:
        self.tid, self.shape, self.buffer = tid, shape, buffer
        self.dtype_name = dtype
        self.dtype = DTYPES[dtype]
        self.reads = 0
        self.producer: int | None = None
        self.redirect: "View | None" = None    # where this tile's value went (see View.assign)
        self.gone: str | None = None           # why this tile's value is not available
        self.skipped = False                   # made by an instruction whose mask was False: no value

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def view(self) -> "View":
        """self[...]"""
        if self.gone:
            raise NKIError(self.gone)
        if self.redirect is None:
            return View(self, whole_index(self.shape), self.shape)
        return self.redirect

    def reshape(self, shape) -> "Tensor":
        """Another shape over the same HBM storage (row-major), as NKI allows for HBM tensors."""
        shape = tuple(_int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if self.buffer != "hbm":
            raise NKIError("only HBM tensors can be reshaped; reshape on-chip data through indexing")
        size = 1
        for s in shape:
            size *= s
        own = 1
        for s in self.shape:
            own *= s
        if size != own:
            raise NKIError(f"cannot reshape a tensor of shape {self.shape} to {shape}")
        base = RECORDER.tensors[self.tid][5]
        return RECORDER.tensor("hbm", shape, self.dtype_name, 0, self.tid if base == -1 else base)

    def __getitem__(self, key) -> "View":
        if self.gone:
            raise NKIError(self.gone)
        if type(key) is tuple and self.redirect is None and (len(key) != 1 or key[0] is not Ellipsis):
            return View(self, *index(self.shape, key))
        if isinstance(key, (Predicate, bool, np.bool_)):
            return self.view()[key]
        if self.redirect is None and _is_everything(key):
            return View(self, whole_index(self.shape), self.shape)      # the whole tensor (the common case)
        if self.redirect is not None:
            if _is_everything(key) or self.redirect.is_whole():
                return self.redirect if _is_everything(key) else self.redirect.tensor[key]
            raise NKIError("this tile was assigned into part of another tile; index that tile instead")
        return View(self, *index(self.shape, key))

    def __setitem__(self, key, value) -> None:
        self[key].assign(value)

    def __repr__(self) -> str:
        return f"<{self.buffer} tensor {self.shape} {self.dtype_name}>"

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        raise NKIError("tensors cannot be iterated in Python: index them with nl.arange/slices instead")

    def __bool__(self):
        raise NKIError("a tensor's value is unknown while tracing: it cannot be used in Python control flow")

    def __array__(self, *args, **kwargs):
        raise NKIError("NKI tensors are not numpy arrays: their values never reach the kernel's Python code")

    # arithmetic operators follow nl.* (installed by language.py)


class View:
    """An access to part of a tensor: the operand of every instruction."""
    __array_priority__ = 1000
    _nki_handle = True

    def __init__(self, tensor: Tensor, idx: list, shape: tuple) -> None:
        self.tensor, self.idx, self.shape = tensor, idx, tuple(shape)
        # operand masking (`tile[i_f < n]`, for nc_matmul / nl.matmul operands): comparisons over this
        # view's tile axes; False: nothing of the tile takes part
        self.opmask: list | bool | None = None

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def dtype_name(self) -> str:
        return self.tensor.dtype_name

    @property
    def buffer(self) -> str:
        return self.tensor.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def encode(self) -> list:
        t = self.tensor
        if t.redirect is None and not t.gone:
            return [t.tid, self.idx]
        if t.gone:
            raise NKIError(t.gone)
        if t.redirect is not None:
            return t.redirect.encode() if self.is_whole() else t.redirect.tensor[self._key()].encode()
        return [t.tid, self.idx]

    def _key(self):
        raise NKIError("this tile was assigned into another tile; index that tile instead")

    def is_whole(self) -> bool:
        shape = self.tensor.shape
        if self.shape != shape:
            return False
        w = whole_index(shape)
        return self.idx is w or self.idx == w

    def __getitem__(self, key) -> "View":
        if _is_everything(key):
            return self
        if isinstance(key, (Predicate, bool, np.bool_)):
            return self._masked(key)
        if self.is_whole():
            return self.tensor[key]
        if self.tensor.redirect is not None or self.opmask is not None:
            raise NKIError("a view of part of a tile cannot be indexed again: index the tile itself")
        # a view of a view (q[b, h] then [i_p, i_f]): the key indexes this view's tile; substituting its index
        # expressions for the tile's axes gives affine indices of the tensor again
        per_axis, shape = index(self.shape, key)
        rank = len(self.shape)

        def compose(e):
            if isinstance(e, int):
                return e
            const, terms = e[0], []
            for extent, r, pos, coef in e[1]:
                if extent == 1:
                    continue                    # an axis of extent 1 contributes 0
                sub = per_axis[pos + rank - r]
                if isinstance(sub, int):
                    const += coef * sub
                else:
                    const += coef * sub[0]
                    terms += [[e2, r2, p2, c2 * coef] for e2, r2, p2, c2 in sub[1]]
            return [const, terms] if terms else const
        return View(self.tensor, [compose(e) for e in self.idx], shape)

    def __setitem__(self, key, value) -> None:
        self[key].assign(value)

    def _masked(self, pred) -> "View":
        """`tile[pred]`: NKI's operand masking, the part of this tile where pred holds (pred compares index
        expressions over the tile's axes, right-aligned as in indexing; a Python bool keeps all or nothing)."""
        if not isinstance(pred, Predicate):
            pred = bool(pred)
        if pred is True:
            return self
        out = View(self.tensor, self.idx, self.shape)
        if pred is False or self.opmask is False:
            out.opmask = False
            return out
        if len(pred.shape) > len(self.shape) or any(
                n not in (1, m) for n, m in zip(pred.shape[::-1], self.shape[::-1])):
            raise NKIError(f"an operand mask over shape {pred.shape} does not fit a tile of shape {self.shape}")
        out.opmask = (self.opmask or []) + pred.clauses
        return out

    def assign(self, value) -> None:
        """`dst[...] = value`: the instruction that produced `value` writes straight into dst when it can
        (as NKI's compiler does); otherwise a copy is issued."""
        if isinstance(value, Tensor):
            value = value.view()
        if hasattr(value, "assign_into"):        # nl.loop_reduce: an accumulation into this view
            value.assign_into(self)
            return
        if isinstance(value, View):
            if value.tensor is self.tensor and value.idx == self.idx:
                return          # `t[...] += x` ends with t[...] = t[...]
            if value.tensor.skipped:
                return          # `t[...] = op(..., mask=False)` leaves t as it was
            src = value.tensor
            if (value.is_whole() and src.producer is not None and src.reads == 0 and src.buffer != "hbm"
                    and _core(value.shape) == _core(self.shape)):
                instr = RECORDER.instrs[src.producer]
                # the instruction's main result (a second one, e.g. activation's reduce_res, stays put)
                if instr[2][0][0] == src.tid and all(d[0] != src.tid for d in instr[2][1:]):
                    instr[2][0] = self.encode()
                    self.tensor.producer = src.producer
                    src.producer = None
                    RECORDER.tensors[src.tid][0] = "dead"    # never written: it needs no memory
                    src.redirect = self                      # later uses of the value read it here
                    return
            from neuronxcc.nki import language as nl
            nl._copy_into(self, value)
            return
        if isinstance(value, (int, float)):
            from neuronxcc.nki import language as nl
            nl._fill(self, float(value))
            return
        raise NKIError(f"cannot assign a {type(value).__name__} to a tile: assign a tile or a Python number")

    def __bool__(self):
        raise NKIError("a tile's value is unknown while tracing: it cannot be used in Python control flow")

    def __array__(self, *args, **kwargs):
        raise NKIError("NKI tiles are not numpy arrays: their values never reach the kernel's Python code")

    def __iter__(self):
        raise NKIError("tiles cannot be iterated in Python: index them with nl.arange/slices instead")

    def __repr__(self) -> str:
        return f"<view {self.shape} of {self.tensor!r}>"
