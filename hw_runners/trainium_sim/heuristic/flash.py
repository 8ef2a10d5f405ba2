"""Causal self-attention returning flash statistics (o, l, m): one head (csa) or several (mha).

The schedules start from the naive kernel ("rows": per 128-query tile the whole score row block in SBUF,
masked, reduced, exponentiated, then P transposed block by block for P @ V, with K and V reloaded from HBM
per tile) and can: skip the key blocks the causal mask hides (mask only the diagonal block), keep K and V
resident, transpose Q once per tile instead of letting nl.matmul insert a transpose per call, fold the
negated max and the row sum into tensor_reduce / activation_reduce, batch P^T blocks per PSUM bank, choose
the engines of the PSUM evictions, and software-pipeline tiles (the next tile's scores before this tile's
P @ V). The "twopass" method never transposes P (see trainium_flash_body); its knobs are the key tiles per
exp instruction, how many tiles ahead the max pass runs, whether the max pass is interleaved chunk by chunk
with the exp pass (the next group's scores issued before this group's P @ V), and which engine adds the
diagonal tile's mask in the max pass (Vector reading PSUM, or the Tensor engine as an identity matmul).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.flash_body import rows_body, twopass_body
from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT, step_choices

ENGINES = ("scalar", "vector", "alternate")


@dataclass(frozen=True)
class Schedule:
    method: str = "rows"       # rows: scores in SBUF, P transposed; twopass: max pass, then P^T = exp(S^T - m)
    skip: bool = False         # only the key blocks at or below the diagonal (mask the diagonal block only)
    hoist: bool = False        # rows: K and V loaded once per head and kept in SBUF
    qt: bool = False           # rows: Q^T once per tile (nc_transpose) for nc_matmul, not nl.matmul's per call
    fuse: bool = False         # rows: negated max by tensor_reduce, row sum by activation_reduce with the exp
    kb: int = 512              # rows: keys per score matmul
    tb: int = 1                # rows: P^T blocks per PSUM tile (one eviction copy each)
    sev: str = "scalar"        # rows: engine of the score (and Q^T) PSUM -> SBUF copies
    pev: str = "scalar"        # rows: engine of the P^T PSUM -> SBUF copies
    ahead: int = 0             # tiles the first phase (scores / max pass) runs ahead of the second
    group: int = 4             # twopass: key tiles per S^T bank and exp instruction
    interleave: bool = False   # twopass: max-pass chunks interleaved with exp groups, next group's S^T first
    tmask: bool = False        # twopass: the max pass's diagonal mask added by an identity matmul (Tensor)
    family: str = "csa"


ROWS_ONLY = dict(qt=False, fuse=False, kb=512, tb=1, sev="scalar", pev="scalar")
TWOPASS_ONLY = dict(group=4, interleave=False, tmask=False)


def _sbuf(s: Schedule, d: dict) -> int:
    """Bytes per partition of the large tiles (per head for resident operands)."""
    h, seq, dh = d.get("H", 1), d["S"], d["D"]
    if s.method == "twopass":      # K, Q^T, [V | 1], staged outputs; score banks live in PSUM
        return h * seq * 2 * 3 + h * (seq // 128) * 2 * (dh + 1) + 4096
    return 6 * seq * (1 + s.ahead) + (4 * h * seq if s.hoist else 0) + 4096


def fits(s: Schedule, d: dict) -> bool:
    seq, dh = d["S"], d["D"]
    if seq % 512 or dh > 128 or d.get("H", 1) < 1 or s.ahead not in (0, 1, 2):
        return False
    if s.method == "twopass":
        if not (s.skip and s.hoist) or any(getattr(s, k) != v for k, v in ROWS_ONLY.items()):
            return False
        if s.group not in (1, 2, 4):
            return False
    elif s.method == "rows":
        if any(getattr(s, k) != v for k, v in TWOPASS_ONLY.items()):
            return False
        if s.kb not in (128, 256, 512) or seq % s.kb or s.tb not in (1, 2, 4):
            return False
        if s.sev not in ENGINES or s.pev not in ENGINES:
            return False
    else:
        return False
    return _sbuf(s, d) <= SBUF_LIMIT


def body(s: Schedule) -> str:
    return twopass_body(s) if s.method == "twopass" else rows_body(s)


def describe(s: Schedule) -> str:
    if s.method == "twopass":
        return (f"two passes per 128-query tile (row max from row-layout scores, then P^T = exp(S^T - m) "
                f"directly, no transposes of P), {s.group} key tile(s) per exp, max pass {s.ahead} tile(s) ahead"
                f"{', interleaved with the exp groups' if s.interleave else ''}, diagonal mask of the max pass "
                f"added by the {'Tensor' if s.tmask else 'Vector'} engine; K, Q^T, [V | 1] resident, "
                f"visible key tiles only")
    return (f"score rows in SBUF per 128-query tile, {s.kb} keys per score matmul, "
            f"{'visible key blocks only' if s.skip else 'all key blocks masked'}, "
            f"K/V {'resident' if s.hoist else 'reloaded per tile'}, "
            f"{'Q^T once per tile' if s.qt else 'nl.matmul transposing Q per call'}, "
            f"{'fused' if s.fuse else 'separate'} max/sum, {s.tb} P^T block(s) per copy, score copies on "
            f"{s.sev}, P^T copies on {s.pev}, next tile's scores {s.ahead} tile(s) ahead")


def _twopass_entry(s: Schedule) -> list[Schedule]:
    """The two-pass method visits only visible key tiles of resident operands: it follows skip and hoist."""
    if not (s.skip and s.hoist):
        return []
    return [replace(s, method="twopass", **ROWS_ONLY, group=g) for g in (4, 1)]


def candidates(mutation: str, s: Schedule, d: dict) -> list[Schedule]:
    tp = s.method == "twopass"
    if mutation == "skip":
        return [] if s.skip else [replace(s, skip=True)]
    if mutation == "hoist":
        return [] if s.hoist or tp else [replace(s, hoist=True), replace(s, hoist=True, skip=True)]
    if mutation == "method":
        return [replace(s, method="rows", **TWOPASS_ONLY)] if tp else _twopass_entry(s)
    if mutation == "qt":
        return [] if tp or s.qt else [replace(s, qt=True)]
    if mutation == "fuse":
        return [] if tp or s.fuse else [replace(s, fuse=True)]
    if mutation == "batch":
        if tp:
            return [replace(s, group=g) for g in step_choices(s.group, (1, 2, 4))]
        return ([replace(s, tb=t) for t in step_choices(s.tb, (1, 2, 4))]
                + [replace(s, kb=k) for k in step_choices(s.kb, (128, 256, 512))])
    if mutation in ("evict", "engine"):
        if tp:
            return [replace(s, tmask=not s.tmask)]
        out = [replace(s, pev=e) for e in ENGINES if e != s.pev]
        return out + [replace(s, sev=e) for e in ENGINES if e != s.sev]
    if mutation == "prefetch":      # software pipelining across tiles
        out = [replace(s, ahead=a) for a in (2, 1, 0) if a != s.ahead]
        if tp and not s.interleave:
            out.insert(0, replace(s, interleave=True, ahead=max(1, s.ahead)))
        return out
    if mutation == "order":
        return [replace(s, interleave=not s.interleave)] if tp else \
            [replace(s, ahead=a) for a in step_choices(s.ahead, (0, 1, 2))]
    return []


OPTIONS = {"skip-masked": "skip", "remove-redundant": "skip", "hoist-loads": "hoist", "block-bigger": "hoist",
           "online-softmax": "method", "swap-stationary-moving": "method", "pre-transposed-operands": "qt",
           "fuse-activation": "fuse", "combine-vector-ops": "fuse", "fewer-bigger-instructions": "batch",
           "max-tiles": "batch", "evict-efficiently": "evict", "engine-balance": "engine",
           "reduce-on-tensor": "engine", "spread-dma": "prefetch", "multi-buffer": "prefetch",
           "loop-order": "order"}
SAFER = ({"tmask": False}, {"interleave": False}, {"ahead": 0}, {"method": "rows", **TWOPASS_ONLY},
         {"pev": "scalar"}, {"sev": "scalar"}, {"tb": 1}, {"kb": 512}, {"fuse": False}, {"qt": False},
         {"hoist": False}, {"skip": False})


def _namespace(family: str, dims: tuple) -> SimpleNamespace:
    return SimpleNamespace(DIMS=dims, Schedule=Schedule, default=lambda d: Schedule(family=family), fits=fits,
                           body=body, describe=describe, candidates=candidates, OPTIONS=OPTIONS, SAFER=SAFER)


CSA = _namespace("csa", ("S", "D"))
MHA = _namespace("mha", ("H", "S", "D"))
