"""The trusted side of one evaluation (README.md): the problem's reference Model on every input set the evaluation
checks (outputs <set>_<i>.npy), then the same timed loop the candidate runs, on the same inputs (the timed runs'
outputs, timed<k>_<o>.npy, are what the candidate's are checked against; the loop's times are the reference's
latency, and its wall time minus them what the loop itself costs). No candidate code is imported here, and the
candidate's process never sees these files."""
import torch

import judge_common as h

reference = h.timed("import", lambda: h.load_module("reference.py", "reference"))
model = h.timed("init", lambda: h.make_model(reference.Model, reference, h.JOB["init_seed"]))


def outputs():
    out_bytes = 0
    for name, seed in h.JOB["sets"].items():
        outs = h.outputs_of(model(*h.make_inputs(reference, seed)))
        h.save_outputs(name, outs)
        out_bytes = sum(o.numel() * o.element_size() for o in outs)
    h.synchronize()
    # the timed runs' outputs are all kept for checking: as many as the byte budget allows, at least 5
    h.RESULT["iters"] = max(5, min(h.JOB["iters"], h.JOB["timed_output_budget"] // max(out_bytes, 1)))


def timing():
    inputs = h.device_inputs(reference, h.JOB["timing_seed"])
    forward = h.graph_forward(model, inputs)
    h.RESULT["graph"] = forward is not None
    forward = forward or (lambda: model(*inputs))
    h.RESULT["times_ms"], h.RESULT["loop_seconds"] = h.run_timed(
        forward, inputs, reference, h.JOB["timing_seed"], h.JOB["warmup"], h.RESULT["iters"], "timed")


with torch.no_grad():
    h.timed("run", outputs)
    h.timed("benchmark", timing)
h.RESULT["ok"] = True
h.RESULT["stage"] = "done"
h.finish()
