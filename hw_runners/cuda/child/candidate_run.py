"""The candidate's side of one evaluation (README.md). In order: import kernel.py (its inline CUDA compiles here),
build ModelNew, run it on every input set (outputs saved for the evaluator, which compares them with the
reference's), checking as it goes that it leaves its inputs unchanged, returns no input (or view of one), and does
not hand back the same output buffer on the next call; then that the judge's functions are untouched and no thread
of the candidate's is left running; then the timed runs: the forward captured as a CUDA graph, the evaluator told
"ready", and only then told the seed the timed runs' inputs are made from; every timed run's outputs are saved
for the evaluator to check."""
import torch

import judge_common as h

reference = h.timed("import", lambda: h.load_module("reference.py", "reference"))
threads = h.python_threads()
kernel = h.timed("import", lambda: h.load_module("kernel.py", "kernel"))
if not isinstance(getattr(kernel, "ModelNew", None), type):
    h.fail("import", "kernel.py defines no class ModelNew")
model = h.timed("init", lambda: h.make_model(kernel.ModelNew, reference, h.JOB["init_seed"]))


def overlaps(a, b):
    """Whether two tensors share any bytes of storage (a view, a reshape, the same tensor)."""
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a.device == b.device and a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def check_call(inputs, outs, before, previous):
    for i, o in enumerate(outs):
        for k, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and overlaps(o, x):
                h.fail("run", "output %d shares memory with input %d: forward must compute new outputs, not return its "
                              "input or a view of it" % (i, k), "wrong_result")
    for k, (x, b) in enumerate(zip(inputs, before)):
        if isinstance(x, torch.Tensor) and not torch.equal(x, b):
            h.fail("run", "forward changed its input %d in place: inputs must be left as they were" % k, "wrong_result")
    for i, (o, copy) in enumerate(previous):
        if any(overlaps(o, n) for n in outs) or not torch.equal(o, copy):
            h.fail("run", "forward handed back output %d's buffer again on the next call (the earlier result changed): "
                          "each call must return new output tensors" % i, "wrong_result")


def correctness():
    previous = []
    for name, seed in h.JOB["sets"].items():
        inputs = h.make_inputs(reference, seed)
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        outs = h.outputs_of(model(*inputs))
        h.synchronize()
        check_call(inputs, outs, before, previous)
        h.save_outputs(name, outs)
        previous = [(o, o.clone()) for o in outs]


def integrity():
    replaced = h.tampered()
    if replaced:
        h.fail("run", "kernel.py replaced functions the judge relies on: " + ", ".join(replaced), "policy")
    started = sorted(set(h.python_threads()) - set(threads))
    if started:
        h.fail("run", "kernel.py left threads running (%s): a kernel does its work in forward" % ", ".join(started),
               "policy")


def timing():
    inputs = h.device_inputs(reference, next(iter(h.JOB["sets"].values())))
    forward = h.graph_forward(model, inputs)
    h.RESULT["graph"] = forward is not None
    if forward is None:
        if h.CUDA and h.JOB["require_graph"]:
            h.fail("benchmark", "forward could not be captured as a CUDA graph (%s): the judge times graph replays, so "
                                "forward must launch its kernels on the current stream (at::cuda::getCurrentCUDAStream() "
                                "in CUDA; Triton does) and must not synchronize with the host (.item(), .cpu(), "
                                "printing tensors)" % h.RESULT.get("graph_error", "?"), "crash")
        forward = lambda: model(*inputs)  # noqa: E731
    h.tell({"ready": True})
    go = h.hear()                      # only now: the seed the timed runs' inputs are made from
    h.RESULT["times_ms"], h.RESULT["loop_seconds"] = h.run_timed(
        forward, inputs, reference, go["seed"], h.JOB["warmup"], h.JOB["iters"], "timed")
    integrity()


with torch.no_grad():
    h.timed("run", correctness)
    integrity()
    h.timed("benchmark", timing)
h.RESULT["ok"] = True
h.RESULT["stage"] = "done"
h.finish(done=True)
