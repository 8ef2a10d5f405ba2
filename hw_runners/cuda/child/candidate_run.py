"""The candidate's side of one evaluation (README.md). In order: import kernel.py (its inline CUDA compiles here),
build ModelNew, run it on every input set, handing each set's outputs over as sealed memory for the evaluator to have
them compared with the reference's, and checking as it goes that it leaves its inputs unchanged, returns no input (or
view of one), and does not hand back the same output buffer on the next call; then that the judge's functions are
untouched and no thread or process of the candidate's is left running; then the timed runs (judge_timing.py), whose inputs it
learns one run at a time, when the evaluator opens the run.

The inputs are made with a private copy of the problem's reference module, loaded before kernel.py: a kernel that
replaces `reference.get_inputs` (or anything else of the `reference` module it can import) changes nothing the judge
calls."""
import torch

import judge_common as h
import judge_timing

inputs_module = h.timed("import", lambda: h.load_module("reference.py", "_judge_inputs", register=False))
h.timed("import", lambda: h.load_module("reference.py", "reference"))     # for kernels that import it
threads, processes = h.python_threads(), h.other_processes()
kernel = h.timed("import", lambda: h.load_module("kernel.py", "kernel"))
if not isinstance(getattr(kernel, "ModelNew", None), type):
    h.fail("import", "kernel.py defines no class ModelNew")
model = h.timed("init", lambda: h.make_model(kernel.ModelNew, inputs_module, h.JOB["init_seed"]))


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
    for name, s in h.JOB["sets"].items():
        inputs, _ = h.make_inputs(inputs_module, s["seed"], s.get("variant"))
        before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        outs = h.outputs_of(model(*inputs))
        h.synchronize()
        check_call(inputs, outs, before, previous)
        meta, fds = h.hand_over(outs)
        h.tell({"set": name, "outputs": meta}, fds)
        answer, _ = h.hear()            # the evaluator stops this process if the outputs were wrong
        if not answer.get("next"):
            h._exit(0)
        previous = [(o, o.clone()) for o in outs]


def integrity():
    replaced = h.tampered()
    if replaced:
        h.fail("run", "kernel.py replaced functions the judge relies on: " + ", ".join(replaced), "policy")
    started = sorted(set(h.python_threads()) - set(threads))
    if started:
        h.fail("run", "kernel.py left threads running (%s): a kernel does its work in forward" % ", ".join(started),
               "policy")
    now = h.other_processes()
    spawned = sorted(set(now) - set(processes)) if now is not None and processes is not None else []
    if spawned:
        h.fail("run", "kernel.py left %d process(es) running: a kernel does its work in forward" % len(spawned),
               "policy")


def timing():
    runs = judge_timing.Runs(model, inputs_module, next(iter(h.JOB["sets"].values()))["seed"], h.JOB["require_graph"])
    runs.ready()
    while True:
        message, _ = h.hear()
        if "run" not in message:
            return
        runs.step(message)


with torch.no_grad():
    h.timed("run", correctness)
    integrity()
    h.timed("benchmark", timing)
integrity()
h.tell({"finished": True, "seconds": dict(h.SECONDS)})
h._exit(0)
