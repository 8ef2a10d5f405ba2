"""The timed runs, the same code for the reference and the candidate (see README.md), which the evaluator interleaves:
run k of the reference, then run k of the candidate, on the same inputs.

Each run is opened by the evaluator, which tells its seed only then and notes the time on its own clock; the run makes
its inputs from that seed (on the device, with the judge's private copy of the problem's get_inputs), copies them into
the buffers forward reads, evicts the L2 cache, runs forward between two events, hands the outputs over as sealed
memory, and says how long each step took. The evaluator closes the run when it hears that, so whatever a kernel does
with a run's inputs happens inside a window the evaluator measured itself; the steps' times are checked against that
window and against the reference's same steps.

On a GPU the steps are timed by CUDA events recorded on the current stream: forward is replayed from a CUDA graph where
it can be captured (no candidate Python runs then, and the end event is recorded right after the replay, on the GPU);
otherwise it runs eagerly and the end event follows a device-wide synchronize (work on any stream counts; the host's
synchronize latency is included, and the verdict says so). On the CPU, perf_counter times them."""
import gc

import torch

import judge_common as h

if h.CUDA:
    _sync, _Event, _Graph = torch.cuda.synchronize, torch.cuda.Event, torch.cuda.CUDAGraph
    _record, _elapsed, _ev_sync = torch.cuda.Event.record, torch.cuda.Event.elapsed_time, torch.cuda.Event.synchronize
    _replay = torch.cuda.CUDAGraph.replay
_copy, _zero = torch.Tensor.copy_, torch.Tensor.zero_


def graph_forward(model, inputs):
    """(forward, None) with forward replaying a CUDA graph of model(*inputs) (torch.cuda.graph; warmed up on a side
    stream first, as its docs require), or (None, why it could not be captured: a host synchronization, a CPU tensor,
    a kernel launched on the legacy default stream, ...)."""
    if not h.CUDA:
        return None, "no GPU (CPU check)"
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
        try:                      # a failed capture can leave the device in an error state: start eager runs clean
            _sync()
        except Exception:
            pass
        return None, ("%s: %s" % (type(exc).__name__, exc))[:400]
    return (lambda: (_replay(graph), captured)[1]), None


class Runs:
    """What the timed runs share: the buffers forward reads, the forward they time, how, and the L2 flush buffer."""

    def __init__(self, model, reference, seed, require_graph):
        self.reference = reference
        self.inputs, _ = h.make_inputs(reference, seed, on_device=True)
        self.forward, self.graph_error = graph_forward(model, self.inputs)
        self.how = "graph" if self.forward is not None else "eager"
        if self.forward is None:
            if h.CUDA and require_graph:
                h.fail("benchmark", "forward could not be captured as a CUDA graph (%s), and this evaluator times only "
                                    "graph replays (target option require_graph)" % self.graph_error, "crash")
            self.forward = lambda: model(*self.inputs)
        self.flush = torch.empty(int(h.JOB["l2_flush_bytes"]) // 4, dtype=torch.int32, device=h.DEVICE) \
            if h.CUDA else None

    def ready(self):
        # no collection of the whole heap in the middle of a run: the judge's steps then cost the same in both
        # children, whatever a kernel left on its heap (tensors are freed by reference counting meanwhile)
        gc.collect()
        gc.disable()
        h.tell({"ready": True, "timed_as": self.how, "graph_error": self.graph_error})

    def _refill(self, seed):
        fresh, _ = h.make_inputs(self.reference, seed, on_device=True)
        for dst, src in zip(self.inputs, fresh):
            if isinstance(dst, torch.Tensor):
                _copy(dst, src)

    def step(self, message):
        """One run the evaluator opened with `message` (its seed; whether its outputs are kept: warm-up runs' are
        not): answered with the steps' times and the outputs. Returns the outputs."""
        k, seed, keep = message["run"], message["seed"], message.get("keep", False)
        clock = h._perf_counter
        if h.CUDA:
            marks = [_Event(enable_timing=True) for _ in range(4)]
            _record(marks[0])
            self._refill(seed)
            _record(marks[1])
            _zero(self.flush)
            _record(marks[2])
            outs = self.forward()
            if self.how != "graph":
                _sync()
            _record(marks[3])
            began = clock()
            outs = h.outputs_of(outs)
            meta, fds = h.hand_over(outs) if keep else (None, [])
            _ev_sync(marks[3])
            regions = {"gen": _elapsed(marks[0], marks[1]), "flush": _elapsed(marks[1], marks[2]),
                       "bracket": _elapsed(marks[2], marks[3]), "handover": (clock() - began) * 1e3}
        else:
            t0 = clock()
            self._refill(seed)
            t1 = clock()
            outs = self.forward()
            t2 = clock()
            outs = h.outputs_of(outs)
            meta, fds = h.hand_over(outs) if keep else (None, [])
            regions = {"gen": (t1 - t0) * 1e3, "flush": 0.0, "bracket": (t2 - t1) * 1e3,
                       "handover": (clock() - t2) * 1e3}
        h.tell({"done": k, "regions": regions, "outputs": meta}, fds)
        return outs
