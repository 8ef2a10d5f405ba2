"""Trace one candidate kernel in the sandbox and read back its recorded instruction stream, bounded.

The kernel runs in sandboxed/child.py against trainium-sim's own `neuronxcc.nki`; by default in a child
forked from the evaluator's tracing server (forkserver.py), else in a freshly launched sandboxed
interpreter (`fork_server=False`). Either way the stream's size is checked before a byte of it is
decoded and its decoding is memory-bounded: the stream is untrusted.
"""
from __future__ import annotations

import contextlib
import gc
import shutil
import sys
import tempfile
from pathlib import Path

import msgpack

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.base import EvalResult
from autocomp_zmq.hw_runners.trainium_sim.dialect import imported_dialects
from autocomp_zmq.hw_runners.trainium_sim.forkserver import ForkServer
from autocomp_zmq.hw_runners.trainium_sim.program import StreamError
from autocomp_zmq.hw_runners.trainium_sim.workloads import ProblemSpec

HERE = Path(__file__).resolve().parent
FRONTEND = HERE / "frontend"
CHILD = HERE / "sandboxed" / "child.py"
CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LANG": "C.UTF-8"}


def child_argv() -> list[str]:
    return [sys.executable, "-I", "-B", str(CHILD), str(FRONTEND)]


@contextlib.contextmanager
def gc_paused():
    """Decoding allocates a few objects per instruction and keeps them all (the cost model reads them), so the
    cyclic collector would rescan the growing heap again and again (decoding 100k instructions took 3x as long);
    none of them form cycles, and reference counting frees them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def gib(n: int | None) -> str:
    return "no ceiling set" if n is None else f"{n / 2**30:g} GiB"


def _arg(item, names: list[str]):
    if isinstance(item, str) and item in names:
        return {"t": names.index(item)}
    if isinstance(item, str) and item.startswith("nl."):
        return {"d": item[3:]}
    if isinstance(item, list):      # a list stays a list (problem files give tuples), e.g. out_perm=[0, 1, 2, 3]
        return {"v": item, "list": True}
    return {"v": item}


def dialect_of(code: str) -> str:
    """'v1' or 'v2' by the modules the kernel's source imports; 'mixed' when it imports both, 'v1' when it
    imports neither or does not parse. Only the default platform follows from it: the child refuses a mix
    however the imports are written."""
    found = imported_dialects(code)
    return "mixed" if len(found) > 1 else (found.pop() if found else "v1")


TILE_SIZES = ("pmax", "psum_bank_bytes", "psum_banks", "stationary_fmax", "moving_fmax", "bn_stats_fmax",
              "sbuf_partition_bytes", "sbuf_usable_partition_bytes")


def trace(spec: ProblemSpec, code: str, entry_point: str, options, limits: sandbox.Limits,
          server: ForkServer | None, platform: str = "trn1", p: dict | None = None):
    """Run the kernel in the sandbox; (trace dict, common result fields) and None, or None and the failure.
    platform / p: the simulated NeuronCore and its params (the front end's tile sizes come from them)."""
    names = [t.name for t in spec.inputs]
    job = {"source": code, "entry_point": entry_point, "max_instructions": options.max_instructions,
           "platform": platform, "tile_sizes": {k: p[k] for k in TILE_SIZES} if p else None,
           "inputs": [[t.name, list(t.shape), t.dtype] for t in spec.inputs],
           "call": [_arg(c, names) for c in spec.call], "kwargs": {k: _arg(v, names) for k, v in spec.kwargs.items()}}
    work = server.job_dir() if server is not None else Path(tempfile.mkdtemp(prefix="trainium-sim-",
                                                                              dir=options.work_root))
    try:
        (work / "job.bin").write_bytes(msgpack.packb(job, use_bin_type=True))
        if server is not None:
            out = server.run(work, limits)
        else:
            sandbox.prepare_workdir(work, limits)
            out = sandbox.run(child_argv(), work, limits, fds={3: ("r", "job.bin"), 4: ("w", "trace.bin")},
                              env=CHILD_ENV)
        return _read(work, out, options, limits)
    finally:
        if server is not None:
            server.discard(work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _read(work: Path, out: sandbox.Outcome, options, limits: sandbox.Limits):
    stdout = sandbox.read_tail(work / "stdout.txt", 4000)
    stderr = sandbox.read_tail(work / "stderr.txt", 6000)
    common = {"stdout": stdout, "stderr": stderr, "sandbox": out.notes}
    stream = work / "trace.bin"
    size = stream.stat().st_size if stream.exists() else 0
    if size > options.max_trace_bytes:      # checked before a byte of it is decoded
        return None, EvalResult.failure(
            "limit", f"the kernel's recorded instruction stream is {size / 2**20:.1f} MiB; at most "
            f"{options.max_trace_bytes / 2**20:g} MiB (max_trace_bytes) are accepted", **common)
    data = stream.read_bytes() if size else b""
    if not out.ok or not data:
        why = out.describe(limits) if not out.ok else "ended without writing its instruction stream"
        kind = "timeout" if out.timed_out else "crash"
        return None, EvalResult.failure(kind, f"the kernel's process {why}" + (f"\n{stderr}" if stderr else ""),
                                        **common)
    try:
        with sandbox.memory_ceiling(options.max_memory_bytes), gc_paused():
            decoded = msgpack.unpackb(data, raw=False, strict_map_key=False, max_array_len=1 << 24,
                                      max_str_len=1 << 20, max_bin_len=0, max_ext_len=0)
        if not isinstance(decoded, dict):
            raise ValueError("not a map")
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        return None, EvalResult.failure("crash", f"the kernel's instruction stream is unreadable: {exc}", **common)
    except MemoryError:
        return None, EvalResult.failure(
            "limit", f"decoding the kernel's instruction stream needed more memory than the evaluator allows "
            f"({gib(options.max_memory_bytes)}, max_memory_bytes)", **common)
    notes = decoded.get("notes")
    if isinstance(notes, list):
        common["sandbox"] = out.notes + [str(n)[:200] for n in notes[:4]]
    if decoded.get("error"):
        return None, EvalResult.failure("compile", str(decoded["error"]), **common)
    return (decoded, common), None


def io_tensors(trace: dict, tensors, spec: ProblemSpec) -> tuple[list[int], list[int]]:
    """The input and output tensors the stream claims, checked against the problem."""
    ins, outs = trace.get("inputs"), trace.get("outputs")
    if not (isinstance(ins, list) and isinstance(outs, list) and all(isinstance(i, int) for i in ins + outs)
            and all(0 <= i < len(tensors) for i in ins + outs)):
        raise StreamError("malformed instruction stream: inputs/outputs")
    if len(ins) != len(spec.inputs) or len(set(ins)) != len(ins):
        raise StreamError("the stream's input tensors do not match the problem")
    for tid, t in zip(ins, spec.inputs):
        d = tensors[tid]
        if d.buffer != "hbm" or d.shape != t.shape or d.dtype != t.dtype or d.alias != -1:
            raise StreamError(f"input {t.name} must be an HBM tensor {t.dtype}{list(t.shape)}")
    if len(outs) != len(spec.outputs):
        raise StreamError(f"solution() returned {len(outs)} tensor(s); the problem expects {len(spec.outputs)} "
                          f"({', '.join(t.name for t in spec.outputs)})")
    for tid, t in zip(outs, spec.outputs):
        d = tensors[tid]
        base = d.alias if d.alias != -1 else tid
        if base in ins or d.buffer != "hbm" or d.shape != t.shape or d.dtype != t.dtype:
            raise StreamError(f"output {t.name} must be a new HBM tensor {t.dtype}{list(t.shape)} "
                              f"(got {d.buffer} {d.dtype}{list(d.shape)})")
    bases = [tensors[o].alias if tensors[o].alias != -1 else o for o in outs]
    if len(set(bases)) != len(bases):
        raise StreamError("solution() returned the same storage for two outputs")
    return ins, outs
