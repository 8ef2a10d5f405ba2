"""The trainium-sim heuristic's schedule features, without the simulator: which schedules fit, what their
kernels contain, and which moves the planner offers from given feedback. (tests/trainium_sim/
test_heuristic.py evaluates the rendered kernels on the simulator.)"""
from __future__ import annotations

import re
from dataclasses import replace

from autocomp_zmq.hw_runners.trainium_sim.heuristic import conv as conv
from autocomp_zmq.hw_runners.trainium_sim.heuristic import conv2d as conv2d
from autocomp_zmq.hw_runners.trainium_sim.heuristic import gemm as gemm
from autocomp_zmq.hw_runners.trainium_sim.heuristic import mamba as mamba
from autocomp_zmq.hw_runners.trainium_sim.heuristic.move import TRANSPOSE, TrSchedule
from autocomp_zmq.hw_runners.trainium_sim.heuristic.norm import LAYERNORM, RMSNORM
from autocomp_zmq.hw_runners.trainium_sim.heuristic.agent import TrainiumHeuristic, _features
from autocomp_zmq.hw_runners.trainium_sim.heuristic.codegen import parse_schedule, render
from autocomp_zmq.protocols.jobs import MenuOption, Parent, PlanRequest, ProblemRef

PAPER_GEMM = {"K": 8192, "M": 4096, "N": 8192}


def plan_request(problem: ProblemRef, code: str, metrics: dict, seed: int, menu: list[str]) -> PlanRequest:
    return PlanRequest(problem=problem, parent=Parent(id="p", code=code, metrics=metrics),
                       menu=[MenuOption(id=i, title=i) for i in menu], model="heuristic", iteration=0, iterations=4,
                       seed=seed)


def test_gemm_panels_load_several_k_tiles_per_dma():
    s = gemm.Schedule(level=2, bm=1, bn=2, order="nm", dk=8)
    assert gemm.fits(s, PAPER_GEMM) and "8 k-tile(s) per panel DMA" in gemm.describe(s)
    code = render(s, PAPER_GEMM)
    assert parse_schedule(code, "gemm") == s
    # one load statement per panel, inside a loop over KT // DK groups of k-tiles: a [128, DK, width] view
    loads = [line for line in code.splitlines() if "nl.load(" in line]
    assert len(loads) == 2 and all("(c * DK + i_k) * 128 + i_p" in line for line in loads), loads
    assert code.count("for c in nl.affine_range(KT // DK)") == 2
    pipelined = render(gemm.Schedule(level=1, bm=1, bn=1, dk=4, prefetch=True), PAPER_GEMM)
    assert pipelined.count("for c in nl.affine_range(KT // DK)") == 2 and "DK = 4" in pipelined


def test_gemm_dk_must_divide_the_contraction_tiles():
    d = {"K": 384, "M": 256, "N": 512}                  # 3 k-tiles
    assert gemm.fits(gemm.Schedule(level=1, dk=1), d)
    assert not gemm.fits(gemm.Schedule(level=1, dk=2), d)
    assert not gemm.fits(gemm.Schedule(level=0, dk=2), PAPER_GEMM)      # level 0 has no panels


def test_many_small_transfers_point_the_planner_at_merging_them():
    """Feedback where the DMA queue's fixed setups fill the latency: large-dma wins and merges k-tiles."""
    problem = ProblemRef(target="trainium-sim", name="g", family="gemm", dims=PAPER_GEMM)
    parent = render(gemm.Schedule(level=2, bm=1, bn=2, order="nm"), PAPER_GEMM)
    metrics = {"latency_us": 8000.0, "dma_bytes": 3 << 28, "compulsory_bytes": 1 << 28, "binding_engine": "DMA",
               "engine_busy": {"DMA": 0.9, "Tensor": 0.6, "Vector": 0.0, "Scalar": 0.03, "GpSimd": 0.0},
               "instructions": {"DMA": 8704}, "roofline_fraction": 0.6}
    assert _features(metrics)["dma_setup"] > 0.8
    menu = ["large-dma", "engine-balance", "loop-order", "multi-buffer"]
    plans = [TrainiumHeuristic().plan(plan_request(problem, parent, metrics, s, menu)) for s in range(12)]
    assert sum(p.option_id == "large-dma" for p in plans) >= 9, [p.option_id for p in plans]
    dks = {v["dk"] for p in plans if p.option_id == "large-dma" for v in p.params["variants"]}
    assert dks >= {2, 4}


def test_kernel_text_names_no_problem():
    """Schedules render from dims and knobs only: no problem name or hand-tuned constant in the kernel."""
    code = render(gemm.Schedule(level=2, bm=2, bn=1, dk=16), PAPER_GEMM)
    assert not re.search(r"8192|4096", code)


def test_norm_weights_load_as_one_row_after_the_first_tile():
    d = {"M": 512, "N": 4096}
    for fam, weights in ((RMSNORM, 1), (LAYERNORM, 2)):
        s = fam.Schedule(hoist=True, prefetch=True, wrow=True)
        assert fam.fits(s, d)
        code = render(s, d)
        loads = [line.strip() for line in code.splitlines() if "nl.load(" in line]
        # the first row tile's load, then each weight row whole (one DMA), then the prefetch in the loop
        assert loads[0].startswith("x_next = nl.load(") and len(loads) == 2 + weights, loads
        assert all("[0:1, 0:N]" in line for line in loads[1:1 + weights])
        assert "for c in nl.affine_range(N // GB)" not in code          # the Vector broadcast runs once
        chunked = render(fam.Schedule(hoist=True), d)
        assert "for c in nl.affine_range(N // GB)" in chunked


def test_rmsnorm_weights_first_needs_no_statistics():
    code = render(RMSNORM.Schedule(gfirst=True, norm="scalar"), {"M": 256, "N": 1024})
    body = code[code.index("for c in nl.affine_range(N // CW)"):]
    assert body.index("g_b[") < body.index("scale=rinv")
    assert RMSNORM.Schedule(gfirst=True) in RMSNORM.candidates("norm", RMSNORM.Schedule(), {"M": 256, "N": 1024})


def test_conv1d_merged_tiles_move_all_images_in_one_dma():
    d = {"N": 8, "C": 512, "W": 2048, "WF": 3}
    assert not conv.fits(conv.Schedule(nb=1, merged=True), d)          # nothing to merge
    s = conv.Schedule(nb=4, merged=True, prefetch=True)
    assert conv.fits(s, d)
    code = render(s, d)
    assert code.count("nl.load(img_ref") == 1 and code.count("nl.store(") == 1
    assert "for j in nl.static_range(NB):\n            xp[:, j * WP + pl" not in code
    assert all(c.merged for c in conv.candidates("merge", conv.Schedule(nb=2), d))


def test_conv2d_rows_per_matmul_fill_one_psum_bank_and_bf16_comes_with_chunked_loads():
    d = {"N": 16, "CI": 128, "H": 128, "W": 128, "CO": 512, "HF": 3, "WF": 3}
    assert conv2d.row_choices(d) == [1, 2, 4]                         # 4 rows x 128 columns = 512 fp32
    assert [c.rows for c in conv2d.candidates("max_tiles", conv2d.default(d), d)] == [4, 2]
    assert not conv2d.fits(conv2d.Schedule(rows=8), d)
    # a DMA that casts to bf16 on the way is slow: the precision move also offers the chunked image loads
    assert conv2d.Schedule(bf16=True, chunked=True) in conv2d.candidates("precision", conv2d.default(d), d)
    # fp32 padded tiles for two images and the chunk buffers do not fit SBUF at this size; bf16 ones do
    assert not conv2d.fits(conv2d.Schedule(rows=4, prefetch=True, chunked=True, hoist=True, group=8), d)
    s = conv2d.Schedule(rows=4, bf16=True, prefetch=True, chunked=True, hoist=True, group=8, evict="alternate")
    assert conv2d.fits(s, d)
    code = render(s, d)
    assert parse_schedule(code, "conv2d") == s
    assert "img[:, i0 + a:i0 + a + r, b:b + K1]" in code and code.count("nl.store(") == 1


def test_layernorm_broadcasts_gamma_beta_per_step_into_psum_and_stores_whole_rows():
    d = {"M": 4096, "N": 8192}
    s = LAYERNORM.Schedule(bcast="psum", chunk=512, prefetch=True, stats="one_pass", norm="scalar", rowstore=True)
    assert LAYERNORM.fits(s, d)
    # whole-row [P, N] gamma/beta tiles would not fit beside the prefetched rows at this width
    assert not LAYERNORM.fits(LAYERNORM.Schedule(chunk=512, prefetch=True, stats="one_pass", norm="scalar"), d)
    code = render(s, d)
    assert code.count("nisa.nc_matmul(pick_") == 2 and "gam_b" not in code
    assert code.count("nl.store(") == 1 and "nl.store(out[t * P:(t + 1) * P, 0:N], value=x)" in code
    assert not LAYERNORM.fits(LAYERNORM.Schedule(bcast="psum", chunk=1024), d)      # one PSUM bank per step
    assert not LAYERNORM.fits(LAYERNORM.Schedule(rowstore=True), d)                 # nothing to assemble
    offered = LAYERNORM.candidates("bcast", LAYERNORM.Schedule(), d)
    assert any(c.bcast == "psum" and c.rowstore for c in offered)


def test_transpose_row_groups_move_each_matrix_in_one_load_and_one_store():
    d = {"D0": 8, "B": 512, "N": 1024}
    s = TrSchedule(rowgroup=True, prefetch=True, evict="alternate")
    assert TRANSPOSE.fits(s, d) and "consecutive rows per partition" in TRANSPOSE.describe(s)
    code = render(s, d)
    assert parse_schedule(code, "transpose") == s
    assert code.count("nl.load(") == 2 and code.count("nl.store(") == 1        # first matrix, then prefetches
    assert "nisa.nc_transpose(xs[:, s * NN + r:(s + 1) * NN:GN])" in code
    assert "res[i_q, r * B + GB * i_p + i_s] = " in code
    # more than 4 row groups would overflow one PSUM bank; other pe knobs do not combine with row groups
    assert not TRANSPOSE.fits(s, {"D0": 8, "B": 640, "N": 1024})
    assert not TRANSPOSE.fits(TrSchedule(rowgroup=True, group=2), d)
    # offered from the per-block kernels as a bigger-DMA move
    assert s.__class__(rowgroup=True) in TRANSPOSE.candidates("large_dma", TrSchedule(), d)
    assert TRANSPOSE.candidates("large_dma", TrSchedule(rowgroup=True), d) == []


def test_layernorm_statistics_without_a_scratch_row_fit_with_prefetch_at_the_paper_shape():
    d = {"M": 4096, "N": 8192}
    base = dict(bcast="psum", chunk=512, norm="scalar", rowstore=True, prefetch=True)
    bn = LAYERNORM.Schedule(stats="bn_stats", **base)
    assert LAYERNORM.fits(bn, d)
    code = render(bn, d)
    assert "nisa.bn_stats(x[:, c * BN:(c + 1) * BN])" in code and "nisa.bn_aggr(st)" in code
    assert "activation_reduce" not in code
    # both Scalar sums share one scratch row, so the prefetched schedule fits as well
    sc = LAYERNORM.Schedule(stats="one_pass_scalar", **base)
    assert LAYERNORM.fits(sc, d) and render(sc, d).count("junk = nl.ndarray((P, N)") == 1
    assert bn in LAYERNORM.candidates("fuse", LAYERNORM.Schedule(stats="one_pass", **base), d)


def test_stalled_searches_get_two_step_moves():
    """While the search improves, every variant is one change away; once it has stalled for a while, most
    plans combine two changes, so a search whose single changes were all tried still has new kernels."""
    problem = ProblemRef(target="trainium-sim", name="t", family="transpose", dims={"D0": 8, "B": 512, "N": 512})
    start = TrSchedule(rowgroup=True)
    parent = render(start, problem.dims)
    menu = ["large-dma", "engine-balance", "multi-buffer", "max-tiles"]

    def changed(v: dict) -> int:
        return sum(v[k] != getattr(start, k) for k in v)

    def plans(stale: int):
        out = []
        for seed in range(20):
            req = plan_request(problem, parent, {}, seed, menu)
            req.stale = stale
            out.append(TrainiumHeuristic().plan(req))
        return out
    assert all(changed(v) == 1 for p in plans(0) for v in p.params["variants"])
    late = plans(20)
    two = [p for p in late if all(changed(v) == 2 for v in p.params["variants"])]
    assert len(two) >= 10 and all("further change" in p.text for p in two), [p.text for p in late]


PAPER_MAMBA = {"BATCH": 1, "CHANNELS": 256, "SEQ": 2048, "STATE": 16}


def test_mamba_start_is_the_naive_kernel_and_psum_moves_bring_chunks_and_pipelining():
    start = mamba.default(PAPER_MAMBA)
    assert mamba.fits(start, PAPER_MAMBA)
    code = render(start, PAPER_MAMBA)
    assert parse_schedule(code, "mamba") == start and "nisa.nc_matmul" not in code and "2048" not in code
    # a move of Vector work into PSUM chunks time to one bank and offers the pipelined issue orders with it
    moved = mamba.candidates("engine", mamba.Schedule(hoist=True, rows=True), PAPER_MAMBA)
    psum = [c for c in moved if c.acc == "psum"]
    assert psum and all(c.chunk == 512 for c in psum) and {c.skew for c in psum} == {0, 1, 2}
    # the transposed C * h needs C resident: the move loads it once per batch
    tr = [c for c in mamba.candidates("fuse", start, PAPER_MAMBA) if c.acc == "transpose"]
    assert tr and all(c.rows and mamba.fits(c, PAPER_MAMBA) for c in tr)
    assert not mamba.fits(mamba.Schedule(acc="transpose", chunk=512), PAPER_MAMBA)
    assert not mamba.fits(mamba.Schedule(acc="psum"), PAPER_MAMBA)           # a whole sequence is no PSUM bank
    best = mamba.Schedule(hoist=True, rows=True, bcast="tensor", acc="transpose", chunk=512, skew=2, cstore=True)
    text = render(best, PAPER_MAMBA)
    assert "nisa.nc_transpose(h[i]" in text and "scale=cT[" in text and text.count("nl.store(") == 1


def test_attention_two_pass_follows_skip_and_hoist_and_fits_the_paper_shapes():
    from autocomp_zmq.hw_runners.trainium_sim.heuristic.flash import CSA, MHA
    d = {"S": 16384, "D": 128}
    start = CSA.default(d)
    assert CSA.candidates("method", start, d) == []             # first the visible blocks, resident K and V
    rows = [c for c in CSA.candidates("hoist", start, d) if c.skip][0]
    two = CSA.candidates("method", rows, d)
    assert two and all(CSA.fits(c, d) and c.method == "twopass" for c in two)
    assert "nl.transpose" not in CSA.body(two[0]) and "nl.transpose(p[" in CSA.body(start)
    m = MHA.default({"H": 8, "S": 2048, "D": 128})
    assert m.family == "mha" and "q[h, r0:r1, :]" in MHA.body(m)


def test_attention_schedules_start_naive_and_reach_transposed_scores():
    """The starting schedules render the naive approach (scores gathered in SBUF, P transposed, K and V
    reloaded per query tile); the transposed-score move needs the max pass and the ones column, and the
    -m fold into the contraction only fits seq-major inputs with d + 2 <= 128."""
    from autocomp_zmq.hw_runners.trainium_sim.heuristic.attention import ATTENTION, SD_ATTENTION
    hm, sm = {"D": 128, "S": 4096}, {"S": 4096, "D": 64}
    for fam, d in ((ATTENTION, hm), (SD_ATTENTION, sm)):
        s = fam.default(d)
        code = render(s, d)
        assert fam.fits(s, d) and parse_schedule(code, s.family) == s
        assert "scores = nl.ndarray((nl.par_dim(P), seqlen)" in code and "nisa.nc_transpose(probs" in code
        moved = fam.candidates("method", s, d)
        assert moved and all(c.softmax == "twopass" and c.pt == "direct" and c.ones for c in moved)
        assert all(fam.fits(c, d) for c in moved) and ("nisa.nc_transpose(probs" not in render(moved[0], d))
        assert not fam.fits(replace(s, pt="direct"), d)          # no row max known: no S^T layout
    assert any(c.fold for c in SD_ATTENTION.candidates("method", SD_ATTENTION.default(sm), sm))
    assert not any(c.fold for c in ATTENTION.candidates("method", ATTENTION.default(hm), hm))
    assert "nisa.nc_matmul(q_i, kT(c * KW, KW))" in render(ATTENTION.default(hm), hm)
    assert "nl.matmul(q_i, kT(c * KW, KW))" in render(SD_ATTENTION.default(sm), sm)   # a transpose per matmul
