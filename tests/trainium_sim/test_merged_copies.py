"""A copy of a result that nothing else reads costs nothing: the compiler has the producer write the copy's
destination (rewrites.merged_copies; fast tier). Autocomp's sd-attention chain step 3 is the measured case: an
extra fp32 -> bf16 copy of every [128, 4096] exp result and the kernel measured 2% faster on a trn1."""
from __future__ import annotations

import time

import pytest

from autocomp_zmq.hw_runners.trainium_sim import rewrites
from tests.trainium_sim.simkit import SimKit, ok
from tests.trainium_sim.test_costmodel import Stream

N = 4096


def exp_then(copy: str | None, mid: str = "float32", dst: str = "bfloat16", read_twice: bool = False,
             dst_read_between: bool = False, part: bool = False, producer: str = "act"):
    """exp of a loaded tile into `mid`, then (copy = an engine) a copy of it into `dst`, then a store of `dst`."""
    s = Stream()
    src, out = s.tensor("hbm", (128, N), site=10), s.tensor("hbm", (128, N), dst, site=11)
    x = s.tensor("sbuf", (128, N), site=1)
    y = s.tensor("sbuf", (128, N), mid if copy else dst, site=2)
    z = s.tensor("sbuf", (128, N), dst, site=3)
    s.load(x, src, site=1)
    if dst_read_between:
        s.emit("memset", "dve", [s.at(z)], [], value=0.0, site=3)
    if producer == "act":
        s.emit("activation", "act", [s.at(y)], [s.at(x), 1.0, None], fn="exp", site=2)
    else:
        s.emit("ew", producer, [s.at(y)], [s.at(x)], fn="abs", site=2)
    if dst_read_between:
        s.emit("dma", "dma", [s.at(out)], [s.at(z)], site=3)          # reads z's old value: the copy must wait
    if copy:
        half = (0, 128), (0, N // 2)
        s.emit("ew", copy, [s.at(z, *half) if part else s.at(z)], [s.at(y, *half) if part else s.at(y)],
               fn="copy", site=3)
        if read_twice:
            s.emit("dma", "dma", [s.at(s.tensor("hbm", (128, N), mid, site=12))], [s.at(y)], site=2)
    s.emit("dma", "dma", [s.at(out)], [s.at(z if copy else y)], site=4)
    steps, _, tl = s.timed()
    return rewrites.merged_copies(steps), tl


@pytest.mark.parametrize("engine", ["dve", "act", "pool"])
def test_a_copy_of_an_fp32_result_nothing_else_reads_costs_nothing(engine):
    merged, tl = exp_then(engine)
    direct = exp_then(None)[1]                       # the activation writing bf16 itself
    assert len(merged) == 1
    assert tl.total_ns == pytest.approx(direct.total_ns)
    assert tl.counts[engine] == direct.counts[engine] and tl.busy_ns["dve"] == direct.busy_ns["dve"]


def test_a_same_dtype_copy_merges_too_and_so_does_a_vector_producer():
    assert len(exp_then("dve", mid="bfloat16")[0]) == 1
    assert len(exp_then("act", producer="dve")[0]) == 1


@pytest.mark.parametrize("case", ["reduced precision", "read twice", "destination read between", "partial"])
def test_what_the_compiler_cannot_merge_is_charged(case):
    kwargs = {"reduced precision": dict(mid="bfloat16", dst="float32"), "read twice": dict(read_twice=True),
              "destination read between": dict(dst_read_between=True), "partial": dict(part=True)}[case]
    merged, tl = exp_then("dve", **kwargs)
    assert merged == {}
    assert tl.busy_ns["dve"] > 0


def strided_exp(via_copy: bool):
    """exp of a [128, 512] tile written to every 8th column of a wider tile (32-byte stride): directly, or into
    a contiguous fp32 tile first and then copied there."""
    s = Stream()
    src, out = s.tensor("hbm", (128, 512), site=10), s.tensor("hbm", (128, 4096), site=11)
    x, y, z = s.tensor("sbuf", (128, 512)), s.tensor("sbuf", (128, 512), site=2), s.tensor("sbuf", (128, 4096), site=3)
    s.load(x, src)
    s.emit("memset", "dve", [s.at(z)], [], value=0.0, site=3)
    every_8th = s.at(z, (0, 128), (0, 4096, 8))
    s.emit("activation", "act", [s.at(y) if via_copy else every_8th], [s.at(x), 1.0, None], fn="exp", site=2)
    if via_copy:
        s.emit("ew", "act", [every_8th], [s.at(y)], fn="copy", site=3)
    s.emit("dma", "dma", [s.at(out)], [s.at(z)], site=4)
    steps, _, tl = s.timed()
    return rewrites.merged_copies(steps), tl


def test_a_merged_copy_writes_its_destination_at_that_destination_s_cost():
    """The merged instruction writes the copy's destination: a strided one costs it what writing there directly
    costs (a copy is no way to make a strided write cheap)."""
    (merged, via), (_, direct) = strided_exp(True), strided_exp(False)
    assert merged == {3: 2}
    assert via.busy_ns["act"] == pytest.approx(direct.busy_ns["act"])
    assert via.total_ns == pytest.approx(direct.total_ns)


def test_a_psum_result_is_never_merged_away():
    s = Stream()
    a = s.tensor("sbuf", (128, 128), "bfloat16")
    b = s.tensor("sbuf", (128, 512), "bfloat16", site=2)
    acc = s.tensor("psum", (128, 512), site=3)
    out = s.tensor("sbuf", (128, 512), "bfloat16", site=4)
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("memset", "dve", [s.at(b)], [], value=1.0)
    s.emit("matmul", "pe", [s.at(acc)], [s.at(a), s.at(b)], acc=False)
    s.emit("ew", "dve", [s.at(out)], [s.at(acc)], fn="copy", site=4)
    steps, _, tl = s.timed()
    assert rewrites.merged_copies(steps) == {} and tl.counts["dve"] == 3


# -- through the NKI front end and the sandbox --------------------------------------------------------------------
def softmax_numerator(copy: bool) -> str:
    """exp of each [128, 2048] tile of x into bf16: directly, or into fp32 and then copied (Autocomp's step 3)."""
    into = "nl.float32" if copy else "nl.bfloat16"
    then = "e = nisa.tensor_copy(e, dtype=nl.bfloat16)" if copy else "pass"
    return f"""
        @nki.jit
        def solution(x):
            out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
            for i in nl.affine_range(4):
                t = nl.load(x[:, nl.ds(i * 2048, 2048)])
                e = nisa.activation(op=nl.exp, data=t, dtype={into})
                {then}
                nl.store(out[:, nl.ds(i * 2048, 2048)], e)
            return out
        """


@pytest.mark.system
def test_a_kernel_that_computes_in_fp32_and_copies_to_bf16_costs_what_writing_bf16_costs(tmp_path):
    kit = SimKit(tmp_path)
    p = kit.problem({"x": ((128, 8192), "float32")}, {"out": ((128, 8192), "bfloat16")},
                    "def reference(x):\n    return np.exp(x)\n", atol=2e-2, rtol=2e-2)
    direct, copied = (kit.evaluate(p, softmax_numerator(c)) for c in (False, True))
    ok(direct)
    ok(copied)
    assert copied.latency == pytest.approx(direct.latency)


def test_both_rewrites_stop_at_the_deadline():
    """Their work grows with what the kernel issued: each looks at the clock (deadline.py), like every stage."""
    s = Stream()
    x, y = s.tensor("sbuf", (128, 512)), s.tensor("sbuf", (128, 512), site=2)
    for _ in range(3):
        s.emit("memset", "dve", [s.at(x)], [], value=1.0)
        s.emit("ew", "dve", [s.at(y)], [s.at(x)], fn="copy", site=2)
    steps, _, _ = s.timed()
    past = time.monotonic() - 1
    with pytest.raises(TimeoutError, match="copies the compiler merges"):
        rewrites.merged_copies(steps, past)
    with pytest.raises(TimeoutError, match="PSUM zero-fills"):
        rewrites.elided_psum_zero_fills(steps, past)
