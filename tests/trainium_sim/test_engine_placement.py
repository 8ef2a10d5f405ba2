"""Copies whose engine the compiler picks (nisa.tensor_copy with its default engine, nl.copy): the cost model runs each
on the engine that finishes it first among those that may run it (hand-built streams in the fast tier; kernels through
the front end and the sandbox in the system tier)."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.trainium_sim.program import StreamError
from tests.trainium_sim.simkit import SimKit, ok
from tests.trainium_sim.test_costmodel import Stream


def busy_scalar_then_copy(copy_engines: list | None, src_buffer: str = "sbuf", dtype: str = "float32"):
    """A long exp on the Scalar engine, then an independent copy recorded on Scalar; `copy_engines`: the engines
    the stream says the compiler may place it on (None: the kernel named Scalar itself)."""
    s = Stream()
    x, e = s.tensor("sbuf", (128, 4096), site=2), s.tensor("sbuf", (128, 4096), site=3)
    src, dst = s.tensor(src_buffer, (128, 512), site=4), s.tensor("sbuf", (128, 512), dtype, site=5)
    s.emit("memset", "act", [s.at(x)], [], value=0.5)       # Scalar busy from the start to the exp's end
    s.emit("memset", "dve", [s.at(src)], [], value=0.25)
    s.emit("ew", "act", [s.at(e)], [s.at(x)], site=6, fn="exp")
    attrs = {"fn": "copy"} if copy_engines is None else {"fn": "copy", "engines": copy_engines}
    s.emit("ew", "act", [s.at(dst)], [s.at(src)], site=7, **attrs)
    return s.timed()


def engines_of_site(tl, site: int) -> set[str]:
    return {engine for (where, engine), ns in tl.site_ns.items() if where == site and ns}


def test_a_copy_the_compiler_places_runs_on_a_free_engine_beside_a_busy_one():
    _, _, named = busy_scalar_then_copy(None)
    _, _, placed = busy_scalar_then_copy(["act", "dve", "pool"])
    assert engines_of_site(named, 7) == {"act"}          # the kernel's own choice is kept
    assert engines_of_site(placed, 7) == {"dve"}         # the compiler's: Vector, free while Scalar runs the exp
    assert placed.total_ns < named.total_ns
    # the copy ran beside the exp: it adds nothing to the kernel's time, where on Scalar it came after the exp
    assert placed.total_ns < named.total_ns - 0.9 * named.site_ns[(7, "act")]


def test_a_psum_copy_is_never_placed_on_gpsimd():
    # GpSimd cannot reach PSUM (AWS's tensor_copy reference): with Vector left out, Scalar stays the only engine
    _, _, tl = busy_scalar_then_copy(["act", "pool"], src_buffer="psum")
    assert engines_of_site(tl, 7) == {"act"}
    _, _, tl = busy_scalar_then_copy(["act", "dve", "pool"], src_buffer="psum")
    assert engines_of_site(tl, 7) == {"dve"}


def test_with_every_engine_idle_a_placed_copy_stays_on_its_recorded_engine():
    s = Stream()
    a, b = s.tensor("sbuf", (128, 512), site=2), s.tensor("sbuf", (128, 512), site=3)
    s.emit("memset", "pool", [s.at(a)], [], value=1.0)
    s.emit("ew", "act", [s.at(b)], [s.at(a)], site=4, fn="copy", engines=["act", "dve"])
    _, _, tl = s.timed()
    assert engines_of_site(tl, 4) == {"act"}


@pytest.mark.parametrize("engines", [["dve"], ["act", "gpu"], "act", ["act"] * 9])
def test_a_malformed_engine_choice_is_refused(engines):
    # the recorded engine must be among the choices, each a NeuronCore engine, the list of bounded size
    s = Stream()
    a, b = s.tensor("sbuf", (128, 64), site=2), s.tensor("sbuf", (128, 64), site=3)
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.emit("ew", "act", [s.at(b)], [s.at(a)], fn="copy", engines=engines)
    with pytest.raises(StreamError, match="malformed engine choice"):
        s.timed()


def test_an_engine_the_instruction_may_not_use_is_never_chosen():
    # exp is the Scalar engine's alone (engines.toml): naming Vector as a choice does not move it there
    s = Stream()
    x, e = s.tensor("sbuf", (128, 4096), site=2), s.tensor("sbuf", (128, 4096), site=3)
    y, f = s.tensor("sbuf", (128, 512), site=4), s.tensor("sbuf", (128, 512), site=5)
    s.emit("memset", "dve", [s.at(x)], [], value=0.5)
    s.emit("memset", "dve", [s.at(y)], [], value=0.5)
    s.emit("ew", "act", [s.at(e)], [s.at(x)], site=6, fn="exp")
    s.emit("ew", "act", [s.at(f)], [s.at(y)], site=7, fn="exp", engines=["act", "dve", "pool"])
    _, _, tl = s.timed()
    assert engines_of_site(tl, 7) == {"act"}


# -- through the NKI front end and the sandbox --------------------------------------------------------------------
@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-placement"))


BUSY = {  # eight dependent passes over a on one engine, and what they compute
    "Scalar": ("e = nisa.activation(op=nl.tanh, data=e)", "for _ in range(8):\n        a = np.tanh(a)\n"),
    "Vector": ("e = nisa.tensor_scalar(data=e, op0=nl.multiply, operand0=0.5, engine=nisa.vector_engine)",
               "a = a * 0.5 ** 8\n"),
}
ON = {"Scalar": "nisa.activation(op=nl.copy, data=t)", "Vector": "nisa.tensor_copy(t, engine=nisa.vector_engine)"}


def busy_then_copy(busy: str, copy: str) -> str:
    """Eight dependent passes on the `busy` engine, and 16 PSUM tiles copied to SBUF beside them by `copy`."""
    return f"""
        @nki.jit
        def solution(a, b):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            out2 = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.shared_hbm)
            e = nl.load(a)
            x = nl.load(b)
            for j in range(8):
                {BUSY[busy][0]}
            nl.store(out, e)
            for i in nl.affine_range(16):
                t = nisa.nc_transpose(x[:, nl.ds(i * 128, 128)])
                nl.store(out2[:, nl.ds(i * 128, 128)], {copy})
            return out, out2
        """


@pytest.mark.system
@pytest.mark.parametrize("copy, busy, free", [("nl.copy(t)", "Scalar", "Vector"),   # nl.copy: Scalar when idle
                                              ("nisa.tensor_copy(t)", "Vector", "Scalar")])
def test_a_copy_left_to_the_compiler_goes_to_the_engine_that_is_not_busy(kit, copy, busy, free):
    p = kit.problem({"a": ((128, 2048), "float32"), "b": ((128, 2048), "float32")},
                    {"out": ((128, 2048), "float32"), "out2": ((128, 2048), "float32")},
                    "def reference(a, b):\n    " + BUSY[busy][1] +
                    "    return a, np.concatenate([b[:, i * 128:(i + 1) * 128].T for i in range(16)], 1)\n")
    placed, pinned = (kit.evaluate(p, busy_then_copy(busy, c)) for c in (copy, ON[busy]))
    ok(placed)
    ok(pinned)
    counts = {r.feedback_text.split("instructions:")[1].split("\n")[0]: r for r in (placed, pinned)}
    placed_counts, pinned_counts = counts
    assert free in placed_counts and free not in pinned_counts, counts
    assert placed.latency <= pinned.latency
