"""The file `eval --trace` writes: the timing model's per-instruction trace (written by the replayer, fd 8, in
csrc/timing.c) under a header that says what the file is, of which kernel, problem and target, and when."""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from autocomp_zmq.hw_runners.base import Problem

TRACE_COLUMNS = ("instruction number", "kind (config, mvin, mvout, preload, compute, flush)",
                 "issued by (cpu, or fsm: a loop FSM)", "issue cycle", "start cycle", "end cycle")


def write_trace(path: Path, timing: Path, problem: Problem, code: str, seed: int) -> None:
    """The timing trace of `eval --trace`, under a header saying what it is, of which kernel, problem and target,
    and when: a file found later says where it came from."""
    family = " ".join(f"{k}={v}" for k, v in problem.dims.items())
    header = [f"gemmini-sim timing trace (autocomp-zmq eval --trace), written {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
              f"kernel sha256 {hashlib.sha256(code.encode()).hexdigest()[:16]}, first line: "
              f"{next((ln.strip() for ln in code.splitlines() if ln.strip()), '')[:100]}",
              f"problem {problem.name} ({problem.family} {family}), target gemmini-sim, ISA profile "
              f"{problem.isa or 'default'}, input seed {seed}",
              "one line per Gemmini instruction the kernel issued, as the timing model ran it (at most 200,000):",
              "columns: " + "; ".join(TRACE_COLUMNS)]
    with open(path, "w", encoding="utf-8") as out:
        out.write("".join(f"# {line}\n" for line in header))
        out.write(timing.read_text(encoding="utf-8", errors="replace"))
