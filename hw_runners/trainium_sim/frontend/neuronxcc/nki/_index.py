"""Index expressions of trainium-sim's NKI front end: nl.arange axes, their affine combinations, masks
(comparisons of them) and the encoding of `tensor[key]` for the instruction stream (see _trace.py for
the wire format). Nothing here knows of tensors' values: there are none in a trace."""
from __future__ import annotations


class NKIError(Exception):
    """Misuse of the NKI API, found while tracing (the message names the call)."""


# -- index expressions ----------------------------------------------------------------------------
class IndexExpr:
    """const + sum(coef * axis), each axis an nl.arange placed at `pos` of a shape of `rank` dims."""
    __array_priority__ = 1000

    def __init__(self, const: int = 0, terms: tuple = ()) -> None:
        self.const = int(const)
        self.terms = terms    # ((extent, rank, pos, coef), ...)

    @property
    def shape(self) -> tuple[int, ...]:
        rank = max((t[1] for t in self.terms), default=0)
        shape = [1] * rank
        for extent, r, pos, _ in self.terms:
            shape[pos + rank - r] = max(shape[pos + rank - r], extent)
        return tuple(shape)

    def encode(self) -> list:
        return [self.const, [list(t) for t in self.terms]]

    def __add__(self, other):
        if isinstance(other, IndexExpr):
            return IndexExpr(self.const + other.const, self.terms + other.terms)
        return IndexExpr(self.const + _int(other), self.terms)
    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other if isinstance(other, IndexExpr) else -_int(other))

    def __rsub__(self, other):
        return (-self) + _int(other)

    def __neg__(self):
        return self * -1

    def __mul__(self, k):
        k = _int(k)
        return IndexExpr(self.const * k, tuple((e, r, p, c * k) for e, r, p, c in self.terms))
    __rmul__ = __mul__

    def _divmod(self, k, what: str):
        """(quotient, remainder) of self by a positive integer k, both affine, when they are: the terms
        whose coefficient k divides go to the quotient; the rest (with the constant's remainder) must stay
        inside one block of k over the whole range, so that its floor is one number. (4 * i + j) // 4 with
        j in [0, 4) is i; (i + 128 * t) // 128 with i in [0, 128) is t; i // 2 over [0, 128) is not affine."""
        k = _int(k)
        if k <= 0:
            raise NKIError(f"an index expression {what} {k}: only a positive integer divisor is supported")
        q_const, rest_const = divmod(self.const, k)
        # every term stays on both sides (coefficient 0 where it does not belong): the shape is kept
        q_terms = tuple((e, r, p, c // k if c % k == 0 else 0) for e, r, p, c in self.terms)
        rest = tuple((e, r, p, 0 if c % k == 0 else c) for e, r, p, c in self.terms)
        lo = rest_const + sum(min(0, c * (e - 1)) for e, _, _, c in rest)
        hi = rest_const + sum(max(0, c * (e - 1)) for e, _, _, c in rest)
        if lo // k != hi // k:
            raise NKIError(f"index expression {what} {k} is not affine: its value steps inside the index range "
                           f"({lo}..{hi} spans more than one multiple of {k}); index with an extra axis instead, "
                           f"e.g. nl.arange(n // {k})[:, None] * {k} + nl.arange({k})[None, :]")
        f = lo // k
        return IndexExpr(q_const + f, q_terms), IndexExpr(rest_const - k * f, rest)

    def __floordiv__(self, k):
        return self._divmod(k, "//")[0]

    def __mod__(self, k):
        return self._divmod(k, "%")[1]

    def __rfloordiv__(self, other):
        raise NKIError("an index expression can divide nothing: only `expression // integer` is supported")

    __rmod__ = __rfloordiv__

    def __getitem__(self, key):
        """arange(n)[:, None] / [None, :]: place the axis in a higher-rank shape."""
        key = key if isinstance(key, tuple) else (key,)
        rank = len(self.shape)
        if sum(k is not None for k in key) != rank or any(k is not None and k != slice(None) for k in key):
            raise NKIError(f"an index expression can only be reshaped with ':' and None, e.g. [:, None]; got {key}")
        placed = [i for i, k in enumerate(key) if k is not None]
        terms = tuple((e, len(key), placed[p + rank - r], c) for e, r, p, c in self.terms)
        return IndexExpr(self.const, terms)

    def _cmp(self, op, value):
        if isinstance(value, IndexExpr):           # i_p >= i_f is i_p - i_f >= 0
            return (self - value)._cmp(op, 0)
        return Predicate([[self.encode(), op, _int(value)]], self.shape)

    def __lt__(self, v): return self._cmp("<", v)
    def __le__(self, v): return self._cmp("<=", v)
    def __gt__(self, v): return self._cmp(">", v)
    def __ge__(self, v): return self._cmp(">=", v)
    def __eq__(self, v): return self._cmp("==", v)   # noqa: E704
    def __ne__(self, v): return self._cmp("!=", v)   # noqa: E704
    __hash__ = object.__hash__


class Predicate:
    """A conjunction of comparisons of index expressions with integers (NKI masks)."""
    def __init__(self, clauses: list, shape) -> None:
        self.clauses, self.shape = clauses, tuple(shape)

    def __and__(self, other):
        if isinstance(other, bool):                # a condition on loop indices, known while tracing
            return self if other else False
        if not isinstance(other, Predicate):
            raise NKIError("masks combine with & only with other index comparisons")
        return Predicate(self.clauses + other.clauses, _broadcast(self.shape, other.shape))

    __rand__ = __and__

    def __bool__(self):
        raise NKIError("a mask is symbolic: it cannot be used in Python control flow (if/while/and/or)")


def _int(v) -> int:
    if type(v) is int:
        return v
    if isinstance(v, IndexExpr):
        raise NKIError("index expressions can only be multiplied by integers")
    if getattr(v, "_nki_handle", False):
        raise NKIError("tensor values cannot be used as indices or sizes: kernels are traced, values are unknown "
                       "until the kernel runs (control flow and addresses must not depend on data)")
    try:
        i = int(v)
    except (TypeError, ValueError):
        raise NKIError(f"expected an integer index, got {type(v).__name__}") from None
    if i != v:
        raise NKIError(f"expected an integer index, got {v!r}")
    return i


def _broadcast(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise NKIError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


_TILE_BROADCAST: dict = {}


def tile_broadcast(*shapes):
    """Broadcast of tile shapes, NKI's way: tiles lead with the partition axis, so a shorter shape is
    padded with free axes of size 1 on the right ((P,) acts as (P, 1)), unlike numpy."""
    try:
        return _TILE_BROADCAST[shapes]          # shapes that broadcast, seen before (tuples of ints)
    except (KeyError, TypeError):
        pass
    rank = max((len(s) for s in shapes), default=0)
    out = broadcast_shapes(*[tuple(s) + (1,) * (rank - len(s)) for s in shapes])
    if all(type(s) is tuple and all(type(n) is int for n in s) for s in shapes) and len(_TILE_BROADCAST) < 4096:
        _TILE_BROADCAST[shapes] = out
    return out


def broadcast_shapes(*shapes):
    out = ()
    for s in shapes:
        out = _broadcast(out, s)
    return out


def arange(*args) -> IndexExpr:
    r = range(*(_int(a) for a in args))
    if len(r) <= 0 or r.step != 1:
        raise NKIError(f"nl.arange needs a non-empty unit-step range, got range{args}")
    return IndexExpr(r.start, ((len(r), 1, 0, 1),))


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        out = []
        for pos, k in enumerate(key):
            if not isinstance(k, slice) or k.step not in (None, 1):
                raise NKIError("nl.mgrid takes unit-step slices, e.g. nl.mgrid[0:128, 0:512]")
            start, stop = _int(k.start or 0), _int(k.stop)
            out.append(IndexExpr(start, ((stop - start, len(key), pos, 1),)))
        return _Grid(out) if len(out) > 1 else out[0]


class _Grid(tuple):
    """nl.mgrid's axes; NKI also names the first two .p (partition) and .x (free)."""
    p = property(lambda self: self[0])
    x = property(lambda self: self[1])


mgrid = _MGrid()


# Encodings are shared between the views (and instructions) that use the same index: nothing mutates an
# encoding once made (a view of a view, expand_dims and operand masks build new lists).
_WHOLE: dict = {}
_INDEX: dict = {}
_INDEX_CACHE_MAX = 1 << 18


def whole_index(shape) -> list:
    try:
        return _WHOLE[shape]
    except (KeyError, TypeError):
        pass
    w = [[0, [[n, len(shape), d, 1]]] for d, n in enumerate(shape)]
    if type(shape) is tuple:
        _WHOLE[shape] = w
    return w


def _index_key(key):
    """A hashable stand-in for an index key made only of ints, slices of ints, Ellipsis and index expressions
    (what determines index()'s result), or None for any other key (it is encoded afresh, and checked)."""
    if type(key) is not tuple:
        key = (key,)
    parts = []
    for k in key:
        t = type(k)
        if t is int:
            parts.append(k)
        elif t is slice:
            a, b, c = k.start, k.stop, k.step
            if ((a is None or type(a) is int) and (b is None or type(b) is int)
                    and (c is None or type(c) is int)):
                parts.append((a, b, c))
            else:
                return None
        elif t is IndexExpr:
            if type(k.const) is not int or type(k.terms) is not tuple:
                return None
            parts.append((k.const, k.terms))
        elif k is Ellipsis:
            parts.append(k)
        else:
            return None
    return tuple(parts)


def index(shape: tuple, key) -> tuple[list, tuple]:
    """Encode `tensor[key]`; returns (per-dim index, tile shape). The result is shared: never mutate it."""
    ck = _index_key(key)
    if ck is not None:
        ck = (shape, ck)
        try:
            return _INDEX[ck]
        except KeyError:
            pass
        except TypeError:         # unhashable parts (terms built by hand): no sharing
            ck = None
    result = _index(shape, key)
    if ck is not None:
        if len(_INDEX) >= _INDEX_CACHE_MAX:
            _INDEX.clear()
        _INDEX[ck] = result
    return result


def _index(shape: tuple, key) -> tuple[list, tuple]:
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if len(key) < len(shape):
        key = key + (slice(None),) * (len(shape) - len(key))
    if len(key) != len(shape):
        raise NKIError(f"{len(key)} indices for a tensor of {len(shape)} dimensions {shape}")
    nslice = sum(isinstance(k, slice) for k in key)
    rank = max([nslice] + [len(k.shape) for k in key if isinstance(k, IndexExpr)])
    out, shapes, pos = [], [], 0
    for dim, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            for b in (k.start, k.stop):
                if b is not None and not -n <= _int(b) <= n:
                    raise NKIError(f"slice {k.start}:{k.stop} is out of bounds for dimension {dim} of size {n}")
            start, stop, step = k.indices(n)
            if step <= 0 or stop <= start:
                raise NKIError(f"empty or reversed slice {k} of dimension {dim} (size {n})")
            extent = len(range(start, stop, step))
            axis = pos + rank - nslice
            pos += 1
            out.append([start, [[extent, rank, axis, step]]])       # IndexExpr(start, ((extent, rank, axis, step),))
            shapes.append((1,) * axis + (extent,) + (1,) * (rank - axis - 1))
        elif isinstance(k, IndexExpr):
            out.append(k.encode())
            shapes.append(k.shape)
        else:
            i = _int(k)
            if not -n <= i < n:
                raise NKIError(f"index {i} is out of bounds for dimension {dim} of size {n}")
            out.append(i % n)
    tile = broadcast_shapes(*shapes) if shapes else ()
    if not tile:
        tile = (1,)
    return out, tile
