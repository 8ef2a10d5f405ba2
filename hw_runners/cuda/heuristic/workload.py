"""What a cuda problem computes, as far as the heuristic's templates need to know: read from the problem's
reference source (the description carries it; the problem directory is the fallback), statically (ast), never
executed, so a planner needs no PyTorch and runs no problem code.

A Workload says which template renders the problem (family and kind), its dtype, its sizes (for the schedules'
fit and wave arithmetic), the reference constructor (copied verbatim into ModelNew: the judge seeds torch before
building Model and ModelNew, so the same layers built in the same order get the same weights), and the pieces
the forward needs (the nn.Linear's attribute, the epilogue chain, the norm's weight and eps). Anything the
recognizer does not know for certain is refused with a sentence, rather than rendered wrong.
"""
from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field

from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError

GELU = {"torch.nn.functional.gelu", "nn.functional.gelu", "F.gelu", "torch.gelu"}
RELU = {"torch.relu", "torch.nn.functional.relu", "nn.functional.relu", "F.relu"}
SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "nn.functional.softmax", "F.softmax"}
MATMUL = {"torch.matmul", "torch.mm"}
HALF = {"float16": ("torch.float16", "torch.half"), "bfloat16": ("torch.bfloat16",)}
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Workload:
    family: str                       # gemm | softmax | norm
    kind: str                         # gemm: matmul | bmm | linear; norm: layernorm | rmsnorm; softmax: softmax
    dtype: str                        # float32 | float16 | bfloat16
    sizes: dict = field(default_factory=dict)   # gemm: M N K BATCH; rows: ROWS COLS
    init: str = ""                    # the reference Model.__init__, indented as a method
    args: tuple = ()                  # forward's argument names
    module: str = ""                  # linear: the nn.Linear attribute; layernorm: the nn.LayerNorm attribute
    epilogue: tuple = ()              # linear: the ops after x @ W^T + b, e.g. (("relu", ""), ("scale", "0.5"))
    weight: str = ""                  # rmsnorm: the weight expression (self.weight)
    eps: str = ""                     # rmsnorm: the eps expression (self.eps)
    tf32_ok: bool = False             # the problem states that TF32 products meet its tolerance

    @property
    def itemsize(self) -> int:
        return BYTES[self.dtype]


def _refuse(problem, why: str) -> HeuristicError:
    return HeuristicError(f"the heuristic cannot render {problem.name} ({why}); use an LLM model (--model ...)")


def reference_source(problem) -> str | None:
    """The reference.py the problem's description quotes (problems.to_problem appends it), else the file."""
    m = re.search(r"The reference \(reference\.py\):\n```python\n(.*?)\n```", problem.description or "", re.S)
    if m:
        return m.group(1)
    try:  # a Problem built without the description: the target's own problem directory
        from autocomp_zmq.hw_runners.base import target_info
        from autocomp_zmq.hw_runners.cuda.problems import load_specs
        spec = load_specs(target_info(problem.target).problems).get(problem.name)
        return spec.reference.read_text() if spec else None
    except Exception:  # noqa: BLE001  (no descriptor, no directory: the caller says the source is missing)
        return None


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _method(tree: ast.Module, name: str):
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Model":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == name:
                    return fn
    return None


def _dtype(src: str, problem) -> str:
    found = {d for d, names in HALF.items() if any(n in src for n in names)}
    if re.search(r"torch\.(float64|double|int8|int16|int32|int64|float8)", src):
        raise _refuse(problem, "its reference uses a dtype other than float32, float16 and bfloat16")
    if len(found) > 1:
        raise _refuse(problem, "its reference mixes float16 and bfloat16")
    return found.pop() if found else "float32"


def _init(src: str, tree: ast.Module, problem) -> str:
    """Model.__init__ as ModelNew's, refused where it needs module-level names that ModelNew's module lacks."""
    fn = _method(tree, "__init__")
    if fn is None:
        raise _refuse(problem, "its reference has no class Model with __init__")
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    known = params | {"self", "torch", "nn", "super", "Model"} | set(dir(builtins))
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if used - known:
        raise _refuse(problem, "its Model constructor uses module-level names " + ", ".join(sorted(used - known)))
    text = ast.get_source_segment(src, fn, padded=True)
    return text.replace("super(Model, self)", "super(ModelNew, self)")


def _forward(tree: ast.Module, problem) -> ast.FunctionDef:
    fn = _method(tree, "forward")
    if fn is None or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        raise _refuse(problem, "its reference forward is missing or takes *args/**kwargs")
    return fn


class _Chain:
    """Follows the forward's dataflow from `self.<linear>(x)` through the ops the GEMM template can apply."""

    def __init__(self, args: tuple[str, ...], problem):
        self.args, self.problem, self.linear, self.input = args, problem, "", ""
        self.env: dict[str, tuple] = {a: ("arg", a) for a in args}

    def fail(self, why: str):
        raise _refuse(self.problem, why)

    def value(self, node) -> tuple:
        if isinstance(node, ast.Name) and node.id in self.env:
            return self.env[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return ("const", repr(float(node.value)))
        if isinstance(node, ast.Attribute) and _dotted(node).startswith("self.") and _dotted(node).count(".") == 1:
            return ("attr", _dotted(node))
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        self.fail(f"its forward uses `{ast.unparse(node)}`, which the GEMM template does not render")

    def call(self, node: ast.Call) -> tuple:
        name = _dotted(node.func)
        if name.startswith("self.") and len(node.args) == 1 and not node.keywords:
            arg = self.value(node.args[0])
            if self.linear or arg[0] != "arg":
                self.fail("its forward applies the layer other than once to an input")
            self.linear, self.input = name[len("self."):], arg[1]
            return ("chain", ())
        if isinstance(node.func, ast.Attribute) and node.func.attr == "relu" and not node.args and not node.keywords:
            return self.chained(self.value(node.func.value), ("relu", ""))
        if name in GELU | RELU and len(node.args) == 1:
            kw = {k.arg: k.value for k in node.keywords}
            approx = kw.pop("approximate", None)
            if kw or (approx is not None and not (isinstance(approx, ast.Constant) and approx.value == "none")):
                self.fail(f"its {name} call has arguments the template does not render (only the exact erf GELU)")
            return self.chained(self.value(node.args[0]), ("gelu" if name in GELU else "relu", ""))
        self.fail(f"its forward calls {name or ast.unparse(node.func)}, which the GEMM template does not render")

    def binop(self, node: ast.BinOp) -> tuple:
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.Mult):
            if left[0] == "chain" and right[0] in ("attr", "const"):
                return self.chained(left, ("scale", right[1]))
            if right[0] == "chain" and left[0] in ("attr", "const"):
                return self.chained(right, ("scale", left[1]))
        if isinstance(node.op, ast.Div) and left[0] == "chain" and right[0] in ("attr", "const"):
            return self.chained(left, ("div", right[1]))
        if isinstance(node.op, ast.Add):
            chain, other = (left, right) if left[0] == "chain" else (right, left)
            if chain[0] == "chain" and other[0] == "arg" and other[1] != self.input:
                return self.chained(chain, ("residual", other[1]))
        self.fail(f"its forward computes `{ast.unparse(node)}`, which the GEMM template does not render")

    def chained(self, value: tuple, op: tuple) -> tuple:
        if value[0] != "chain":
            self.fail(f"its forward applies {op[0]} to something other than the layer's output")
        return ("chain", value[1] + (op,))

    def run(self, fn: ast.FunctionDef) -> tuple:
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        for stmt in body[:-1]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                self.fail(f"its forward has the statement `{ast.unparse(stmt)}`")
            self.env[stmt.targets[0].id] = self.value(stmt.value)
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            self.fail("its forward does not end in a return of one tensor")
        out = self.value(body[-1].value)
        if out[0] != "chain":
            self.fail("its forward does not return the layer's output")
        return out[1]


def _gemm(problem, src: str, tree: ast.Module, fwd: ast.FunctionDef, args: tuple, base: dict) -> Workload:
    dims = problem.dims
    body = [s for s in fwd.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    ret = body[-1].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
    product = None
    if isinstance(ret, ast.BinOp) and isinstance(ret.op, ast.MatMult):
        product = ("torch.matmul", ret.left, ret.right)
    elif isinstance(ret, ast.Call) and len(ret.args) == 2 and not ret.keywords:
        product = (_dotted(ret.func), *ret.args)
    if product and product[0] in MATMUL | {"torch.bmm"}:
        names = tuple(_dotted(a) for a in product[1:])
        if names != args:
            raise _refuse(problem, "its product is not of the forward's two inputs in order")
        batched = product[0] == "torch.bmm" or "BATCH" in dims
        need = ("BATCH", "M", "N", "K") if batched else ("M", "N", "K")
        if any(not isinstance(dims.get(k), int) for k in need):
            raise _refuse(problem, f"problem.toml dims must give {', '.join(need)}")
        sizes = {k: dims[k] for k in need} | ({} if batched else {"BATCH": 1})
        return Workload(kind="bmm" if batched else "matmul", sizes=sizes, **base)
    if "nn.Linear(" not in src:
        raise _refuse(problem, "its forward is neither a matmul, a bmm nor an nn.Linear with an epilogue")
    chain = _Chain(args, problem)
    ops = chain.run(fwd)
    if re.search(rf"nn\.Linear\([^)]*bias\s*=\s*False", src):
        raise _refuse(problem, "its nn.Linear has no bias, which the template always adds")
    if any(not isinstance(dims.get(k), int) for k in ("BATCH", "IN", "OUT")):
        raise _refuse(problem, "problem.toml dims must give BATCH, IN and OUT")
    sizes = {"BATCH": 1, "M": dims["BATCH"], "N": dims["OUT"], "K": dims["IN"]}
    return Workload(kind="linear", sizes=sizes, module=chain.linear, epilogue=ops, **base)


def _rows(problem, src: str, fwd: ast.FunctionDef, args: tuple, base: dict) -> Workload:
    dims = problem.dims
    if not isinstance(dims.get("D"), int) or len(args) != 1:
        raise _refuse(problem, "row kernels need problem.toml dims with D (the row length) and a one-input forward")
    rows = 1
    for k, v in dims.items():
        rows *= v if k != "D" and isinstance(v, int) else 1
    sizes = {"ROWS": rows, "COLS": dims["D"]}
    text = ast.unparse(fwd)
    if problem.family == "softmax":
        call = next((n for n in ast.walk(fwd) if isinstance(n, ast.Call) and _dotted(n.func) in SOFTMAX), None)
        dim = None
        if call is not None:
            kw = {k.arg: k.value for k in call.keywords}
            node = kw.get("dim", call.args[1] if len(call.args) > 1 else None)
            try:
                dim = ast.literal_eval(node) if node is not None else None
            except ValueError:
                dim = None
        body = [s for s in fwd.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if call is None or dim not in (-1, len(dims) - 1) or len(body) != 1 or "dtype" in text:
            raise _refuse(problem, "the softmax template renders `return torch.softmax(x, dim=<last>)` only")
        return Workload(kind="softmax", sizes=sizes, **base)
    ln = re.search(r"self\.(\w+)\s*=\s*nn\.LayerNorm\(([^)]*)\)", src)
    if ln:
        if re.search(r"elementwise_affine\s*=\s*False|bias\s*=\s*False", ln.group(2)) or \
                text.strip().splitlines()[-1].strip() != f"return self.{ln.group(1)}({args[0]})":
            raise _refuse(problem, "the layernorm template renders `return self.<LayerNorm with affine>(x)` only")
        return Workload(kind="layernorm", sizes=sizes, module=ln.group(1), **base)
    if all(t in text for t in ("rsqrt", "mean(", "self.weight", "self.eps")) and ("pow(2)" in text or "** 2" in text):
        return Workload(kind="rmsnorm", sizes=sizes, weight="self.weight", eps="self.eps", **base)
    raise _refuse(problem, "its norm is neither an nn.LayerNorm nor an RMSNorm x * rsqrt(mean(x^2) + eps) * weight")


def recognize(problem) -> Workload:
    """The problem's workload, or HeuristicError saying why the templates cannot render it."""
    if problem.family not in ("gemm", "softmax", "norm"):
        raise HeuristicError(f"the heuristic cannot optimize {problem.name}: it renders the cuda families gemm, "
                             f"softmax and norm, not {problem.family!r}; use an LLM model (--model ...)")
    src = reference_source(problem)
    if not src:
        raise _refuse(problem, "its reference source is neither in the description nor in the problem directory")
    try:
        tree = ast.parse(src)
    except SyntaxError as exc:
        raise _refuse(problem, f"its reference does not parse: {exc}") from None
    fwd = _forward(tree, problem)
    args = tuple(a.arg for a in fwd.args.args[1:])
    desc = problem.description or ""
    tf32 = bool(re.search(r"\b(admits|allows|accepts|permits)\b[^.]{0,40}\bTF32\b", desc)) and not re.search(
        r"not TF32|TF32[^.]{0,80}ruled out|rules? out TF32", desc)
    base = dict(family=problem.family, dtype=_dtype(src, problem), init=_init(src, tree, problem), args=args,
                tf32_ok=tf32)
    if problem.family == "gemm":
        return _gemm(problem, src, tree, fwd, args, base)
    return _rows(problem, src, fwd, args, base)
