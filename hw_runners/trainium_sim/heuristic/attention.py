"""Single-head self-attention schedules: out = softmax(scale * q k^T) @ v, one 128-query tile at a time.

Two layouts share the schedules: head-dim-major q, k, v [d, S] bf16 (family attention, scale 1) and
seq-major [S, d] float32 with bf16 matmul operands (family sd-attention, scale 0.125). The knobs:
  kres/vres   K^T and the [keys, d] V tiles prepared once and kept in SBUF (else reloaded, and transposed,
              for every query tile); bigdma: those loads as few large DMAs (seq-major: one DMA each, key
              tile t holding keys p * n_t + t, the same order for K and V)
  qt          seq-major: nl.matmul on query rows (a transpose inserted per matmul) or one transpose per tile
  kw          keys per row-layout score matmul (128 or 512, one PSUM bank)
  softmax     sbuf: scores gathered in an SBUF row, max/subtract/exp/sum/reciprocal/multiply there;
              fused: negated max + one exp with bias and row sum, division deferred to the output;
              twopass: a max pass reduced straight from PSUM, then the scores recomputed and exponentiated
              from PSUM (no score row in SBUF)
  pt          how P^T (the stationary of P @ V) is made: transpose (Tensor transposes of P + copies) or
              direct (twopass only: S^T = K^T-tile x Q^T computed already transposed, -m added by a rank-2
              matmul, so exp yields P^T); fold: seq-major with d + 2 <= 128, -m rides in the score
              contraction itself (two ones rows in K^T, -m in the query rows)
  ones        V gets a ones column: P @ [V | 1] accumulates the row sums (needed by direct)
  group       key tiles per PSUM bank for transposes and S^T / exp instructions (1, 2, 4)
  evict       engine of the P^T PSUM -> SBUF copies
  mdt         dtype of the max pass scores (bf16 halves the Vector reduction; any stabilizer near the max
              keeps the softmax exact)
  ahead, skew software pipelining: the max pass runs `ahead` query tiles ahead, interleaved with the
              exp pass; skew issues the next step's scores before this step's P @ V
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from types import SimpleNamespace

from autocomp_zmq.hw_runners.trainium_sim.heuristic.attention_body import body
from autocomp_zmq.hw_runners.trainium_sim.heuristic.kit import SBUF_LIMIT

SOFTMAX = ("sbuf", "fused", "twopass")
EVICT = ("copy", "vector", "scalar", "alternate")


@dataclass(frozen=True)
class HmSchedule:
    kres: bool = False
    qres: bool = False
    vres: bool = False
    bigdma: bool = False
    qt: str = "once"
    kw: int = 512
    softmax: str = "sbuf"
    pt: str = "transpose"
    ones: bool = False
    fold: bool = False
    group: int = 1
    evict: str = "copy"
    mdt: str = "f32"
    ahead: int = 0
    skew: bool = False
    family: str = "attention"

    @property
    def layout(self) -> str:
        return "hm" if self.family == "attention" else "sm"


@dataclass(frozen=True)
class SmSchedule(HmSchedule):
    qt: str = "matmul"
    kw: int = 128
    family: str = "sd-attention"


def _dims(d: dict, layout: str) -> tuple[int, int]:
    return int(d["S"]), int(d["D"])


def fits(s, d: dict) -> bool:
    S, D = _dims(d, s.layout)
    if S % 512 or D > 128 or D < 1 or s.kw not in (128, 512) or s.group not in (1, 2, 4):
        return False
    if s.softmax not in SOFTMAX or s.pt not in ("transpose", "direct") or s.evict not in EVICT \
            or s.mdt not in ("f32", "bf16") or s.ahead not in (0, 1, 2) or s.qt not in ("once", "matmul"):
        return False
    if s.layout == "hm" and s.qt != "once":
        return False
    if s.bigdma and not (s.kres and s.vres):
        return False                  # the key order of one large DMA must be the same for K and V
    twopass = s.softmax == "twopass"
    if twopass and s.qt != "once":
        return False                  # nc_matmul needs Q^T
    if not twopass and (s.pt != "transpose" or s.mdt != "f32" or s.ahead or s.skew):
        return False
    if s.pt == "direct" and not s.ones:
        return False                  # P^T has keys on partitions: the row sums come from the ones column
    if s.fold and (s.layout != "sm" or s.pt != "direct" or D + 2 > 128):
        return False
    if s.pt == "transpose" and twopass and s.group * 128 > s.kw:
        return False                  # P^T groups come from one score matmul's keys
    if s.pt == "direct" and s.evict != "copy":
        return False                  # nothing to evict
    if s.layout == "hm" and s.group * D > 512:
        return False
    # SBUF bytes per partition: score row, exp and probabilities (one pass), resident K / V / staging
    rows = (4 + 4 + 2) * S if not twopass else 2 * 512 * 4
    res = (2 * S if s.kres else 0) + (2 * (S // 128) * (D + 1) + (2 * S if s.layout == "hm" else 0)) * s.vres
    res += (2 * S + (2 * S // 128) * (D + 2) * (s.layout == "sm")) * s.qres
    res += 2 * S * s.bigdma + 2 * S * s.fold
    return rows + res + 8 * S <= SBUF_LIMIT


def describe(s) -> str:
    soft = {"sbuf": "scores gathered in SBUF, softmax there",
            "fused": "scores in SBUF, fused exp with -max bias and row sum, deferred division",
            "twopass": f"two passes ({'bf16' if s.mdt == 'bf16' else 'fp32'} max pass from PSUM, exp from PSUM)"}
    pt = ("P^T computed directly as S^T" + (" with -m folded into the contraction" if s.fold else
                                               " with -m added by a matmul")) if s.pt == "direct" else \
        f"P^T by Tensor transposes evicted by {s.evict}"
    parts = [f"K {'resident' if s.kres else 'reloaded per query tile'}", *(["Q resident"] if s.qres else []),
             f"V {'resident' if s.vres else 'reloaded per query tile'}",
             *(["resident operands loaded by large DMAs"] if s.bigdma else []),
             *(["query rows transposed by every nl.matmul"] if s.qt == "matmul" else []),
             f"{s.kw}-key score matmuls", soft[s.softmax], pt,
             *(["row sums from a ones column of V"] if s.ones else []),
             f"{s.group} key tile(s) per PSUM bank",
             *([f"max pass {s.ahead} tile(s) ahead"] if s.ahead else []),
             *(["next scores issued before P @ V"] if s.skew else [])]
    return ", ".join(parts)


def candidates(mutation: str, s, d: dict) -> list:
    r = lambda **kw: replace(s, **kw)        # noqa: E731
    if mutation == "hoist":               # every operand that is reloaded per query tile, prepared once
        missing = {k: True for k in ("kres", "vres", "qres") if not getattr(s, k)}
        kv = {k: True for k in ("kres", "vres") if not getattr(s, k)}
        return [r(**missing)] + ([r(**kv)] if kv and kv != missing else [])
    if mutation == "large_dma":
        return [r(bigdma=True, kres=True, vres=True)]
    if mutation == "fuse":                # fold the softmax steps into fewer instructions
        nxt = {"sbuf": [r(softmax="fused"), r(softmax="fused", qt="once", kw=512)],
               "fused": [r(softmax="twopass", qt="once", kw=512, group=min(4, s.group) if s.kw == 512 else 1)],
               "twopass": [r(ones=True)] if not s.ones else []}[s.softmax]
        return nxt + ([r(fold=True)] if s.pt == "direct" and not s.fold else [])
    if mutation == "evict":               # exp as the PSUM eviction of the scores: no score row in SBUF
        if s.softmax != "twopass":
            return [r(softmax="twopass", qt="once", kw=512), r(softmax="twopass", qt="once", kw=512, mdt="bf16")]
        return [r(evict=e) for e in EVICT if e != s.evict and s.pt == "transpose"]
    if mutation == "engine":
        return [r(evict=e) for e in EVICT if e != s.evict] + ([r(mdt="bf16")] if s.softmax == "twopass" else [])
    if mutation == "method":              # scores computed transposed: no P transposes at all
        if s.pt == "direct":
            return [r(fold=True)] if not s.fold else []
        # a new max pass in 512-key banks, in fp32 or (only a stabilizer) bf16; S^T four key tiles per bank
        base = dict(softmax="twopass", qt="once", pt="direct", ones=True, evict="copy", kw=512, group=4)
        folds = (False, True) if s.layout == "sm" and d["D"] + 2 <= 128 else (False,)
        return [r(**base, fold=f, mdt=m) for f in folds[::-1] for m in ("bf16", "f32")]
    if mutation == "precision":
        return [r(mdt="bf16")] if s.mdt == "f32" else []
    if mutation == "max_tiles":
        return ([r(kw=512)] if s.kw < 512 else []) + [r(group=g) for g in (4, 2) if g > s.group]
    if mutation == "pipeline":
        out = [r(ahead=a, skew=True) for a in (1, 2)]
        return out + ([r(skew=False)] if s.skew and s.ahead else [])
    return []


OPTIONS = {"hoist-loads": "hoist", "remove-redundant": "hoist", "large-dma": "large_dma", "spread-dma": "pipeline",
           "fuse-activation": "fuse", "combine-vector-ops": "fuse", "online-softmax": "evict",
           "fuse-through-sbuf": "evict", "evict-efficiently": "evict", "engine-balance": "engine",
           "swap-stationary-moving": "method", "pre-transposed-operands": "method", "reduce-on-tensor": "fuse",
           "mixed-precision": "precision", "max-tiles": "max_tiles", "fewer-bigger-instructions": "max_tiles",
           "block-bigger": "max_tiles", "multi-buffer": "pipeline", "loop-order": "pipeline"}
SAFER = ({"skew": False}, {"ahead": 0}, {"fold": False}, {"bigdma": False}, {"mdt": "f32"}, {"evict": "copy"},
         {"group": 1})


def _ns(cls, dims: tuple[str, ...]):
    return SimpleNamespace(DIMS=dims, Schedule=cls, default=lambda d: cls(), fits=fits, body=body,
                           describe=describe, candidates=candidates, OPTIONS=OPTIONS, SAFER=SAFER)


ATTENTION = _ns(HmSchedule, ("D", "S"))
SD_ATTENTION = _ns(SmSchedule, ("S", "D"))
FIELDS = tuple(f.name for f in fields(HmSchedule))
