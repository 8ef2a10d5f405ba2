"""What both judge children share (see README.md): the job, the result, seeded inputs and models, outputs, the pipe
to the evaluator, and the timing loop. The functions the judge relies on are bound here, before any candidate code
is imported, so a candidate that replaces torch.cuda.synchronize or Event.elapsed_time changes nothing the judge
calls, and `tampered()` names what it replaced."""
import importlib.util
import json
import os
import sys
import threading
import time
import traceback

import numpy as np
import torch

with open(sys.argv[1] if len(sys.argv) > 1 else "job.json") as _fh:
    JOB = json.load(_fh)
RESULT = {"ok": False, "stage": "setup", "seconds": {}, "outputs": {}}
DEVICE = JOB["device"]                       # "cuda" or "cpu" (the functional check mode: no GPU times)
CUDA = DEVICE == "cuda"
# float32 means IEEE float32 in the reference: cuDNN's default lets convolutions use TF32 (10-bit mantissas), which
# would make the reference itself less exact than the tolerance assumes; a kernel may still choose TF32 for itself
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
_perf_counter, _write, _np_save = time.perf_counter, os.write, np.save
if CUDA:
    _sync, _Event, _Graph = torch.cuda.synchronize, torch.cuda.Event, torch.cuda.CUDAGraph
    _record, _elapsed, _ev_sync = torch.cuda.Event.record, torch.cuda.Event.elapsed_time, torch.cuda.Event.synchronize
    _replay = torch.cuda.CUDAGraph.replay
WATCHED = {"torch.cuda.synchronize": lambda: torch.cuda.synchronize, "torch.cuda.Event": lambda: torch.cuda.Event,
           "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
           "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
           "torch.cuda.CUDAGraph.replay": lambda: torch.cuda.CUDAGraph.replay,
           "torch.Tensor.copy_": lambda: torch.Tensor.copy_, "torch.Tensor.clone": lambda: torch.Tensor.clone,
           "torch.Tensor.cpu": lambda: torch.Tensor.cpu, "torch.Tensor.numpy": lambda: torch.Tensor.numpy,
           "torch.manual_seed": lambda: torch.manual_seed, "numpy.save": lambda: np.save,
           "time.perf_counter": lambda: time.perf_counter, "os.write": lambda: os.write, "json.dump": lambda: json.dump}
_SNAPSHOT = {name: get() for name, get in WATCHED.items()}


def tampered():
    """The judge functions that no longer are what they were when the judge started."""
    return [name for name, get in WATCHED.items() if get() is not _SNAPSHOT[name]]


def finish(done=False):
    """Write the result, tell the evaluator (which stops this process the moment it hears "done": what is not
    written by then does not count), and exit without atexit handlers or any other thread's last word."""
    with open("result.json.tmp", "w") as fh:
        json.dump(RESULT, fh)
    os.replace("result.json.tmp", "result.json")
    sys.stdout.flush()
    if done:
        tell({"done": True})
    os._exit(0)


def fail(stage, what, kind=None):
    RESULT["stage"] = stage
    if isinstance(what, BaseException):
        RESULT["error"] = "%s: %s" % (type(what).__name__, what)
        RESULT["traceback"] = "".join(traceback.format_exception(type(what), what, what.__traceback__))[-6000:]
    else:
        RESULT["error"] = str(what)
    if kind:
        RESULT["kind"] = kind
    finish()


def timed(stage, fn):
    RESULT["stage"] = stage
    started = _perf_counter()
    try:
        return fn()
    except Exception as exc:
        fail(stage, exc)
    finally:
        RESULT["seconds"][stage] = round(RESULT["seconds"].get(stage, 0) + _perf_counter() - started, 3)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def to_device(value):
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def make_inputs(reference, seed):
    """The forward's arguments for one seed: get_inputs() on the CPU under torch's seeded global generator (the same
    values in every process), then moved to the device."""
    torch.manual_seed(seed)
    return [to_device(v) for v in reference.get_inputs()]


def make_model(cls, reference, seed):
    """cls(*get_init_inputs()) with torch's generator seeded first, so Model and ModelNew that build the same layers in
    the same order get the same weights (KernelBench's convention)."""
    torch.manual_seed(seed)
    init = reference.get_init_inputs()
    torch.manual_seed(seed)
    return cls(*init).to(DEVICE)


def outputs_of(result):
    outs = result if isinstance(result, (tuple, list)) else (result,)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise TypeError("forward returned %s, not tensors" % type(o).__name__)
    return list(outs)


def save_outputs(prefix, outs):
    """Each output as <prefix>_<i>.npy in float32 (the evaluator compares them), with its shape and dtype."""
    meta = []
    for i, o in enumerate(outs):
        array = o.detach().to("cpu", torch.float32).numpy()
        _np_save("%s_%d.npy" % (prefix, i), array)
        meta.append({"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")})
    RESULT["outputs"][prefix] = meta


def tell(message):
    """One JSON line to the evaluator, which notes when it arrives on its own clock."""
    fd = JOB.get("to_parent")
    if fd is not None:
        _write(fd, (json.dumps(message) + "\n").encode())


def hear():
    """One JSON line from the evaluator."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(JOB["from_parent"], 4096)
        if not chunk:
            raise EOFError("the evaluator closed the pipe")
        data += chunk
    return json.loads(data)


def synchronize():
    if CUDA:
        _sync()


def device_inputs(reference, seed):
    """The forward's arguments for one timed run: get_inputs() run with the device as the default device and torch's
    generators seeded, so the tensors are made on the device (fast) and equal in every process on this device."""
    torch.manual_seed(seed)
    with torch.device(DEVICE):
        return [to_device(v) for v in reference.get_inputs()]


def save_raw(path, tensor):
    """A tensor's values in its own dtype (bf16 as its 16-bit patterns: numpy has no bfloat16)."""
    t = tensor.detach().to("cpu")
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    _np_save(path, t.numpy())


def run_timed(forward, inputs, reference, seed, warmup, iters, prefix):
    """`warmup` + `iters` runs of `forward`, each on new inputs: before run i, inputs made from seed + i are copied
    into `inputs` (what forward reads; a captured graph's buffers), the L2 cache is evicted by writing a buffer twice
    its size, and the device synchronized. On a GPU each run is bracketed by CUDA events and ended by a device-wide
    synchronization (work on any stream is counted); on the CPU by perf_counter. Each timed run's outputs are then
    saved (prefix<k>_<o>.npy) for the evaluator to check against the reference's. Returns (each run's time in ms,
    warm-up runs first; the wall time of the whole loop on this process's clock)."""
    flush = torch.empty(JOB["l2_flush_bytes"] // 4, dtype=torch.int32, device=DEVICE) if CUDA else None
    times, meta = [], []
    began = _perf_counter()
    for i in range(warmup + iters):
        for dst, src in zip(inputs, device_inputs(reference, seed + i)):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        if CUDA:
            flush.zero_()
            _sync()
            start, end = _Event(enable_timing=True), _Event(enable_timing=True)
            _record(start)
            outs = forward()
            _sync()                 # every stream's work is done before the end event is recorded
            _record(end)
            _ev_sync(end)
            times.append(_elapsed(start, end))
        else:
            started = _perf_counter()
            outs = forward()
            times.append((_perf_counter() - started) * 1e3)
        if i >= warmup:
            outs = outputs_of(outs)
            for o, out in enumerate(outs):
                save_raw("%s%d_%d.npy" % (prefix, i - warmup, o), out)
            meta = [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")} for o in outs]
    RESULT["outputs"][prefix] = meta
    return times, _perf_counter() - began


def graph_forward(model, inputs):
    """The model's forward captured as a CUDA graph (torch.cuda.graph; warmed up on a side stream first, as its docs
    require): replays run exactly the captured GPU work and no Python of the candidate. None when it cannot be
    captured (a host synchronization, a CPU tensor, ...): the runs are then eager, with the reason kept."""
    if not CUDA:
        return None
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        graph = _Graph()
        with torch.cuda.graph(graph):
            captured = model(*inputs)
        _sync()
    except Exception as exc:
        RESULT["graph_error"] = ("%s: %s" % (type(exc).__name__, exc))[:400]
        return None
    return lambda: (_replay(graph), captured)[1]


def python_threads():
    return sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
