"""Probing a KernelBench-style reference (class Model, get_inputs(), get_init_inputs(), module-level sizes): run as a
script in a child of the cuda target (hw_runners/cuda/kernelbench.py starts it in the target's sandbox with the
target's Python, `python kbcount.py job.json`), it counts one forward's work, finds smaller sizes for checks on the
CPU, checks the reference runs at them, and writes result.json. Imported as a module it offers, with the standard
library only, what the product itself needs without torch: the reference's module-level integer sizes
(int_constants) and its source with other values for them (with_sizes).

Work: FLOPs by PyTorch's FLOP counter (torch.utils.flop_counter.FlopCounterMode: matmuls, convolutions, attention;
elementwise work counts nothing) over one forward; bytes as the sizes of the inputs, the parameters and buffers, and
the outputs (what must cross DRAM at least once). Counted on the meta device where the reference allows it (shapes
only: full sizes cost nothing), else on the CPU at the small sizes and scaled to the full ones (approximately: each
size's exponent measured by doubling it), else unknown, with the reason.
Small sizes: the largest sizes halved in turn (batch sizes down to 2, others to 8; sizes at or below that stay) while
one forward's inputs and outputs exceed BUDGET_ELEMENTS or its counted FLOPs BUDGET_FLOPS; a halving that makes the
reference fail or brings nothing is undone and that size left alone.
"""
import ast
import json
import math
import os
import re
import sys
import time
import types

BUDGET_ELEMENTS = 1 << 20
BUDGET_FLOPS = 1 << 30
FLOOR, BATCH_FLOOR = 8, 2
BATCH = re.compile(r"batch", re.I)
CHECK_LIMIT = 64        # times the budget beyond which the small sizes are not run on the CPU (memory, time)


class ProbeError(Exception):
    """The reference cannot be probed at all; the message says why."""


# -- the sizes in the source (standard library only) ----------------------------------------------------------
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a ** b}


def _int_value(node):
    """The value of an integer expression made of literals (4096, -1, 1024 * 2, 2 ** 10), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_value(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _int_value(node.left), _int_value(node.right)
        if a is None or b is None or (isinstance(node.op, ast.Pow) and not 0 <= b <= 64) or \
                (isinstance(node.op, ast.FloorDiv) and b == 0):
            return None
        return _OPS[type(node.op)](a, b)
    return None


def _assignments(tree):
    """(statement, [(name, value node)]) for each module-level assignment to names: `B = 4096`, `H = W = 256`,
    `B, D = 4096, 8192`, `N: int = 3`."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        pairs = []
        for target in targets:
            if isinstance(target, ast.Name):
                pairs.append((target.id, value))
            elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                    and len(target.elts) == len(value.elts):
                pairs += [(t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
        yield stmt, pairs


def int_constants(source):
    """The module-level names whose (last) assignment is an integer expression of literals, with their values."""
    found = {}
    for _, pairs in _assignments(ast.parse(source)):
        for name, value in pairs:
            v = _int_value(value)
            if v is None:
                found.pop(name, None)
            else:
                found[name] = v
    return found


def with_sizes(source, sizes):
    """The source with each named module-level integer constant set to sizes[name] where it is assigned, everything
    else as written (so that module-level values computed from a size, bias_shape = (out_channels, 1, 1), follow)."""
    if not sizes:
        return source
    unknown = set(sizes) - set(int_constants(source))
    if unknown:
        raise ValueError("not module-level integer constants: " + ", ".join(sorted(unknown)))
    data = source.encode()
    starts = [0]
    for line in source.encode().splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    span = lambda n: (starts[n.lineno - 1] + n.col_offset, starts[n.end_lineno - 1] + n.end_col_offset)  # noqa: E731
    edits = []
    for stmt, pairs in _assignments(ast.parse(source)):
        touched = [(name, value) for name, value in pairs if name in sizes and _int_value(value) is not None]
        if not touched:
            continue
        chained = isinstance(stmt, ast.Assign) and len(stmt.targets) > 1
        if chained:        # H = W = 256: one value for several names, which may now differ
            values = {name: sizes.get(name, _int_value(value)) for name, value in pairs}
            edits.append((*span(stmt), "; ".join(f"{name} = {v}" for name, v in values.items())))
        else:
            edits += [(*span(value), str(sizes[name])) for name, value in touched]
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode() + data[end:]
    return data.decode()


# -- running the reference (torch, in the child) --------------------------------------------------------------
class Forward:
    """One forward of the reference on a device: its work and the shapes it saw."""

    def __init__(self, torch, source, device, count_flops=True, inputs_only=False):
        from torch.utils.flop_counter import FlopCounterMode
        mod = load(source)
        with torch.device(device):
            torch.manual_seed(0)
            inputs = list(mod.get_inputs())
            self.input_elements = sum(t.numel() for t in _tensors(torch, inputs))
            if inputs_only:
                return
            model = mod.Model(*mod.get_init_inputs())
            with torch.no_grad():
                if count_flops:
                    with FlopCounterMode(display=False) as counter:
                        out = model(*inputs)
                    self.flops = int(counter.get_total_flops())
                else:
                    out = model(*inputs)
                    self.flops = None
        outs = list(_tensors(torch, out))
        state = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
        nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)  # noqa: E731
        self.bytes = nbytes(_tensors(torch, inputs)) + nbytes(state.values()) + nbytes(outs)
        self.elements = self.input_elements + sum(t.numel() for t in outs)
        self.outputs = [{"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")} for t in outs]
        floats = [t for t in list(_tensors(torch, inputs)) + list(state.values()) if t.is_floating_point()]
        self.dtype = str(max(floats, key=lambda t: t.numel()).dtype).replace("torch.", "") if floats else "float32"


def load(source):
    """The reference as the module `reference` (as the judge imports it)."""
    mod = types.ModuleType("reference")
    mod.__file__ = "reference.py"
    sys.modules["reference"] = mod
    exec(compile(source, "reference.py", "exec"), mod.__dict__)
    return mod


def _tensors(torch, x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(torch, y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(torch, y)


def _why(exc):
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


class Prober:
    """One reference: its forward on the meta device at the full sizes (or why that fails), and forwards at other
    sizes on demand."""

    def __init__(self, torch, source, job):
        self.torch, self.source = torch, source
        self.constants = int_constants(source)
        self.budget = (int(job.get("budget_elements", BUDGET_ELEMENTS)), int(job.get("budget_flops", BUDGET_FLOPS)))
        self.meta = self.meta_error = None
        try:
            self.meta = Forward(torch, source, "meta")
        except Exception as exc:        # data-dependent code (.item(), nonzero), CPU-only ops, ...
            self.meta_error = _why(exc)

    def run(self, sizes, device, **kw):
        return Forward(self.torch, with_sizes(self.source, sizes), device, **kw)

    def excess(self, sizes):
        """(how far one forward at `sizes` is over the budget, <= 1: within; how far its inputs alone are; whether
        only the inputs could be measured): on the meta device where the reference runs there, else the inputs on
        the meta device and, once they fit, the whole forward on the CPU."""
        if self.meta is not None:
            f = self.run(sizes, "meta")
        else:
            f = self.run(sizes, "meta", inputs_only=True)
            if f.input_elements > self.budget[0]:
                over = f.input_elements / self.budget[0]
                return over, over, True
            f = self.run(sizes, "cpu")
        return max(f.elements / self.budget[0], f.flops / self.budget[1]), f.input_elements / self.budget[0], False

    def derive_small(self):
        sizes, left = dict(self.constants), set()
        floor = {n: BATCH_FLOOR if BATCH.search(n) else FLOOR for n in sizes}
        over = self.excess(sizes)
        while over[0] > 1:
            shrinkable = [n for n, v in sizes.items() if n not in left and v > floor[n]]
            if not shrinkable:
                break
            name = max(shrinkable, key=lambda n: sizes[n])      # the first of the largest, in source order
            trial = {**sizes, name: max(floor[name], sizes[name] // 2)}
            try:
                now = self.excess(trial)
            except Exception:
                now = (math.inf, math.inf, False)
            # progress: less over the budget; while only the inputs could be measured, smaller inputs that still run
            if (now[1] < over[1]) if over[2] else (now[0] < over[0]):
                sizes, over = trial, now
            else:
                left.add(name)
        return {n: v for n, v in sizes.items() if v != self.constants[n]}, over[0]

    def count(self, small):
        """(flops, bytes, how) at the full sizes: from the meta forward, else from CPU forwards at `small` (each
        size's exponent from doubling it: exact for work that is a product of powers of the sizes)."""
        if self.meta is not None:
            return self.meta.flops, self.meta.bytes, "meta"
        base = self.run(small, "cpu")
        if not small:
            return base.flops, base.bytes, "cpu"
        flops, nbytes = float(base.flops), float(base.bytes)
        for name, v in small.items():           # each size's exponent, from doubling it
            twice = self.run({**small, name: 2 * v}, "cpu")
            scale = self.constants[name] / v
            if base.flops and twice.flops:
                flops *= scale ** math.log2(twice.flops / base.flops)
            nbytes *= scale ** math.log2(twice.bytes / base.bytes)
        return int(round(flops)), int(round(nbytes)), "scaled"


def probe(torch, source, job):
    try:
        mod = load(source)
    except Exception as exc:
        raise ProbeError(f"reference.py does not import: {_why(exc)}") from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not callable(getattr(mod, n, None))]
    if missing:
        raise ProbeError(f"reference.py defines no {', '.join(missing)} (KernelBench's convention)")
    out = {"constants": int_constants(source)}
    p = Prober(torch, source, job)
    out["meta_error"] = p.meta_error
    if p.meta is not None:
        out["outputs"], out["dtype"] = p.meta.outputs, p.meta.dtype
    small = job.get("small")
    if small is None:
        started = time.monotonic()
        try:
            small, over = p.derive_small()
        except Exception as exc:
            small, over = {}, None
            out["derive_error"] = _why(exc)
        out["derived"] = {"seconds": round(time.monotonic() - started, 2), "over_budget": over}
    out["small"] = small
    over = out.get("derived", {}).get("over_budget")
    if over is not None and over > CHECK_LIMIT:
        out["check"] = {"ok": None, "skipped": f"at the smallest sizes found, one forward is {over:.0f}x over the "
                                               f"budget of {p.budget[0]:,} elements and {p.budget[1]:,} FLOPs"}
    else:
        try:
            check = p.run(small, "cpu", count_flops=False)
            out["check"] = {"ok": True, "elements": check.elements, "outputs": check.outputs}
            if "outputs" not in out:
                out["outputs"], out["outputs_at"] = check.outputs, "small"
            out.setdefault("dtype", check.dtype)
        except Exception as exc:
            out["check"] = {"ok": False, "error": _why(exc)}
    if job.get("count", True):
        out.update(flops=None, bytes=None, how=None)
        if p.meta is None and not out["check"]["ok"]:
            cpu = out["check"].get("error") or out["check"].get("skipped")
            out["why"] = (f"the reference runs neither on the meta device ({p.meta_error}) nor on the CPU at the "
                          f"small sizes ({cpu})")
        else:
            try:
                out["flops"], out["bytes"], out["how"] = p.count(small)
            except Exception as exc:
                out["why"] = f"counting on the CPU failed: {_why(exc)}"
    return out


def main():
    with open(sys.argv[1] if len(sys.argv) > 1 else "job.json") as fh:
        job = json.load(fh)
    result = {"ok": False}
    try:
        import torch
        torch.set_num_threads(int(job.get("threads", 1)))
        with open(job.get("reference", "reference.py")) as fh:
            source = fh.read()
        try:
            int_constants(source)
        except SyntaxError as exc:
            raise ProbeError(f"reference.py does not parse: {_why(exc)}") from None
        result.update(probe(torch, source, job), ok=True)
    except Exception as exc:
        result["error"] = str(exc) if isinstance(exc, ProbeError) else _why(exc)
    with open("result.json.tmp", "w") as fh:
        json.dump(result, fh)
    os.replace("result.json.tmp", "result.json")


if __name__ == "__main__":
    main()
