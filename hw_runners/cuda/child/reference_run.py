"""The trusted side of one evaluation (README.md), a server for the whole of it. No candidate code is imported here, and
the candidate's process can see nothing of this one.

  1. the problem's Model on every input set the evaluation checks (the sets a variant does not apply to, or on which
     the reference itself is not finite, are dropped and named); their outputs are kept;
  2. then, on the evaluator's requests: the candidate's outputs of an input set compared with the reference's
     (judge_compare.py); and the timed runs, exactly as the candidate runs them (judge_timing.py), each just before the
     candidate's run on the same inputs: the reference's latency, the cost of every step around forward that the
     candidate's steps are checked against, and the outputs the candidate's run is compared with (the candidate waits
     meanwhile, so this work never overlaps its timing)."""
import torch

import judge_common as h
import judge_compare
import judge_timing

reference = h.timed("import", lambda: h.load_module("reference.py", "reference"))
model = h.timed("init", lambda: h.make_model(reference.Model, reference, h.JOB["init_seed"]))
ATOL, RTOL = float(h.JOB["atol"]), float(h.JOB["rtol"])


def finite(outs):
    return all(bool(torch.isfinite(o).all()) for o in outs if o.is_floating_point() or o.is_complex())


def sizes(inputs, outs):
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))  # noqa: E731
    return {"inputs": nbytes(inputs), "outputs": nbytes(outs),
            "weights": nbytes(list(model.parameters()) + list(model.buffers()))}


def input_sets():
    kept, meta, dropped, io = {}, {}, {}, None
    plain_finite = True
    for name, s in h.JOB["sets"].items():
        inputs, hits = h.make_inputs(reference, s["seed"], s.get("variant"))
        if s.get("variant") and not hits:
            dropped[name] = "get_inputs draws nothing the %s variant changes" % s["variant"]
            continue
        try:
            outs = [o.detach() for o in h.outputs_of(model(*inputs))]
        except Exception as exc:
            if not s.get("variant"):
                raise
            dropped[name] = "the reference fails on them (%s: %s)" % (type(exc).__name__, str(exc)[:200])
            continue
        if s.get("variant") and plain_finite and not finite(outs):
            dropped[name] = "the reference's outputs are not finite on them"
            continue
        plain_finite = plain_finite and (bool(s.get("variant")) or finite(outs))
        kept[name], meta[name] = outs, h.describe(outs)
        io = io or sizes(inputs, outs)
    h.synchronize()
    h.tell({"sets": meta, "dropped": dropped, "bytes": io, "seconds": dict(h.SECONDS)})
    return kept


def serve(message, fds, kept, runs, last):
    """One request of the evaluator's. Returns the outputs of the latest timed run (its own, kept for comparing the
    candidate's same run), or None when told to quit."""
    op = message.get("op")
    if "run" in message:
        return [o.detach() for o in runs.step(message)]
    if op == "compare_set":
        wrong, worst = judge_compare.compare(message.get("outputs"), fds, kept[message["set"]], ATOL, RTOL)
    elif op == "compare_run":
        wrong, worst = judge_compare.compare(message.get("outputs"), fds, last or [], ATOL, RTOL)
    else:
        return None
    h.synchronize()
    h.tell({"compared": wrong is None, "error": wrong, "max_abs_err": worst})
    return last


with torch.no_grad():
    kept = h.timed("run", input_sets)
    first = next(iter(h.JOB["sets"].values()))["seed"]
    runs = h.timed("benchmark", lambda: judge_timing.Runs(model, reference, first, False))
    runs.ready()
    last = []
    while last is not None:
        message, fds = h.hear()
        try:
            last = serve(message, fds, kept, runs, last)
        except Exception as exc:
            h.fail("compare" if "op" in message else "benchmark", exc)
h._exit(0)
