"""KernelBench's problem files in the cuda target: probing a reference (kbcount.py, in a sandboxed child with the
target's Python: one forward's FLOPs and bytes, sizes small enough for checks on the CPU, whether it runs at them),
and importing KernelBench files unchanged as problem files (`launch.py problems --kernelbench PATH... --write DIR`).

An imported problem is named from its level folder and file (level1/19_ReLU.py: kb-L1-19_ReLU), its reference is
the KernelBench file itself (named by its absolute path), and its starting kernel is KernelBench's starting point:
the reference's own code with Model offered as ModelNew (self-contained: the judge imports it on its own).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import psutil

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.cuda import environment
from autocomp_zmq.hw_runners.definition_files import FILE_BYTES

SCRIPT = Path(__file__).with_name("kbcount.py")
PROBE_WALL_S = 300.0            # one probe: importing torch, the meta runs, the CPU check (and scaling runs)
LEVEL_FILE = re.compile(r"(\d+)_(.+)\.py")
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_DIMS = 16                   # a wire Problem's dims
COUNTER = ("PyTorch's FLOP counter (matmuls, convolutions and attention; elementwise work counts 0) over one forward "
           "{where}; bytes: the inputs, the parameters and buffers, and the outputs, each once")


class KernelBenchError(ValueError):
    """Paths that hold no KernelBench problem files: one line saying which."""


@dataclass(frozen=True)
class Probe:
    """What the child found about a reference (or why it found nothing: error)."""
    error: str = ""
    constants: dict[str, int] = field(default_factory=dict)
    small: dict[str, int] = field(default_factory=dict)
    over_budget: float | None = None      # one forward at `small` against the budget (<= 1: within; None: unknown)
    check_error: str | None = None        # None: the reference ran on the CPU at `small` (or was not run)
    check_skipped: str = ""               # why it was not run there (sizes that stay too large)
    outputs: tuple[dict, ...] = ()        # {"shape": [...], "dtype": ...} of one forward at the full sizes
    outputs_small: bool = False           # ... at the small sizes (the reference does not run on the meta device)
    dtype: str = "float32"
    flops: int | None = None
    bytes: int | None = None
    how: str | None = None                # "meta", "cpu", "scaled", or None: not counted
    why: str = ""                         # why not counted
    meta_error: str | None = None

    @property
    def work_note(self) -> str:
        if self.error:
            return f"flops and bytes unknown: the reference could not be probed: {self.error}"
        if self.how == "meta":
            return "counted by " + COUNTER.format(where="on the meta device (shapes only)")
        if self.how == "cpu":
            return "counted by " + COUNTER.format(where="on the CPU") + f" (not on the meta device: {self.meta_error})"
        if self.how == "scaled":
            sizes = ", ".join(f"{k}={v}" for k, v in self.small.items())
            return ("approximate: counted by " + COUNTER.format(where=f"on the CPU at smaller sizes ({sizes})")
                    + f", scaled to the full sizes (not on the meta device: {self.meta_error})")
        return f"flops and bytes unknown: {self.why}"


# -- probing a reference in the target's child --------------------------------------------------------------------
def _child_setup(target: Any) -> tuple[str, sandbox.Limits]:
    """The target's Python and its children's limits, tightened for a probe (it runs no candidate; a memory ceiling
    keeps a reference too large for this host from taking it down)."""
    from autocomp_zmq.hw_runners.cuda.target import Options
    opts = target.options if target is not None else Options()
    python = opts.python or os.environ.get("AUTOCOMP_TORCH_PYTHON") or environment.own_python()
    memory = min(16 << 30, psutil.virtual_memory().total // 2)
    base = dataclasses.replace(opts.limits, wall_s=min(opts.limits.wall_s, PROBE_WALL_S),
                               cpu_s=int(min(opts.limits.cpu_s, PROBE_WALL_S * 4)), mem_bytes=memory)
    return python, environment.limits(base, python, None)


def probe(reference: Path, *, small: dict[str, int] | None = None, target: Any = None, threads: int = 1) -> Probe:
    """Probe the reference at `reference` (small: the sizes for the CPU check; None: derive them)."""
    python, limits = _child_setup(target)
    return _probe(Path(reference).read_text(), json.dumps(small, sort_keys=True) if small is not None else None,
                  python, limits, threads)


@functools.lru_cache(maxsize=256)       # once per reference and sizes in a process (its loaders each ask)
def _probe(source: str, small_json: str | None, python: str, limits: sandbox.Limits, threads: int) -> Probe:
    missing = environment.unmet(python, "cpu")
    if missing:
        return Probe(error="; ".join(missing))
    work = Path(tempfile.mkdtemp(prefix="cuda-probe-"))
    try:
        (work / "tmp").mkdir()
        shutil.copyfile(SCRIPT, work / "kbcount.py")
        (work / "reference.py").write_text(source)
        job = {"reference": "reference.py", "threads": threads}
        if small_json is not None:
            job["small"] = json.loads(small_json)
        (work / "job.json").write_text(json.dumps(job))
        for path in (work, *work.iterdir()):         # the sandbox's user reads them
            path.chmod(0o755 if path.is_dir() else 0o644)
        sandbox.prepare_workdir(work, limits)
        env = {**environment.child_env(work, python, None, "cpu"), "OMP_NUM_THREADS": str(threads)}
        outcome = sandbox.run([python, "kbcount.py", "job.json"], work, limits, env=env)
        try:
            result = json.loads((work / "result.json").read_text())
        except (OSError, ValueError):
            tail = sandbox.read_tail(work / "stderr.txt", 600).strip().splitlines()
            return Probe(error=f"the probe {outcome.describe(limits)}" + (f": {tail[-1]}" if tail else ""))
        return _from_result(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _from_result(r: dict) -> Probe:
    """The child's result.json as a Probe (its numbers checked for type: it is the child's file)."""
    if not r.get("ok"):
        return Probe(error=str(r.get("error") or "the probe failed"))
    count = lambda v: v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None  # noqa: E731
    sizes = lambda d: {str(k): v for k, v in (d or {}).items() if count(v)}  # noqa: E731
    check, derived = r.get("check") or {}, r.get("derived") or {}
    over = derived.get("over_budget")
    return Probe(constants=sizes(r.get("constants")), small=sizes(r.get("small")),
                 over_budget=float(over) if isinstance(over, (int, float)) else None,
                 check_error=None if check.get("ok") in (True, None) else str(check.get("error") or "failed"),
                 check_skipped=str(check.get("skipped") or ""),
                 outputs=tuple(o for o in r.get("outputs") or () if isinstance(o, dict)),
                 outputs_small=r.get("outputs_at") == "small",
                 dtype=str(r.get("dtype") or "float32"), flops=count(r.get("flops")), bytes=count(r.get("bytes")),
                 how=r.get("how") if r.get("how") in ("meta", "cpu", "scaled") else None,
                 why=str(r.get("why") or ""), meta_error=r.get("meta_error"))


# -- importing KernelBench files ----------------------------------------------------------------------------------
@dataclass
class Imported:
    file: Path
    name: str
    source: str = ""                  # the file as it was probed (what the starting kernel is written from)
    probe: Probe | None = None
    error: str = ""                   # why it was not imported
    written: Path | None = None       # its problem file, once written

    @property
    def ok(self) -> bool:
        return not self.error


def kernelbench_files(paths: Iterable[Path]) -> list[Path]:
    """The KernelBench problem files the paths name: each folder's NN_Name.py files by number, files as given."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted((p for p in path.iterdir() if LEVEL_FILE.fullmatch(p.name) and p.is_file()),
                           key=lambda p: (int(LEVEL_FILE.fullmatch(p.name).group(1)), p.name))
            if not found:
                raise KernelBenchError(f"{path}: no KernelBench problem files (NN_Name.py) in this folder")
            files += found
        elif path.is_file() and path.suffix == ".py":
            files.append(path)
        else:
            raise KernelBenchError(f"{path}: not a KernelBench problem file (a .py) or a folder of them")
    return list(dict.fromkeys(p.resolve() for p in files))


def problem_name(file: Path) -> str:
    """kb-L<level>-<file stem> (kb-<stem> outside a levelN folder), in the characters problem names allow."""
    level = re.fullmatch(r"level[_-]?(\d+)", file.parent.name, re.I)
    name = f"kb-L{level.group(1)}-{file.stem}" if level else f"kb-{file.stem}"
    return UNSAFE.sub("_", name)[:100]


def looks_like_kernelbench(folder: Path) -> int:
    """How many KernelBench problem files (NN_Name.py defining class Model) a folder holds."""
    try:
        return sum(1 for p in folder.iterdir() if LEVEL_FILE.fullmatch(p.name) and "class Model" in _head(p))
    except OSError:
        return 0


def no_problem_files(folder: Path) -> str:
    """The error for a --problems-dir without problem files (*.toml), pointing at --kernelbench where it holds
    KernelBench's."""
    found = looks_like_kernelbench(folder)
    return f"{folder} has no problem files (*.toml)" + (
        f"; it holds {found} KernelBench problem files: import them with `launch.py problems --kernelbench {folder} "
        "--write DIR`, then use --problems-dir DIR" if found else "")


def _head(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[:65536]
    except OSError:
        return ""


def import_files(files: list[Path], target: Any = None, workers: int | None = None,
                 progress: Callable[[Imported], None] | None = None) -> list[Imported]:
    """Probe every file (in parallel, one sandboxed child each); each that cannot be imported says why."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(files) or 1))
    threads = max(1, (os.cpu_count() or 1) // workers)

    def one(file: Path) -> Imported:
        imp = Imported(file, problem_name(file))
        try:
            imp.source = file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            imp.error = f"cannot read it: {exc}"
        else:
            if len(imp.source.encode()) > FILE_BYTES:
                imp.error = f"{len(imp.source.encode()):,} bytes; a problem's reference has at most {FILE_BYTES:,}"
            else:
                imp.probe = probe(file, target=target, threads=threads)
                p = imp.probe
                imp.error = p.error or (f"the reference does not run on the CPU at the small sizes: {p.check_error}"
                                        if p.check_error else "")
        if progress:
            progress(imp)
        return imp

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, files))


def starting_kernel(source: str) -> str:
    """KernelBench's starting point: the reference's own code, its Model offered as ModelNew."""
    return (source.rstrip() + "\n\n\n# KernelBench's starting point (written by launch.py problems --kernelbench): the "
            "reference's Model itself, as ModelNew\nModelNew = Model\n")


def _summary(source: str) -> str:
    """The first paragraph of Model's docstring, on one line ('' if it has none)."""
    try:
        for node in ast.parse(source).body:
            if isinstance(node, ast.ClassDef) and node.name == "Model":
                doc = ast.get_docstring(node) or ""
                return " ".join(doc.strip().split("\n\n")[0].split()).rstrip(".")
    except SyntaxError:
        pass
    return ""


def problem_toml(imp: Imported, kernel_file: str) -> str:
    p = imp.probe
    q = json.dumps                      # a JSON string is a TOML basic string
    match = LEVEL_FILE.fullmatch(imp.file.name)
    level = re.fullmatch(r"level[_-]?(\d+)", imp.file.parent.name, re.I)
    what = (f"KernelBench level {level.group(1)} problem {match.group(1)}" if level and match
            else "A KernelBench problem") + f" ({imp.file.name}, imported unchanged)"
    summary = _summary(imp.source)
    description = (f"{what}{': ' + summary if summary else ''}. ModelNew must take Model's constructor arguments and "
                   "compute its forward.")
    lines = ["# Imported by `launch.py problems --kernelbench`: the reference is the KernelBench file itself,",
             "# unchanged; the starting kernel is its code with Model offered as ModelNew (KernelBench's starting "
             "point).",
             f"name = {q(imp.name)}", 'target = "cuda"', f"description = {q(description)}",
             f"reference = {q(str(imp.file))}", f"kernel = {q(kernel_file)}",
             f"dtype = {q(p.dtype if p.dtype in ('float32', 'float16', 'bfloat16') else 'float32')}"]
    sizes = {k: v for k, v in p.constants.items() if v >= 1}
    if len(sizes) <= MAX_DIMS:       # what listings and prompts show as its sizes (the reference decides the shapes)
        lines.append("dims = {" + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + "}")
    counted = [key for key in ("flops", "bytes") if getattr(p, key) is not None]
    for key in counted:
        lines.append(f"{key} = {getattr(p, key)}")
    if counted:
        how = {"meta": "on the meta device", "cpu": "on the CPU", "scaled": "on the CPU at the small sizes, scaled: "
               "approximate"}[p.how]
        lines.append(f"counted = {q(counted)}    # from one forward of the reference, {how}")
    else:
        lines.append(f"# flops and bytes are counted again when the problem is loaded ({p.why or p.meta_error})")
    within = ("one forward within ~2^20 elements" if p.over_budget is None or p.over_budget <= 1 else
              f"the smallest found: one forward stays at {p.over_budget:.2f}x the ~2^20-element budget")
    lines.append("small = {" + ", ".join(f"{k} = {v}" for k, v in p.small.items()) + "}"
                 + f"      # the reference's sizes for checks on the CPU ({within})")
    tags = ["kernelbench"] + ([f"level{level.group(1)}"] if level else [])
    lines.append(f"tags = {q(tags)}")
    return "\n".join(lines) + "\n"


def write_problem(imp: Imported, directory: Path) -> Path:
    """The problem file (directory/<name>.toml) and its starting kernel (<name>_start.py) beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    kernel = f"{imp.name}_start.py"
    (directory / kernel).write_text(starting_kernel(imp.source))
    path = directory / f"{imp.name}.toml"
    path.write_text(problem_toml(imp, kernel))
    imp.written = path
    return path


# -- what `problems --kernelbench` prints -------------------------------------------------------------------------
def report(imported: list[Imported], paths: list[Path], write: Path | None) -> tuple[Any, str]:
    """A rich table (one row per file) and the summary line under it."""
    from rich.table import Table
    table = Table(title=f"KernelBench: {', '.join(map(str, paths))}"[:200])
    for col in ("name", "status", "FLOPs", "bytes", "small sizes", "outputs"):
        table.add_column(col, overflow="fold")
    for imp in imported:
        cells = row(imp)
        table.add_row(*(cells[k] for k in ("name", "status", "flops", "bytes", "small", "outputs")))
    done = sum(imp.ok for imp in imported)
    where = (f"problem files in {write}: `launch.py run --target cuda --problems-dir {write} --problem NAME`"
             if write is not None else "nothing written (--write DIR writes their problem files)")
    return table, f"{done} of {len(imported)} KernelBench problems imported; {where}."


def as_json(imp: Imported) -> dict:
    """One file's line of `--json`: the table's status, and the numbers as numbers."""
    p = imp.probe or Probe()
    return {"name": imp.name, "file": str(imp.file), "imported": imp.ok, "status": row(imp)["status"],
            "flops": p.flops, "bytes": p.bytes, "counted": p.how, "small": p.small, "outputs": list(p.outputs),
            "outputs_at_small_sizes": p.outputs_small,
            "problem_file": str(imp.written) if imp.written else None}


def row(imp: Imported) -> dict[str, str]:
    """The cells of one imported file: name, status, FLOPs, bytes, small sizes, outputs."""
    p = imp.probe or Probe()
    cells = {"name": imp.name, "status": "imported" if imp.ok else f"not imported: {imp.error}"}
    if imp.ok:
        notes = []
        if p.how in ("cpu", "scaled"):
            notes.append(f"counted {'approximately, ' if p.how == 'scaled' else ''}on the CPU: {p.meta_error}")
        elif p.how is None:
            notes.append(f"work unknown: {p.why}")
        if p.check_skipped:
            notes.append(f"not checked on the CPU: {p.check_skipped}")
        elif p.over_budget is not None and p.over_budget > 1:
            over = f"{p.over_budget - 1:.1%} over" if p.over_budget < 2 else f"at {p.over_budget:.1f}x"
            notes.append(f"at the small sizes one forward stays {over} the CPU budget")
        if notes:
            cells["status"] += " (" + "; ".join(notes) + ")"
    mark = "~" if p.how == "scaled" else ""
    cells["flops"] = f"{mark}{p.flops:,}" if p.flops is not None else "-"
    cells["bytes"] = f"{mark}{p.bytes:,}" if p.bytes is not None else "-"
    cells["small"] = " ".join(f"{k}={v}" for k, v in p.small.items()) or ("(as is)" if imp.ok else "-")
    cells["outputs"] = " ".join(f"{o.get('dtype')}{o.get('shape')}" for o in p.outputs) or "-"
    if p.outputs_small:
        cells["outputs"] += " (at the small sizes)"
    return cells
