"""What every judge child shares (see README.md): the job, the conversation with the evaluator, stages and
failures, seeded models and inputs (with their hidden variants), and outputs handed over as sealed memory.

Everything the judge calls is bound here, before any candidate code is imported: a candidate that replaces a function
afterwards changes nothing the judge calls, and `tampered()` names what it replaced. Nothing here is trusted by the
evaluator for the candidate, though: its outputs leave this process only as sealed memory (`hand_over`), which
nothing can change once sent, and every step it reports is bounded by the evaluator's own clock."""
import fcntl
import json
import mmap
import os
import socket
import sys
import threading
import time
import traceback
import types

import torch
from torch.overrides import TorchFunctionMode

with open(sys.argv[1] if len(sys.argv) > 1 else "job.json") as _fh:
    JOB = json.load(_fh)
DEVICE = JOB["device"]                       # "cuda" or "cpu" (the functional check mode: no GPU times)
CUDA = DEVICE == "cuda"
CHUNK = int(JOB.get("chunk_bytes", 1 << 30))  # the largest sealed piece of an output (under the file-size limit)
MAX_PIECES = 250                              # descriptors in one message (the kernel allows 253)
# float32 means IEEE float32 in the reference: cuDNN's default lets convolutions use TF32 (10-bit mantissas), which
# would make the reference itself less exact than the tolerance assumes; a kernel may still choose TF32 for itself
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

_perf_counter, _monotonic = time.perf_counter, time.monotonic
_send_fds, _recv_fds, _dumps, _loads = socket.send_fds, socket.recv_fds, json.dumps, json.loads
_memfd, _ftruncate, _close, _fcntl, _mmap = os.memfd_create, os.ftruncate, os.close, fcntl.fcntl, mmap.mmap
_frombuffer, _manual_seed, _exit = torch.frombuffer, torch.manual_seed, os._exit
SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL
# the evaluator's socket (SOCK_SEQPACKET: one JSON message, with descriptors, each); none under a profiler
WIRE = socket.socket(fileno=int(JOB["wire"])) if JOB.get("wire") is not None else None
SECONDS = {}
WATCHED = {"torch.cuda.synchronize": lambda: torch.cuda.synchronize, "torch.cuda.Event": lambda: torch.cuda.Event,
           "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
           "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
           "torch.cuda.CUDAGraph.replay": lambda: torch.cuda.CUDAGraph.replay,
           "torch.Tensor.copy_": lambda: torch.Tensor.copy_, "torch.Tensor.clone": lambda: torch.Tensor.clone,
           "torch.frombuffer": lambda: torch.frombuffer, "torch.manual_seed": lambda: torch.manual_seed,
           "time.perf_counter": lambda: time.perf_counter, "socket.send_fds": lambda: socket.send_fds,
           "os.memfd_create": lambda: os.memfd_create, "json.dumps": lambda: json.dumps}
_SNAPSHOT = {name: get() for name, get in WATCHED.items()}


def tampered():
    """The judge functions that no longer are what they were when the judge started."""
    return [name for name, get in WATCHED.items() if get() is not _SNAPSHOT[name]]


# -- the conversation ----------------------------------------------------------------------------------------------
def tell(message, fds=()):
    """One message to the evaluator, with descriptors (closed here once sent: the evaluator holds its own)."""
    if WIRE is not None:
        _send_fds(WIRE, [_dumps(message).encode()], list(fds))
    for fd in fds:
        _close(fd)


def hear():
    """(message, descriptors) from the evaluator; exits quietly when it has hung up."""
    if WIRE is None:
        _exit(0)
    data, fds, _, _ = _recv_fds(WIRE, 1 << 16, MAX_PIECES)
    if not data:
        _exit(0)
    return _loads(data), list(fds)


def fail(stage, what, kind=None):
    """Tell the evaluator why this stage failed, then exit."""
    report = {"stage": stage, "kind": kind, "seconds": SECONDS}
    if isinstance(what, BaseException):
        report["error"] = "%s: %s" % (type(what).__name__, what)
        report["traceback"] = "".join(traceback.format_exception(type(what), what, what.__traceback__))[-6000:]
    else:
        report["error"] = str(what)
    try:
        sys.stderr.write("judge: %s failed: %s\n" % (stage, report["error"]))
        tell({"failed": report})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        _exit(1)


def timed(stage, fn):
    started = _perf_counter()
    try:
        return fn()
    except Exception as exc:
        fail(stage, exc)
    finally:
        SECONDS[stage] = round(SECONDS.get(stage, 0) + _perf_counter() - started, 3)


# -- the problem's code ---------------------------------------------------------------------------------------------
def load_module(path, name, register=True):
    """The file as a module; with register=False a private copy nothing else can import by name (the judge makes its
    inputs with such a copy, so a kernel that edits the `reference` module changes nothing the judge calls)."""
    module = types.ModuleType(name)
    module.__file__ = os.path.abspath(path)
    if register:
        sys.modules[name] = module
    with open(path) as fh:
        exec(compile(fh.read(), module.__file__, "exec"), module.__dict__)
    return module


def make_model(cls, reference, seed):
    """cls(*get_init_inputs()) with torch's generator seeded first, so Model and ModelNew that build the same layers in
    the same order get the same weights (KernelBench's convention)."""
    _manual_seed(seed)
    init = reference.get_init_inputs()
    _manual_seed(seed)
    return cls(*init).to(DEVICE)


class SignedUniform(TorchFunctionMode):
    """Inputs beyond get_inputs' own distribution: torch.rand and rand_like draw from [-1, 1) instead of [0, 1), so an
    activation or a clamp meets negative inputs (a kernel that returns its input unchanged is no longer right)."""

    def __init__(self):
        super().__init__()
        self.hits = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.rand, torch.rand_like) and isinstance(out, torch.Tensor) and out.is_floating_point():
            self.hits += 1
            out = out.mul_(2).sub_(1)
        return out


VARIANTS = {"signed": SignedUniform}


class _Same:
    hits = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def make_inputs(reference, seed, variant=None, on_device=False):
    """The forward's arguments for one seed (the same values in every process on this device): get_inputs() under
    torch's seeded generators, on the CPU then moved to the device (input sets), or made on the device itself (timed
    runs: fast). Returns (inputs, how many draws the variant changed)."""
    _manual_seed(seed)
    mode = VARIANTS[variant]() if variant else _Same()
    with (torch.device(DEVICE) if on_device else _Same()), mode:
        values = reference.get_inputs()
    return [v.to(DEVICE) if isinstance(v, torch.Tensor) else v for v in values], mode.hits


# -- outputs --------------------------------------------------------------------------------------------------------
def outputs_of(result):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise TypeError("forward returned %s, not tensors" % type(o).__name__)
    return list(outs)


def describe(outs):
    return [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")} for o in outs]


def _flat_bytes(tensor):
    t = tensor.detach().contiguous().reshape(-1)
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def hand_over(outs):
    """Each output's bytes copied into sealed memory files (memfd, at most CHUNK bytes each): once sealed, nobody, this
    process included, can change them, so what the evaluator receives is what forward returned by then.
    Returns (each output's shape, dtype, size and pieces; the descriptors, in order)."""
    meta, fds = describe(outs), []
    for o, m in zip(outs, meta):
        flat = _flat_bytes(o)
        m["nbytes"], m["chunks"] = int(flat.numel()), 0
        for start in range(0, m["nbytes"], CHUNK):
            n = min(CHUNK, m["nbytes"] - start)
            fd = _memfd("output", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            _ftruncate(fd, n)
            with _mmap(fd, n) as mm:
                dst = _frombuffer(mm, dtype=torch.uint8, count=n)
                dst.copy_(flat[start:start + n])
                del dst
            _fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
            fds.append(fd)
            m["chunks"] += 1
            if len(fds) > MAX_PIECES:
                for fd in fds:
                    _close(fd)
                raise ValueError("the outputs need more than %d pieces of %d bytes (target option chunk_bytes)"
                                 % (MAX_PIECES, CHUNK))
    return meta, fds


def synchronize():
    if CUDA:
        torch.cuda.synchronize()


def python_threads():
    return sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())


def other_processes():
    """The other processes this one can see (the sandbox gives it a /proc of its own PID namespace: those it
    started), or None where it has no /proc."""
    try:
        return sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid())
    except OSError:
        return None
