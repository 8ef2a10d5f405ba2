"""The sandboxed half of a trainium-sim evaluation: trace one candidate kernel.

The kernel may be written in NKI v1 (`neuronxcc.nki`) or NKI v2 (`nki`): both front ends are imported here and
record into one stream; a kernel importing both is refused.

Run by the evaluator through the sandbox launcher (empty environment, rlimits, private filesystem view,
no network, unprivileged) as `python -I child.py FRONTEND_DIR`. It reads the job from descriptor 3,
imports everything a kernel may use, then installs a seccomp allowlist (no files, sockets or processes
from here on), runs the kernel against symbolic input tensors and writes the recorded instruction
stream to descriptor 4. It never holds a value of any tensor, so the stream cannot depend on data;
the trusted replayer decides what the stream computes and costs.

With `--serve` it is a fork server (see forkserver.py): it imports once, then hands each request on
descriptor 3 to a child forked ahead for it (before the request came), which takes the job's files as its
descriptors, lowers its rlimits and runs main() exactly as a freshly launched process would; the server,
which never runs kernel code, reports how the child ended on descriptor 4. The interpreter start and the
imports (~0.1 s) are paid once, and the fork is off the evaluation's path.
"""
import builtins
import gc
import linecache
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [sys.argv[1], HERE]

import math  # noqa: E402,F401  (kernels may import it: loaded before the filter)

import msgpack  # noqa: E402
import numpy  # noqa: E402,F401

import neuronxcc.nki as nki  # noqa: E402,F401
import neuronxcc.nki.isa  # noqa: E402,F401
import neuronxcc.nki.language as nl  # noqa: E402
from neuronxcc.nki import _trace  # noqa: E402
import nki as nki_v2  # noqa: E402  (NKI v2, `import nki`: the same recorder, see frontend/nki/_v2.py)
import nki.isa  # noqa: E402,F401
import nki.language as nl_v2  # noqa: E402

import seccomp  # noqa: E402

ALLOWED_IMPORTS = ("neuronxcc", "nki", "numpy", "math", "__future__", "typing", "functools", "itertools", "operator")
real_import = builtins.__import__


class Unavailable:
    """What a kernel gets for a module outside ALLOWED_IMPORTS (torch, scipy, argparse, time, os, ...): the
    harnesses and tutorial files NKI kernels ship in import such modules for their host-side code, so the
    import succeeds and the file runs unchanged; any use of the stand-in inside the kernel is an NKI error.
    It is not the module: nothing of it is reachable from here."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _refuse(self, *_args, **_kwargs):
        raise _trace.NKIError(f"{self._name} is not available in a kernel traced by trainium-sim (only "
                              f"{', '.join(ALLOWED_IMPORTS)} are); host-side code such as torch or file and "
                              f"clock access cannot run on the NeuronCore")

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Unavailable(f"{self._name}.{attr}")

    def __setitem__(self, key, value) -> None:
        """Host configuration (`os.environ["NEURON_CC_FLAGS"] = ...` at the top of a tutorial file) has no
        meaning here: there is no compiler to configure; the write goes nowhere."""

    def __mro_entries__(self, bases):
        """`class Model(torch.nn.Module)` in a file that also holds kernels: a class that cannot be made."""
        return (_HostClass,)

    __call__ = __setattr__ = __getitem__ = __iter__ = __bool__ = __int__ = __float__ = __index__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __len__ = __contains__ = _refuse

    def __repr__(self) -> str:
        return f"<{self._name}: not available in a kernel>"


class _HostClass:
    """The base of classes derived from an unavailable module's classes: instantiating one is refused."""

    def __init__(self, *args, **kwargs):
        raise _trace.NKIError(f"{type(self).__name__} derives from a module that is not available in a kernel "
                              f"traced by trainium-sim")


DIALECTS = ("neuronxcc", "nki")      # NKI v1, NKI v2 (Neuron SDK 2.27+)
imported_dialects: set = set()


def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    root = name.split(".")[0]
    if level != 0:
        raise ImportError(f"relative import of {name!r} in a kernel: the kernel is one file")
    if root in DIALECTS:
        # one kernel, one dialect: the two front ends share a recorder but differ in their APIs' meaning (NKI
        # 0.4.0 makes neuronxcc.nki inside an nki kernel a compilation error)
        imported_dialects.add(root)
        if len(imported_dialects) > 1:
            raise _trace.NKIError("this kernel imports both NKI v1 (neuronxcc.nki) and NKI v2 (nki); a kernel is "
                                  "written in one dialect (NKI 0.4.0 rejects neuronxcc.nki inside nki kernels)")
    if root not in ALLOWED_IMPORTS:
        return Unavailable(name if fromlist else root)
    return real_import(name, globals, locals, fromlist, level)


def decode_arg(item, inputs):
    if isinstance(item, dict):
        if "t" in item:
            return inputs[item["t"]]
        if "d" in item:
            return _trace.DTYPES[item["d"]]
        if item.get("list") and isinstance(item["v"], list):
            return [tuple_of(x) for x in item["v"]]
        return tuple_of(item["v"])
    return item


def tuple_of(v):
    return tuple(tuple_of(x) for x in v) if isinstance(v, list) else v


def kernel_traceback(exc: BaseException) -> str:
    """The kernel's own frames of a traceback (never the simulator's)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _trace.KERNEL_FILE]
    lines = [f"  kernel.py line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames[-6:]]
    return "\n".join(lines)


def main() -> int:
    with os.fdopen(3, "rb") as fh:
        job = msgpack.unpackb(fh.read(), raw=False, strict_map_key=False)
    _trace.MAX_INSTRUCTIONS = int(job["max_instructions"])
    platform, sizes = job.get("platform"), job.get("tile_sizes")
    if platform and sizes:      # the NeuronCore the evaluator simulates: its tile sizes, nisa.get_nc_version()
        nl_v2.set_platform(platform, sizes)
        if platform != "trn1":  # v1's constants are NeuronCore-v2's already
            vars(nl.tile_size).update(sbuf_partition_bytes=int(sizes["sbuf_partition_bytes"]),
                                      total_available_sbuf_size=int(sizes["sbuf_usable_partition_bytes"]))
            neuronxcc.nki.isa.get_nc_version = lambda: nki_v2.isa.get_nc_version().value
    out = os.fdopen(4, "wb")
    result = {"error": None}
    note = seccomp.install()
    try:
        inputs = [_trace.RECORDER.tensor("hbm", shape, dtype) for _name, shape, dtype in job["inputs"]]
        code = compile(job["source"], _trace.KERNEL_FILE, "exec", dont_inherit=True)
        # tracebacks quote the kernel's own lines
        linecache.cache[_trace.KERNEL_FILE] = (len(job["source"]), None, job["source"].splitlines(True),
                                               _trace.KERNEL_FILE)
        kernel_builtins = dict(vars(builtins), __import__=guarded_import)
        module = {"__name__": "kernel", "__builtins__": kernel_builtins}
        exec(code, module)
        fn = module.get(job["entry_point"])
        if fn is None or not callable(fn):
            raise _trace.NKIError(f"the kernel defines no function {job['entry_point']}()")
        args = [decode_arg(a, inputs) for a in job["call"]]
        kwargs = {k: decode_arg(v, inputs) for k, v in job["kwargs"].items()}
        # the recorder keeps every instruction it records (millions of small lists), so the cyclic collector
        # would rescan a growing heap over and over; a kernel's garbage is freed by reference counting, and
        # cycles it makes on purpose only meet the sandbox's memory limit sooner
        gc.disable()
        returned = fn(*args, **kwargs)
        returned = returned if isinstance(returned, (tuple, list)) else (returned,)
        outs = []
        for r in returned:
            if isinstance(r, _trace.View) and r.is_whole():
                r = r.tensor
            if not isinstance(r, _trace.Tensor) or r.buffer != "hbm":
                raise _trace.NKIError("solution() must return the HBM tensor(s) it allocated with "
                                      "nl.ndarray(..., buffer=nl.shared_hbm), got " + repr(r))
            outs.append(r.tid)
        result.update(inputs=[t.tid for t in inputs], outputs=outs)
    except _trace.NKIError as exc:
        result["error"] = f"NKI error: {exc}\n{kernel_traceback(exc)}"
    except SyntaxError as exc:
        result["error"] = f"syntax error at kernel.py line {exc.lineno}: {exc.msg}"
    except RecursionError as exc:
        result["error"] = f"RecursionError: {exc}\n{kernel_traceback(exc)}"
    except MemoryError as exc:
        result["error"] = f"MemoryError: the kernel ran out of memory while tracing\n{kernel_traceback(exc)}"
    except Exception as exc:   # the kernel's own bug: report it with its frames
        result["error"] = f"{type(exc).__name__}: {exc}\n{kernel_traceback(exc)}"
    result["tensors"] = _trace.RECORDER.tensors
    result["instrs"] = _trace.RECORDER.instrs
    result["loops"] = [] if _trace.RECORDER.loops_dropped else _trace.RECORDER.loops
    result["notes"] = [note]
    out.write(msgpack.packb(result, use_bin_type=True))
    out.flush()
    return 0


FRAME = struct.Struct("<I")
DONE = struct.Struct("<i")                    # a job child's exit status, on its done pipe
DONE_FD = 5
LIMITS = {"cpu_s": resource.RLIMIT_CPU, "mem": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
          "nofile": resource.RLIMIT_NOFILE}


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _job_child(req: dict, done: int) -> None:
    """In the forked child: the job's files on descriptors 1-4, the server's `done` pipe on 5, nothing else
    open, lower limits, then main(); once its files are written and flushed, it tells the server its exit status
    on the pipe, so the server can reply without waiting for the exit (tearing the address space down: ~1-2 ms)."""
    try:
        os.chdir(req["dir"])
        opened = {3: os.open("job.bin", os.O_RDONLY),
                  4: os.open("trace.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  1: os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  2: os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)}
        for num, fd in opened.items():
            os.dup2(fd, num)
        os.dup2(done, DONE_FD)
        os.closerange(DONE_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        for key, which in LIMITS.items():       # only ever lowered: the server's own limits bound the job's
            hard = resource.getrlimit(which)[1]
            value = int(req[key]) if hard == resource.RLIM_INFINITY else min(int(req[key]), hard)
            resource.setrlimit(which, (value, value))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except BaseException:                     # the job's directory is unusable: the sandbox failed, not the kernel
        os._exit(125)
    try:
        code = main()
    except SystemExit as exc:                 # as the interpreter would end on it
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    try:
        os.write(DONE_FD, DONE.pack(code))
    except (OSError, struct.error):
        pass                                  # the server waits for the exit instead
    os._exit(code)


def _wait(pid: int, done: int, wall_s: float) -> tuple[int, bool, bool]:
    """(exit status, timed out, reaped): the status the child reported on its `done` pipe once its files were
    written (then it is killed, in case a kernel wrote that report itself and kept running, and reaped after
    the reply), or its wait status, killing it once `wall_s` has passed (the server alone reaps it, so the pid
    cannot have been reused when it is killed)."""
    deadline = time.monotonic() + wall_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    poll = select.poll()
    poll.register(done, select.POLLIN)
    if pidfd is not None:
        poll.register(pidfd, select.POLLIN)
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        ready = {fd for fd, _ in poll.poll(max(0.0, min(left, 0.02 if pidfd is None else left)) * 1000)}
        if done in ready:
            report = os.read(done, DONE.size)
            if len(report) == DONE.size:
                os.kill(pid, signal.SIGKILL)
                if pidfd is not None:
                    os.close(pidfd)
                return _status_of(DONE.unpack(report)[0]), False, False
            poll.unregister(done)             # closed without a report: the child ended some other way
        if (pidfd in ready) if pidfd is not None else not _running(pid):
            break
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            timed_out = True
            break
    if pidfd is not None:
        os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    return status, timed_out, True


def _status_of(code: int) -> int:
    """The wait status of a child that exited with `code`, as os.waitpid gives it."""
    return (code & 0xFF) << 8


def _running(pid: int) -> bool:
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


def _read_frame(fd: int) -> bytes:
    return _read_exact(fd, FRAME.unpack(_read_exact(fd, FRAME.size))[0])


def _forked() -> tuple[int, int, int]:
    """A child forked now for the next job, waiting for its request on a pipe of its own: (pid, that pipe, the
    pipe it reports on when its files are written).
    Forking ahead takes the fork off an evaluation's path (it happens while the evaluator replays the last
    stream); the child is a copy of the server's state as untouched by kernels as one forked on demand, and
    takes exactly one job. It exits when its pipe closes unused (the server ended)."""
    r, w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w)
            os.close(done_r)
            req = msgpack.unpackb(_read_frame(r), raw=False)
        except BaseException:
            os._exit(0)
        _job_child(req, done_w)
    os.close(r)
    os.close(done_w)
    return pid, w, done_r


def serve() -> int:
    """Hand each request to a child forked ahead for it, until the evaluator closes the request pipe."""
    seccomp.prepare()                         # the filter every child installs, built once
    gc.freeze()                               # the imported modules' objects stay shared with every child
    while True:
        pid, handoff, done = _forked()
        try:
            frame = _read_frame(3)
        except EOFError:
            os.close(handoff)
            os.close(done)
            os.waitpid(pid, 0)
            return 0
        req = msgpack.unpackb(frame, raw=False)
        started = time.monotonic()
        try:
            os.write(handoff, FRAME.pack(len(frame)) + frame)
        except BrokenPipeError:               # the waiting child is gone (killed): the job fails, as a crash
            pass
        os.close(handoff)
        status, timed_out, reaped = _wait(pid, done, float(req["wall_s"]))
        os.close(done)
        # reaped False: the child ends while the evaluator reads its files; it is reaped before the next request
        # is read, so the next reply means this job's directory is no longer written (forkserver.py)
        reply = msgpack.packb({"status": os.waitstatus_to_exitcode(status), "timed_out": timed_out,
                               "wall_s": time.monotonic() - started, "reaped": reaped})
        os.write(4, FRAME.pack(len(reply)) + reply)
        if not reaped:
            os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[2:3] == ["--serve"] else main())
