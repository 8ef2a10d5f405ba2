"""The trainium-sim offline heuristic: its schedules render to kernels the simulator accepts as correct,
its plans pick applicable menu options whose parameters the coder reproduces, and it refuses problems
it cannot handle.

Each covered family gets a small problem of its own (same layouts and dtypes as the real one, sizes
chosen so ragged edges and every schedule knob still occur); the kernels of the starting schedule,
of every schedule one mutation away from it, and of a few seeded random walks through the mutations are
evaluated on it with the real sandboxed simulator.
"""
from __future__ import annotations

import random

import pytest

from autocomp_zmq.agents.workers.heuristic import for_target
from autocomp_zmq.hw_runners.toolkit.errors import HeuristicError
from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import FAMILIES, parse_schedule, render
from autocomp_zmq.protocols.jobs import CodeRequest, MenuOption, Parent, Plan, PlanRequest, ProblemRef, RepairRequest
from tests.trainium_sim.simkit import SimKit, explain

pytestmark = pytest.mark.system

F32, BF16 = "float32", "bfloat16"
BF16_MAKER = """
def _bf16(x):
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)

def make_inputs(rng):
    return {"lhsT": _bf16(rng.standard_normal((256, 256))),
            "rhs": _bf16(rng.standard_normal((256, 1024)) / 16.0)}
"""
MAMBA_MAKER = """
def make_inputs(rng):
    made = {"delta": rng.uniform(0.005, 0.2, (2, 256, 1024)).astype(np.float32),
            "u": rng.standard_normal((2, 256, 1024)).astype(np.float32),
            "A": -rng.uniform(0.5, 8.0, (256, 4)).astype(np.float32),
            "B": rng.standard_normal((2, 4, 1024)).astype(np.float32),
            "C": rng.standard_normal((2, 4, 1024)).astype(np.float32)}
    # NKI v2's definition: B and C pre-broadcast to 128 rows per state, as Autocomp's v2 harness passes them
    return {**made, "B_exp": np.repeat(made["B"], 128, axis=1), "C_exp": np.repeat(made["C"], 128, axis=1)}
"""

FLASH_MAKER = BF16_MAKER.split("def make_inputs")[0] + """
def make_inputs(rng):
    sigma = np.sqrt(2.0 / np.sqrt(64))         # scores of std ~2: softmax neither flat nor one-hot
    s = {q}[-2]
    return {{"q": _bf16(rng.standard_normal({q}) * sigma), "k": _bf16(rng.standard_normal({k}) * sigma),
            "v": _bf16(rng.uniform(0.5, 1.5, {v})),
            "causal_mask": (np.arange(s)[None, :] <= np.arange(s)[:, None]).astype(np.float32)}}   # NKI v2's input
"""
ATTN_REFERENCE = """def _olm(q, k, v, mask=None):
    s = q.astype(np.float64) @ k.astype(np.float64)
    s[np.triu_indices(s.shape[0], 1) if mask is None else mask == 0] = -np.inf
    mx = s.max(axis=1, keepdims=True)
    p = np.exp(s - mx)
    return p @ v.astype(np.float64), np.log(p.sum(axis=1, keepdims=True)) + mx, mx

"""

ATTN_MAKER = BF16_MAKER.split("def make_inputs")[0] + """def make_inputs(rng):
    s = np.sqrt(2.0 / np.sqrt(64)) * (1.0 if "{layout}" == "hm" else 2.0 ** 1.5)     # scores of std ~2
    shape = (64, 1024) if "{layout}" == "hm" else (1024, 64)
    names = ("q", "k", "v") if "{layout}" == "hm" else ("q_ref", "k_ref", "v_ref")
    return {{n: _bf16(rng.standard_normal(shape) * (3.0 if n[0] == "v" else s)) for n in names}}
"""
ATTN_REF = """
def reference({args}, **flags):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in ({args}))
    s = {scores}
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ {v}
"""

# family -> small problem: dims (as problem.toml gives them) and what SimKit.problem needs
CASES = {
    "gemm": dict(dims={"K": 256, "M": 256, "N": 1024}, inputs={"lhsT": ((256, 256), BF16), "rhs": ((256, 1024), BF16)},
                 outputs={"result": ((256, 1024), BF16)}, atol=1e-2, rtol=1e-2, make_inputs=BF16_MAKER,
                 reference="def reference(lhsT, rhs):\n    return lhsT.T.astype(np.float64) @ rhs\n"),
    "rmsnorm": dict(dims={"M": 256, "N": 1024}, inputs={"a_tensor": ((256, 1024), F32), "g_tensor": ((1024,), F32)},
                    outputs={"out": ((256, 1024), F32)}, atol=1e-4, rtol=1e-2,
                    reference="def reference(a_tensor, g_tensor):\n    a = a_tensor.astype(np.float64)\n"
                              "    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True)) * g_tensor\n"),
    "layernorm": dict(dims={"M": 256, "N": 1024}, call=["input_tensor", 1e-5, "gamma_vector", "beta_vector"],
                      inputs={"input_tensor": ((256, 1024), F32), "gamma_vector": ((1024,), F32),
                              "beta_vector": ((1024,), F32)},
                      outputs={"out": ((256, 1024), F32)}, atol=1e-4, rtol=1e-2,
                      reference="def reference(input_tensor, arg1, gamma_vector, beta_vector):\n"
                                "    x = input_tensor.astype(np.float64)\n"
                                "    m, v = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)\n"
                                "    return (x - m) / np.sqrt(v + arg1) * gamma_vector + beta_vector\n"),
    "transpose": dict(dims={"D0": 2, "B": 256, "N": 512}, call=["ref", 1], inputs={"ref": ((2, 256, 512), F32)},
                      outputs={"out": ((2, 512, 256), F32)}, atol=1e-6, rtol=1e-6,
                      reference="def reference(ref, arg1):\n    return ref.transpose(0, 2, 1)\n"),
    "maxpool": dict(dims={"H": 300, "W": 700, "K": 3}, call=["in_tensor", 3], inputs={"in_tensor": ((300, 700), F32)},
                    outputs={"out": ((298, 698), F32)}, atol=1e-6, rtol=1e-6,
                    reference="def reference(in_tensor, arg1):\n    x, k = in_tensor, arg1\n"
                              "    h, w = x.shape[0] - k + 1, x.shape[1] - k + 1\n"
                              "    return np.max([x[a:a + h, b:b + w] for a in range(k) for b in range(k)], axis=0)\n"),
    "conv1d": dict(dims={"N": 4, "C": 256, "W": 300, "WF": 3}, kwargs={"padding": [[0, 0], [1, 1]]},
                   inputs={"img_ref": ((4, 256, 1, 300), F32), "filter_ref": ((256, 1, 1, 3), F32)},
                   outputs={"out": ((4, 256, 1, 300), F32)}, atol=1e-4, rtol=1e-2,
                   reference="def reference(img_ref, filter_ref, padding):\n"
                             "    x = np.pad(img_ref[:, :, 0, :].astype(np.float64), ((0, 0), (0, 0), padding[1]))\n"
                             "    f = filter_ref[:, 0, 0, :]\n"
                             "    out = sum(x[:, :, w:w + img_ref.shape[3]] * f[None, :, w, None] for w in range(3))\n"
                             "    return out[:, :, None, :]\n"),
    "cumsum": dict(dims={"M": 512, "N": 1024}, inputs={"x": ((512, 1024), F32)}, outputs={"y": ((512, 1024), F32)},
                   atol=1e-4, rtol=1e-2, make_inputs="def make_inputs(rng):\n    return {'x': rng.random((512, 1024))}\n",
                   reference="def reference(x):\n    return np.cumsum(x.astype(np.float64), axis=-1)\n"),
    "rope": dict(dims={"D": 128, "S": 2048}, inputs={"x_in": ((128, 2048), F32), "cos": ((64, 2048), F32),
                                                    "sin": ((64, 2048), F32)},
                 outputs={"out": ((128, 2048), F32)}, atol=1e-4, rtol=1e-2,
                 reference="def reference(x_in, cos, sin):\n    lo, hi = x_in[:64].astype(np.float64), x_in[64:]\n"
                           "    return np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin])\n"),
    "mamba": dict(dims={"BATCH": 2, "CHANNELS": 256, "SEQ": 1024, "STATE": 4},
                  inputs={"delta": ((2, 256, 1024), F32), "u": ((2, 256, 1024), F32), "A": ((256, 4), F32),
                          "B": ((2, 4, 1024), F32), "C": ((2, 4, 1024), F32)},
                  outputs={"out": ((2, 256, 1024), F32)}, atol=1e-2, rtol=1e-2, make_inputs=MAMBA_MAKER,
                  nki2={"inputs": {"delta": ((2, 256, 1024), F32), "u": ((2, 256, 1024), F32), "A": ((256, 4), F32),
                                   "B_exp": ((2, 512, 1024), F32), "C_exp": ((2, 512, 1024), F32)}},
                  reference="def reference(delta, u, A, B=None, C=None, B_exp=None, C_exp=None):\n"
                            "    B, C = (B, C) if B is not None else (B_exp[:, ::128, :], C_exp[:, ::128, :])\n"
                            "    delta, u, A, B, C = (x.astype(np.float64) for x in (delta, u, A, B, C))\n"
                            "    out = np.empty(delta.shape)\n"
                            "    for b in range(delta.shape[0]):\n"
                            "        h = np.zeros(A.shape)\n"
                            "        for t in range(delta.shape[2]):\n"
                            "            du = delta[b, :, t] * u[b, :, t]\n"
                            "            h = np.exp(delta[b, :, t, None] * A) * h + du[:, None] * B[b, :, t]\n"
                            "            out[b, :, t] = h @ C[b, :, t]\n"
                            "    return out\n"),
    "conv2d": dict(dims={"N": 2, "CI": 64, "H": 36, "W": 120, "CO": 256, "HF": 3, "WF": 3},
                   kwargs={"padding": [[1, 1], [1, 1]], "stride": [1, 1]},
                   inputs={"img_ref": ((2, 64, 36, 120), F32), "filter_ref": ((256, 64, 3, 3), F32)},
                   outputs={"out": ((2, 256, 36, 120), F32)}, atol=1e-4, rtol=1e-2,
                   nki2={"inputs": {"img_ref": ((2, 64, 36, 120), F32), "filter_T_ref": ((64, 3, 3, 256), F32)}},
                   make_inputs="def make_inputs(rng):\n"      # positive sums: a relative tolerance means something
                               "    w = rng.uniform(-0.5, 1.0, (256, 64, 3, 3)).astype(np.float32)\n"
                               "    return {'img_ref': rng.random((2, 64, 36, 120), dtype=np.float32),\n"
                               "            'filter_ref': w, 'filter_T_ref': w.transpose(1, 2, 3, 0).copy()}\n",
                   reference="def reference(img_ref, padding, stride, filter_ref=None, filter_T_ref=None):\n"
                             "    filter_ref = filter_T_ref.transpose(3, 0, 1, 2) if filter_ref is None else filter_ref\n"
                             "    x = np.pad(img_ref.astype(np.float64), ((0, 0), (0, 0), *padding))\n"
                             "    h, w = x.shape[2] - 2, x.shape[3] - 2\n"
                             "    return sum(np.einsum('nchw,oc->nohw', x[:, :, a:a + h, b:b + w], filter_ref[:, :, a, b])\n"
                             "               for a in range(3) for b in range(3))\n"),
    "csa": dict(dims={"S": 1024, "D": 64}, call=["q", "k", "v", "nl.bfloat16", "nl.float32"],
                kwargs={"seq_len": 1024, "d_head": 64},
                inputs={"q": ((1024, 64), BF16), "k": ((64, 1024), BF16), "v": ((1024, 64), BF16)},
                outputs={"o": ((1024, 64), BF16), "l": ((1024, 1), F32), "m": ((1024, 1), F32)},
                atol=1e-2, rtol=1e-2, make_inputs=FLASH_MAKER.format(q="(1024, 64)", k="(64, 1024)", v="(1024, 64)"),
                nki2={"inputs": {"q": ((1024, 64), BF16), "k": ((64, 1024), BF16), "v": ((1024, 64), BF16),
                                 "causal_mask": ((1024, 1024), F32)},
                      "call": ["q", "k", "v", "causal_mask", "nl.bfloat16", "nl.float32"]},
                reference=ATTN_REFERENCE + "def reference(q, k, v, seq_len, d_head, causal_mask=None, **dtypes):\n"
                                           "    return _olm(q, k, v, causal_mask)\n"),
    "mha": dict(dims={"H": 2, "S": 512, "D": 64}, call=["q", "k", "v", "nl.bfloat16", "nl.float32"],
                kwargs={"num_heads": 2, "seq_len": 512, "d_head": 64},
                inputs={"q": ((2, 512, 64), BF16), "k": ((2, 64, 512), BF16), "v": ((2, 512, 64), BF16)},
                outputs={"o": ((2, 512, 64), BF16), "l": ((2, 512, 1), BF16), "m": ((2, 512, 1), BF16)},
                atol=1e-2, rtol=1e-2,
                make_inputs=FLASH_MAKER.format(q="(2, 512, 64)", k="(2, 64, 512)", v="(2, 512, 64)"),
                nki2={"inputs": {"q": ((2, 512, 64), BF16), "k": ((2, 64, 512), BF16), "v": ((2, 512, 64), BF16),
                                 "causal_mask": ((512, 512), F32)},
                      "outputs": {"o": ((2, 512, 64), BF16), "l": ((2, 512, 1), F32), "m": ((2, 512, 1), F32)},
                      "call": ["q", "k", "v", "causal_mask", "nl.bfloat16", "nl.float32"]},
                reference=ATTN_REFERENCE + "def reference(q, k, v, num_heads, seq_len, d_head, causal_mask=None, **dt):\n"
                                           "    outs = [_olm(q[h], k[h], v[h], causal_mask) for h in range(num_heads)]\n"
                                           "    return tuple(np.stack([o[i] for o in outs]) for i in range(3))\n"),
    "attention": dict(dims={"D": 64, "S": 1024}, inputs={n: ((64, 1024), BF16) for n in ("q", "k", "v")},
                      outputs={"out": ((1024, 64), BF16)}, atol=1e-2, rtol=1e-2,
                      make_inputs=ATTN_MAKER.format(layout="hm"), reference=ATTN_REF.format(args="q, k, v", scores="q.T @ k", v="v.T")),
    "sd-attention": dict(dims={"S": 1024, "D": 64}, inputs={n: ((1024, 64), F32) for n in ("q_ref", "k_ref", "v_ref")},
                         kwargs={"use_causal_mask": False, "mixed_precision": True},
                         nki2={"kwargs": {}},      # Autocomp's v2 harness calls solution(q, k, v)
                         outputs={"out": ((1024, 64), F32)}, atol=1e-2, rtol=1e-2,
                         make_inputs=ATTN_MAKER.format(layout="sm"),
                         reference=ATTN_REF.format(args="q_ref, k_ref, v_ref", scores="0.125 * q @ k.T", v="v")),
}


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-heuristic"))


def small_problem(kit: SimKit, family: str):
    made = kit.__dict__.setdefault("small_problems", {})       # one problem directory per family and kit
    if family not in made:
        case = dict(CASES[family])
        dims = case.pop("dims")
        made[family] = (kit.problem(name=f"h-{family}", **case),
                        ProblemRef(target="trainium-sim", name=f"h-{family}", family=family, dims=dims))
    return made[family]


def schedules_to_check(family: str, dims: dict, walks: int = 3, steps: int = 5) -> list:
    """The starting schedule, every schedule one mutation away, and the ends of a few seeded random walks."""
    fam = FAMILIES[family]
    h = TrainiumHeuristic()
    start = fam.default(dims)
    found = [start]
    mutations = sorted(set(fam.OPTIONS.values()))
    for m in mutations:
        found += [c for c in h._candidates(fam, m, start, dims) if c not in found]
    rng = random.Random(7)
    for _ in range(walks):
        s = start
        for _ in range(steps):
            moves = [c for m in mutations for c in h._candidates(fam, m, s, dims)]
            if moves:
                s = rng.choice(moves)
        if s not in found:
            found.append(s)
    return found


@pytest.mark.parametrize("family", sorted(CASES))
def test_schedules_render_correct_kernels(kit, family):
    sim_problem, problem = small_problem(kit, family)
    checked = schedules_to_check(family, problem.dims)
    assert len(checked) >= 4, checked              # the start and at least a few mutations apply
    for s in checked:
        code = render(s, problem.dims)
        assert parse_schedule(code, family) == s
        r = kit.sim.evaluate(sim_problem, code)
        assert r.correct and r.latency > 0, f"{s}\n{explain(r)}\n{code}"


# schedule features that a random walk may miss, each checked on its family's small problem
FEATURES = {
    "gemm": [dict(level=2, bm=1, bn=1, order="nm", dk=2), dict(level=1, bm=2, bn=1, dk=2, prefetch=True),
             dict(level=2, bm=2, bn=1, dk=2, bufs=1)],
    "rmsnorm": [dict(fuse=True, norm="scalar", hoist=True, prefetch=True, wrow=True, gfirst=True),
                dict(hoist=True, bcast="tensor", wrow=True, gfirst=True, gmul="gpsimd", chunk=512),
                dict(wrow=True, norm="tensor_scalar", gfirst=True)],
    "layernorm": [dict(wrow=True, prefetch=True), dict(wrow=True, bcast="tensor", stats="one_pass", norm="scalar"),
                  dict(hoist=False, wrow=True, prefetch=True, chunk=512),
                  dict(bcast="psum", chunk=512, prefetch=True, stats="one_pass", norm="scalar", rowstore=True),
                  dict(bcast="psum", chunk=256, stats="two_pass"), dict(chunk=512, rowstore=True, affine="gpsimd_add"),
                  dict(bcast="psum", chunk=512, prefetch=True, stats="bn_stats", norm="scalar", rowstore=True),
                  dict(stats="bn_stats"), dict(stats="bn_stats", norm="tensor_scalar", chunk=256),
                  dict(stats="one_pass_scalar", prefetch=True, norm="scalar")],
    "transpose": [dict(rowgroup=True), dict(rowgroup=True, prefetch=True, evict="alternate"),
                  dict(rowgroup=True, evict="vector")],
    "mamba": [dict(hoist=True, rows=True, bcast="tensor", acc="psum", chunk=512, skew=2, cstore=True),
              dict(bcast="tensor", acc="psum", chunk=256, skew=1, evict="vector"),
              dict(rows=True, bcast="tensor32", chunk=512, skew=2, cstore=True),
              dict(hoist=True, bcast="vector", acc="psum", chunk=256, skew=2),
              dict(hoist=True, rows=True, chunk=512, cstore=True, skew=1),
              dict(hoist=True, rows=True, bcast="tensor", acc="transpose", chunk=512, skew=2, cstore=True),
              dict(rows=True, acc="transpose", chunk=256, skew=1, evict="vector"),
              dict(rows=True, bcast="tensor32", acc="transpose", chunk=256)],
    "conv1d": [dict(nb=2, merged=True), dict(nb=4, merged=True, method="tensor", hoist=True, prefetch=True),
               dict(nb=2, merged=True, bufs=1, mul="scalar", add="split")],
    "cumsum": [dict(layout="rows", cols=0, rows=4, merged=True, restart=True, depth=2),
               dict(carry="direct"), dict(layout="rows", cols=256, carry="direct", depth=1),
               dict(cols=0, rows=2, restart=True), dict(layout="rows", cols=0, rows=2, depth=3),
               dict(cols=0, rows=4, depth=1), dict(layout="rows", cols=512, depth=2)],
    "rope": [dict(method="pe", cols=1024, depth=2, whole=True, sin_first=True, tables_first=True),
             dict(method="pe", cols=2048, psum_sum=True, tables_first=True), dict(method="pe", cols=256, depth=3),
             dict(method="pe", cols=512, depth=1, psum_sum=True, sin_first=True, whole=True),
             dict(cols=1024, depth=2, whole=True), dict(cols=256, depth=1)],
    "conv2d": [dict(rows=4, bf16=True, hoist=True, group=2, chunked=True, prefetch=True, evict="alternate"),
               dict(rows=2, group=4, chunked=True, evict="vector"), dict(bf16=True, prefetch=True, rows=4)],
    "csa": [dict(skip=True, hoist=True, qt=True, fuse=True, tb=4, kb=256, sev="vector", pev="alternate", ahead=2),
            dict(qt=True, fuse=True, tb=2, kb=128, sev="alternate", pev="vector", ahead=1),
            dict(method="twopass", skip=True, hoist=True, ahead=2, interleave=True, tmask=True),
            dict(method="twopass", skip=True, hoist=True, group=2, ahead=1, interleave=True),
            dict(method="twopass", skip=True, hoist=True, group=1, ahead=0, interleave=True, tmask=True)],
    "mha": [dict(skip=True, hoist=True, qt=True, fuse=True, tb=4, pev="vector", ahead=1, family="mha"),
            dict(method="twopass", skip=True, hoist=True, ahead=2, interleave=True, tmask=True, family="mha"),
            dict(method="twopass", skip=True, hoist=True, group=2, ahead=0, family="mha")],
    "attention": [dict(kres=True, vres=True, qres=True, bigdma=True, softmax="twopass", pt="direct", ones=True,
                       group=4, mdt="bf16", ahead=2, skew=True),
                  dict(softmax="twopass", pt="direct", ones=True, group=2, ahead=1),
                  dict(softmax="fused", ones=True, evict="alternate", group=4, qres=True),
                  dict(kres=True, softmax="twopass", group=2, evict="scalar", ahead=1, skew=True, mdt="bf16"),
                  dict(vres=True, softmax="twopass", kw=128, ones=True, evict="vector")],
    "sd-attention": [dict(kres=True, vres=True, qres=True, bigdma=True, qt="once", kw=512, softmax="twopass",
                          pt="direct", ones=True, fold=True, group=4, mdt="bf16", ahead=2, skew=True),
                     dict(qt="once", softmax="twopass", pt="direct", ones=True, fold=True, group=1, ahead=1),
                     dict(qres=True, vres=True, softmax="fused", ones=True, evict="scalar"),
                     dict(kres=True, qt="once", softmax="twopass", pt="direct", ones=True, group=2, skew=True),
                     dict(qt="once", kw=512, softmax="twopass", group=4, evict="alternate", mdt="bf16", ahead=2)],
}


@pytest.mark.parametrize("family", sorted(FEATURES))
def test_schedule_features_render_correct_kernels(kit, family):
    sim_problem, problem = small_problem(kit, family)
    fam = FAMILIES[family]
    for knobs in FEATURES[family]:
        s = fam.Schedule(**knobs)
        assert fam.fits(s, problem.dims), s
        code = render(s, problem.dims)
        r = kit.sim.evaluate(sim_problem, code)
        assert r.correct and r.latency > 0, f"{s}\n{explain(r)}\n{code}"


MENU = [MenuOption(id=i, title=i) for i in ("max-tiles", "hoist-loads", "block-bigger", "loop-order", "multi-buffer",
                                            "engine-balance", "evict-efficiently", "large-dma", "spread-dma",
                                            "fuse-activation", "fewer-bigger-instructions", "pre-transposed-operands",
                                            "reduce-on-tensor", "combine-vector-ops", "online-softmax")]


def plan_request(problem: ProblemRef, code: str = "", metrics: dict | None = None, seed: int = 0,
                 menu=MENU) -> PlanRequest:
    return PlanRequest(problem=problem, parent=Parent(id="p", code=code, metrics=metrics or {}), menu=menu,
                       model="heuristic", iteration=0, iterations=4, seed=seed)


@pytest.mark.parametrize("family", sorted(CASES))
def test_plan_picks_an_applicable_option_and_the_coder_follows_it(family):
    problem = ProblemRef(target="trainium-sim", name=f"h-{family}", family=family, dims=CASES[family]["dims"])
    fam, h = FAMILIES[family], for_target("trainium-sim")
    for seed in range(4):
        plan = h.plan(plan_request(problem, seed=seed))        # a parent without a schedule: the naive start
        assert plan.option_id in fam.OPTIONS and plan.params["mutation"] == fam.OPTIONS[plan.option_id]
        chosen = plan.params["schedule"]
        assert chosen in plan.params["variants"] and fam.fits(fam.Schedule(**chosen), problem.dims)
        assert fam.Schedule(**chosen) != fam.default(problem.dims)
        for code_seed in (0, 1, 3):
            code = h.code(CodeRequest(problem=problem, parent=Parent(id="p", code=""), plan=plan, model="heuristic",
                                      seed=code_seed))
            got = parse_schedule(code, family)
            assert got is not None and got.__dict__ in plan.params["variants"]
            assert fam.describe(got) in plan.text     # the plan names every schedule its coders may write
        first = h.code(CodeRequest(problem=problem, parent=Parent(id="p", code=""), plan=plan, model="heuristic",
                                   seed=0))
        assert parse_schedule(first, family) == fam.Schedule(**chosen)
        # the next iteration continues from the rendered schedule, not from the start
        child = h.plan(plan_request(problem, code=first, seed=seed))
        assert "not written by this agent" not in child.text


def test_plan_follows_the_feedback():
    """DMA traffic far above the compulsory bytes points a GEMM planner at hoisting loads."""
    problem = ProblemRef(target="trainium-sim", name="h-gemm", family="gemm", dims=CASES["gemm"]["dims"])
    metrics = {"latency_us": 600.0, "dma_bytes": 64 << 20, "compulsory_bytes": 1 << 20, "binding_engine": "DMA",
               "engine_busy": {"DMA": 0.6, "Tensor": 0.05, "Vector": 0.02, "Scalar": 0.02, "GpSimd": 0.0},
               "instructions": {"DMA": 100}, "roofline_fraction": 0.05}
    menu = [MenuOption(id=i, title=i) for i in ("hoist-loads", "engine-balance", "loop-order")]
    picks = [TrainiumHeuristic().plan(plan_request(problem, metrics=metrics, seed=s, menu=menu)).option_id
             for s in range(12)]
    assert picks.count("hoist-loads") >= 10, picks


def test_foreign_plan_is_implemented_from_its_option():
    problem = ProblemRef(target="trainium-sim", name="h-conv1d", family="conv1d", dims=CASES["conv1d"]["dims"])
    plan = Plan(text="batch several images per instruction", option_id="fewer-bigger-instructions")
    code = TrainiumHeuristic().code(CodeRequest(problem=problem, parent=Parent(id="p", code=""), plan=plan,
                                                model="heuristic", seed=5))
    assert parse_schedule(code, "conv1d").nb > 1


def test_repair_falls_back_to_a_safer_schedule():
    problem = ProblemRef(target="trainium-sim", name="h-gemm", family="gemm", dims=CASES["gemm"]["dims"])
    fam = FAMILIES["gemm"]
    risky = fam.Schedule(tn=512, level=2, bm=2, bn=1, prefetch=True, evict="alternate")
    h = TrainiumHeuristic()
    code = render(risky, problem.dims)
    seen = [risky]
    for _ in range(12):                        # every repair is safer, until only the start is left
        try:
            code = h.repair(RepairRequest(problem=problem, plan=Plan(text="", option_id="x"), code=code,
                                          error="boom", model="heuristic", seed=0))
        except HeuristicError as exc:
            assert "no safer variant" in str(exc)
            break
        s = parse_schedule(code, "gemm")
        assert s not in seen and fam.fits(s, problem.dims)
        seen.append(s)
    assert seen[-1] == fam.default(problem.dims) and len(seen) > 3
    with pytest.raises(HeuristicError, match="own schedules"):
        h.repair(RepairRequest(problem=problem, plan=Plan(text="", option_id="x"), code="@nki.jit\ndef solution(): ...",
                               error="boom", model="heuristic", seed=0))


@pytest.mark.parametrize("family", ["no-such-family", "own:my-kernel"])
def test_unsupported_problem_raises_a_clear_error(family):
    problem = ProblemRef(target="trainium-sim", name=family, family=family, dims={"S": 2048})
    h = for_target("trainium-sim")
    with pytest.raises(HeuristicError, match=r"cannot optimize .*use an LLM model \(--model \.\.\.\)"):
        h.plan(plan_request(problem))
    with pytest.raises(HeuristicError, match="use an LLM model"):
        h.code(CodeRequest(problem=problem, parent=Parent(id="p", code=""), plan=Plan(text="", option_id="max-tiles"),
                           model="heuristic", seed=0))


def test_sizes_the_schedules_cannot_cover_raise():
    problem = ProblemRef(target="trainium-sim", name="odd", family="transpose", dims={"D0": 2, "B": 100, "N": 512})
    with pytest.raises(HeuristicError, match="do not fit the sizes"):
        TrainiumHeuristic().plan(plan_request(problem))
    problem = ProblemRef(target="trainium-sim", name="bare", family="gemm", dims={"M": 256})
    with pytest.raises(HeuristicError, match="does not declare the dims K, N"):
        TrainiumHeuristic().plan(plan_request(problem))
