"""What each NeuronCore engine can do, enforced on every replayed instruction (trusted side).

The rules are data (engines.toml, each with its AWS source): which engines run each instruction, which
element-wise functions each engine evaluates, and how compute engines address SBUF and PSUM. They are checked
on the instruction as recorded, never on the NKI call that produced it, so a private front-end helper, an alias
or a forged stream meets the same rules as the documented API. A refusal names the rule.

Lanes: a compute engine's instruction runs one lane per partition of its destination, the lanes along the
tile axis that walks the destination's partitions. Every other operand must walk its partitions along that same
axis and nothing else along it (each lane its own partition, one access pattern for all), or touch one
partition: with a one-partition destination, or as a read every lane makes alike (a broadcast). Anything else
moves data between partitions, which only the Tensor and DMA engines do.
"""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

from autocomp_zmq.hw_runners.trainium_sim.program import Access, StreamError

RULES_FILE = Path(__file__).with_name("engines.toml")
ENGINE_NAMES = {"pe": "Tensor", "dve": "Vector", "act": "Scalar", "pool": "GpSimd", "dma": "DMA"}


@functools.cache
def rules() -> dict:
    return tomllib.loads(RULES_FILE.read_text())


@functools.cache
def engines_for(op: str) -> frozenset[str]:
    return frozenset(rules()["ops"].get(op, ()))


@functools.cache
def functions_of(engine: str) -> frozenset[str]:
    return frozenset(rules()["functions"].get(engine, ()))


def check(op: str, engine: str, attrs: dict, reads: list, writes: list[Access], what: str) -> None:
    """StreamError naming the rule when `engine` may not run this instruction as recorded."""
    if engine not in engines_for(op):
        raise StreamError(f"{what} cannot run on the {engine} engine ({ENGINE_NAMES.get(engine, engine)}): "
                          f"{op} runs on {', '.join(sorted(ENGINE_NAMES[e] for e in engines_for(op)))}")
    if op in ("ew", "activation"):
        fn = attrs.get("fn")
        if fn not in functions_of(engine):
            hosts = sorted(ENGINE_NAMES[e] for e in ("act", "dve", "pool") if fn in functions_of(e))
            where_ok = f"; it runs on the {' or '.join(hosts)} engine" if hosts else ""
            raise StreamError(f"{what}: the {ENGINE_NAMES[engine]} engine does not evaluate {fn!r}{where_ok} "
                              f"(engine capabilities, engines.toml [functions])")
    if engine in rules()["lanes"]["engines"]:
        _check_lanes(engine, reads, writes, what)


def _check_lanes(engine: str, reads: list, writes: list[Access], what: str) -> None:
    """Every lane keeps to its own partition. The instruction's lanes are the tile axis that walks the first
    destination's partitions (none: a one-partition instruction); every other access must walk partitions
    along that same axis and along nothing else, or touch one partition: a read may then be a broadcast (no
    index moves along the lane axis, so every lane reads the same elements)."""
    lane = writes[0].lanes[0]
    for a, is_write in [(w, True) for w in writes] + [(r, False) for r in reads if isinstance(r, Access)]:
        if a.tensor.buffer not in ("sbuf", "psum"):
            continue
        axis, pure, moving = a.lanes
        if axis >= 0 and axis == lane and pure:
            continue
        if axis == -1 and (lane < 0 or (not is_write and lane not in moving
                                        and engine in rules()["lanes"]["broadcast_reads"])):
            continue
        verb = "writes" if is_write else "reads"
        raise StreamError(f"{what} {verb} {_pattern_words(a, lane)} on the {ENGINE_NAMES[engine]} engine: each "
                          f"lane of a compute engine reads and writes its own partition, with one access pattern "
                          f"for all partitions (a read may broadcast one partition to every lane); data moves "
                          f"across partitions through the Tensor engine (nc_transpose, matmul) or a DMA (engine "
                          f"capabilities, engines.toml [lanes])")


def _pattern_words(a: Access, lane: int) -> str:
    t = a.tensor
    tile = f"a tile {list(a.shape)} of {t.buffer} tensor {list(t.shape)} (partition dimension {t.pdim})"
    axis, pure, _ = a.lanes
    if axis == -1:
        return f"{tile} from one partition, a different element for each lane"
    if axis == -2:
        return f"{tile} whose partition index moves along several tile axes"
    if not pure:
        return f"{tile} whose lanes each follow their own access pattern"
    return f"{tile} whose partitions run along tile axis {axis}, the instruction's lanes along " + \
        (f"axis {lane}" if lane >= 0 else "none (one partition)")
