"""trainium-sim's per-problem preparation (trusted side): a reference's outputs as they are compared
(as_compared), and a problem's public input set with those outputs kept on disk (PrepCache), so a second
evaluator process, or the next run, loads them instead of drawing and computing them again (a paper-size
transpose or gemm: seconds).

An entry is keyed by a content hash of everything its values follow from: the problem's definition (tensors,
call, literal arguments, drawn ranges), its reference file's bytes, the seed, the numpy version and the
sources of the code that draws, rounds and runs the reference. Another definition or seed is another key, so
nothing is ever invalidated in place. Entries are written to a temporary file and renamed into place, so a
reader sees a whole file or none; a file that is unreadable or does not hold the arrays the problem declares
(a crash mid-write on a filesystem without atomic rename, a disk error, a hand edit) is ignored and rebuilt.
The oldest entries are removed once the directory holds more than its budget.

Only the public set is kept. The hidden sets are drawn from a secret seed per evaluator and never written
anywhere: what they guard against (a kernel fitted to the public values) depends on nobody being able to read
them. The directory is not in the sandbox's view, so a kernel cannot read the public entries either.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from autocomp_zmq.hw_runners.trainium_sim import ops, workloads
from autocomp_zmq.sandbox.buildcache import cache_root

FORMAT = 1
# what the key leaves out: where the files are (the reference's bytes are hashed instead) and the prose
UNHASHED = ("directory", "defined_in", "prose", "dialects")


def default_dir() -> Path:
    """$AUTOCOMP_CACHE (or $XDG_CACHE_HOME/autocomp-zmq, or ~/.cache/autocomp-zmq) /trainium-sim-prep."""
    return cache_root() / "trainium-sim-prep"


@functools.cache
def _code_digest(spec_type: type) -> bytes:
    """The code that decides the cached values: drawing and rounding inputs, calling the reference, converting its
    outputs (as_compared, here)."""
    h = hashlib.sha256(f"format {FORMAT} numpy {np.__version__}".encode())
    modules = {ops, workloads, sys.modules[__name__], inspect.getmodule(spec_type)}
    for module in sorted(modules, key=lambda m: m.__name__):
        h.update(Path(inspect.getsourcefile(module)).read_bytes())
    return h.digest()


def as_compared(spec: workloads.ProblemSpec, returned: tuple) -> tuple[np.ndarray, ...]:
    """The reference's outputs (as it returned them) as they are compared, row-major (compared piece by piece):
    floating ones in float32, the precision the kernel stores them in, the others in float64. A floating result
    goes to float32 directly: the same single rounding as through float64 (which holds every float exactly), without
    the float64 copy (a paper-size transpose's output: 1 GiB and seconds per input set)."""
    out = []
    for x, t in zip(returned, spec.outputs):
        x = np.asarray(x)
        if t.dtype in ops.FLOATS and not (x.dtype.kind == "f" and x.itemsize <= 8):   # long double: via float64
            x = np.asarray(x, dtype=np.float64)
        out.append(np.ascontiguousarray(x, dtype=np.float32 if t.dtype in ops.FLOATS else np.float64))
    return tuple(out)


def key(spec: workloads.ProblemSpec, seed) -> str:
    """The entry's name: a hash of the problem's definition, its reference file, the seed and the code."""
    h = hashlib.sha256(_code_digest(type(spec)))
    fields = [(f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec) if f.name not in UNHASHED]
    h.update(repr((type(spec).__qualname__, fields, seed)).encode())
    reference = spec.directory / spec.reference_file
    if reference.is_file():
        h.update(reference.read_bytes())
    return h.hexdigest()[:32]


def _arrays(spec: workloads.ProblemSpec, inputs: dict, expected: tuple) -> dict[str, np.ndarray]:
    return {**{f"in_{i}": inputs[t.name] for i, t in enumerate(spec.inputs)},
            **{f"out_{i}": x for i, x in enumerate(expected)}}


def _fits(spec: workloads.ProblemSpec, arrays: dict[str, np.ndarray]) -> bool:
    """Whether the arrays are those the problem declares: each input in its storage type, each output's shape
    and comparison type (float32 for floating outputs)."""
    want = {f"in_{i}": (t.shape, np.dtype(ops.storage(t.dtype))) for i, t in enumerate(spec.inputs)}
    want |= {f"out_{i}": (t.shape, np.dtype(np.float32) if t.dtype in ops.FLOATS else None)
             for i, t in enumerate(spec.outputs)}
    return set(arrays) == set(want) and all(
        arrays[k].shape == shape and (dtype is None or arrays[k].dtype == dtype) for k, (shape, dtype) in want.items())


class PrepCache:
    """The public input sets and expected outputs of problems, on disk under `root` (at most `budget` bytes)."""

    def __init__(self, root: Path | None = None, budget: int = 4 << 30) -> None:
        self.root, self.budget = Path(root) if root is not None else default_dir(), budget

    def load(self, spec: workloads.ProblemSpec, seed) -> tuple[dict[str, np.ndarray], tuple] | None:
        """(inputs by name, expected outputs) as stored for this problem and seed, or None (absent, unreadable,
        or not what the problem declares)."""
        path = self.root / f"{key(spec, seed)}.npz"
        try:
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            if not _fits(spec, arrays):
                return None
            os.utime(path)          # recently used: pruned last
        except Exception:           # noqa: BLE001  (any damage: rebuild)
            return None
        inputs = {t.name: arrays[f"in_{i}"] for i, t in enumerate(spec.inputs)}
        return inputs, tuple(arrays[f"out_{i}"] for i in range(len(spec.outputs)))

    def store(self, spec: workloads.ProblemSpec, seed, inputs: dict, expected: tuple) -> None:
        """Keep an entry (written whole or not at all); failures to write are ignored: the cache only saves time."""
        arrays = _arrays(spec, inputs, expected)
        if sum(a.nbytes for a in arrays.values()) > self.budget // 2:
            return
        tmp = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".prep-", suffix=".tmp", dir=self.root)
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, self.root / f"{key(spec, seed)}.npz")
            tmp = None
            self.prune()
        except OSError:
            pass
        finally:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def prune(self) -> None:
        """Remove the least recently used entries while the directory holds more than the budget."""
        entries = []
        for p in self.root.glob("*.npz"):
            try:
                st = p.stat()
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        for _, size, p in sorted(entries, key=lambda e: e[0]):
            if total <= self.budget:
                break
            p.unlink(missing_ok=True)
            total -= size
