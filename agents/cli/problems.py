"""`problems`: list a target's problems, check the problem files of a --problems-dir, or import KernelBench's problem
files unchanged (--kernelbench, hw_runners/cuda/kernelbench.py) and write them as problem files (--write)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Callable, NoReturn, Optional

import typer
from rich.console import Console
from rich.table import Table

ProblemsDirOpt = Annotated[Optional[Path], typer.Option(help="A directory of problem files (*.toml).", metavar="DIR",
                                                        show_default="none")]
FileTargetOpt = Annotated[Optional[str], typer.Option("--target", "-t", help="Hardware target.", metavar="NAME",
                                                      show_default="gemmini-sim, or the problem file's")]
KernelBenchOpt = Annotated[Optional[list[Path]], typer.Option(
    "--kernelbench", help="Import KernelBench problem files unchanged: a level folder (its NN_Name.py files) or .py "
    "files (more PATHs may follow); prints what each became, or why not. Exit status 1 if any was not imported.",
    metavar="PATH", show_default="none")]


def register(app: typer.Typer, console: Console, err: Console, _fail: Callable[..., NoReturn],
             _target: Callable) -> None:
    @app.command()
    def problems(target: FileTargetOpt = None, problems_dir: ProblemsDirOpt = None,
                 kernelbench: KernelBenchOpt = None,
                 paths: Annotated[Optional[list[Path]], typer.Argument(help="More paths for --kernelbench.",
                                                                       show_default=False)] = None,
                 write: Annotated[Optional[Path], typer.Option(help="With --kernelbench: write a problem file per "
                                                               "imported problem (and its starting kernel) into DIR, "
                                                               "for --problems-dir DIR.", metavar="DIR",
                                                               show_default="none")] = None,
                 target_option: Annotated[Optional[list[str]], typer.Option(
                     help="An option of the target, NAME=VALUE (as `eval --target-option`; repeatable): what loading "
                          "or importing a problem runs with (cuda: the Python, the sandbox's limits).",
                     metavar="NAME=VALUE", show_default="none")] = None,
                 as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False) -> None:
        """List the problems of a target (parametric names are accepted too: the line under the table says
        which), or with --problems-dir those its problem files define, each checked, or import KernelBench's."""
        from autocomp_zmq.agents.run.problemsource import ProblemSourceError, declared, load, read_definition
        from autocomp_zmq.agents.run.runconfig import ConfigError
        from autocomp_zmq.agents.run.runflags import option_values
        try:
            options = option_values(target_option or [], "--target-option")
        except ConfigError as exc:
            _fail(str(exc))
        if paths and not kernelbench:
            _fail(f"unexpected argument {paths[0]}: KernelBench files are imported with --kernelbench PATH [PATH ...]")
        if write is not None and not kernelbench:
            _fail("--write goes with --kernelbench (it writes the imported problems' files)")
        if kernelbench:
            if problems_dir is not None or target not in (None, "cuda"):
                _fail("--kernelbench imports problems for the cuda target; give it without --problems-dir or another "
                      "--target")
            _import_kernelbench([*kernelbench, *(paths or [])], write, _target("cuda", **options), as_json)
        if problems_dir is not None:
            from autocomp_zmq.hw_runners.problemfile import DefinitionError, scan
            _no_problem_files(problems_dir)
            try:
                rows = []
                for name in scan(problems_dir):
                    definition = read_definition(None, problems_dir, name)
                    file_target = declared(definition)[1]
                    if target not in (None, file_target):
                        continue
                    rows.append(load(_target(file_target, **options), name, None, definition))
            except (DefinitionError, ProblemSourceError) as exc:
                _fail(str(exc))
            title, patterns = f"problems in {problems_dir}", []
        else:
            target = target or "gemmini-sim"
            tgt = _target(target, **options)
            rows, title, patterns = tgt.problems(), f"{target} problems", tgt.name_patterns()
        work = {p.name: getattr(p.semantics, "work_summary", "") for p in rows}   # cuda: FLOPs and bytes, if known
        if as_json:
            for p in rows:
                print(json.dumps({"name": p.name, "target": p.target, "family": p.family, "dims": p.dims,
                                  "tags": list(p.tags), "kernels": {k: str(v) for k, v in p.kernels.items()},
                                  **({"work": work[p.name]} if work[p.name] else {})}))
            return
        table = Table(title=title)
        columns = ("name", "target", "family", "sizes", "tags") + (("work",) if any(work.values()) else ())
        for col in columns:
            table.add_column(col)
        for p in rows:
            cells = [p.name, p.target, p.family, " ".join(f"{k}={v}" for k, v in p.dims.items()), ",".join(p.tags)]
            table.add_row(*cells, *([work[p.name] or "-"] if "work" in columns else []))
        console.print(table)
        if patterns:
            console.print(f"Also any other size by name: {', '.join(patterns)}. Your own kernel: --problem-file "
                          "FILE.toml (README: Optimizing your own kernel).", markup=False, highlight=False)


    def _no_problem_files(directory: Path) -> None:
        """A --problems-dir without problem files is one error line (naming --kernelbench if it holds KernelBench's)."""
        if directory.is_dir() and not any(directory.glob("*.toml")):
            from autocomp_zmq.hw_runners.cuda.kernelbench import no_problem_files
            _fail(no_problem_files(directory))


    def _import_kernelbench(paths: list[Path], write: Optional[Path], tgt, as_json: bool) -> NoReturn:
        """`problems --kernelbench`: probe each file, write the problem files (--write), print a table or JSON lines."""
        from rich.progress import Progress
        from autocomp_zmq.hw_runners.cuda import kernelbench as kb
        try:
            files = kb.kernelbench_files(paths)
            with Progress(console=err, transient=True, disable=as_json) as bar:
                task = bar.add_task(f"probing {len(files)} KernelBench files", total=len(files))
                imported = kb.import_files(files, target=tgt, progress=lambda imp: bar.advance(task))
            for imp in imported if write is not None else ():
                if imp.ok:
                    kb.write_problem(imp, write)
        except kb.KernelBenchError as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail(f"--write {write}: {exc.strerror or exc}")
        if as_json:
            for imp in imported:
                print(json.dumps(kb.as_json(imp)))
        else:
            table, summary = kb.report(imported, paths, write)
            console.print(table)
            console.print(summary, markup=False, highlight=False)
        raise typer.Exit(0 if all(imp.ok for imp in imported) else 1)
