"""The engine capability model (capabilities.py, engines.toml) on hand-built instruction streams (fast tier: no
sandbox). The kernels are derived from the table and from the ways a tile can meet partitions, not from a list
of known tricks: every element-wise function on every engine, every instruction on every engine, every lane
pattern on every compute engine, reads and writes. The red team's three kernels close the file, written in NKI."""
from __future__ import annotations

import itertools
import textwrap

import pytest

from autocomp_zmq.hw_runners.trainium_sim import capabilities, ops
from autocomp_zmq.hw_runners.trainium_sim.program import StreamError
from tests.trainium_sim.simkit import SimKit, explain, ok
from tests.trainium_sim.test_costmodel import Stream

COMPUTE = ("act", "dve", "pool")
FUNCTIONS = sorted(set(ops.UNARY) | set(ops.BINARY))


def elementwise(fn: str, engine: str) -> Stream:
    s = Stream()
    a, b, out = (s.tensor("sbuf", (128, 64), site=2) for _ in range(3))
    s.emit("memset", "dve", [s.at(a)], [], value=0.5)
    s.emit("memset", "dve", [s.at(b)], [], value=0.25)
    srcs = [s.at(a)] if fn in ops.UNARY else [s.at(a), s.at(b)]
    s.emit("ew", engine, [s.at(out)], srcs, fn=fn)
    return s


@pytest.mark.parametrize("fn, engine", list(itertools.product(FUNCTIONS, COMPUTE)))
def test_every_function_runs_exactly_on_the_engines_the_table_gives_it(fn, engine):
    s = elementwise(fn, engine)
    if fn in capabilities.functions_of(engine):
        s.timed()
    else:
        with pytest.raises(StreamError, match=f"engine does not evaluate '{fn}'"):
            s.timed()


def test_activation_functions_belong_to_the_scalar_engine_alone():
    """The exploit: tanh evaluated by the Vector engine, where the Scalar engine alone evaluates it."""
    transcendental = {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "sqrt", "rsqrt", "sin", "erf", "softplus"}
    assert transcendental <= capabilities.functions_of("act")
    assert not transcendental & (capabilities.functions_of("dve") | capabilities.functions_of("pool"))


@pytest.mark.parametrize("op, engine", [(op, e) for op in capabilities.rules()["ops"]
                                        for e in ("pe", "act", "dve", "pool", "dma")
                                        if e not in capabilities.engines_for(op)])
def test_an_instruction_on_an_engine_the_table_does_not_give_it_is_refused(op, engine):
    s = Stream()
    a, out = s.tensor("sbuf", (128, 64), site=2), s.tensor("sbuf", (128, 64), site=3)
    s.emit("memset", "dve", [s.at(a)], [], value=1.0)
    s.instrs.append([op, engine, [s.at(out)], [s.at(a)], {"fn": "copy", "op": "add", "axes": [1]}, 1])
    with pytest.raises(StreamError, match="cannot run on the"):
        s.timed()


# How an operand's tile can meet the partitions of a (64, 128) SBUF tensor whose partition dimension is 0, in an
# instruction whose lanes walk the 64 partitions of its destination along tile axis 0 (encoded accesses: per
# tensor dimension an int, or [const, [[extent, tile rank, tile axis, coefficient], ...]]), and whether a compute
# engine may read it / write it.
LANES = {
    "aligned":               ([[0, [[64, 2, 0, 1]]], [0, [[32, 2, 1, 1]]]], (True, True)),
    # the partition index along the tile's second axis: a transposed view (the red team's tensor_copy of
    # m[i_f, nb * T + i_p], a whole transpose in one Vector instruction)
    "transposed":            ([[0, [[32, 2, 1, 1]]], [0, [[64, 2, 0, 1]]]], (False, False)),
    # one partition, a different element for each lane (the red team's nl.copy(m[b, i_p]))
    "one partition, spread": ([3, [0, [[64, 1, 0, 1]]]], (False, False)),
    # each lane its own offset in its partition: a diagonal
    "diagonal":              ([[0, [[64, 1, 0, 1]]], [0, [[64, 1, 0, 1]]]], (False, False)),
    # one partition read alike by every lane (broadcast_to along the partitions, AWS's fused mamba tutorial)
    "broadcast":             ([[2, [[64, 2, 0, 0]]], [0, [[32, 2, 1, 1]]]], (True, False)),
    "broadcast, one row":    ([2, [0, [[32, 2, 1, 1]]]], (True, False)),
}
SHAPES = {"one partition, spread": (64,), "diagonal": (64,)}


def lane_stream(name: str, engine: str, as_write: bool) -> Stream:
    s = Stream()
    t = s.tensor("sbuf", (64, 128), site=2)
    other = s.tensor("sbuf", (64, 32), site=3)
    s.emit("memset", "dve", [s.at(t)], [], value=1.0)
    s.emit("memset", "dve", [s.at(other)], [], value=2.0)
    probe = [t, LANES[name][0]]
    partner = s.at(other, (0, 64), 0) if SHAPES.get(name) == (64,) else s.at(other)
    if as_write:
        s.emit("ew", engine, [probe], [partner], fn="copy")
    else:
        s.emit("ew", engine, [partner], [probe], fn="copy")
    return s


@pytest.mark.parametrize("name, engine, as_write", list(itertools.product(LANES, COMPUTE, (False, True))))
def test_compute_engines_keep_to_their_partitions(name, engine, as_write):
    """Reads and writes on every compute engine: a tile that walks the partitions along the lanes is accepted,
    a one-partition broadcast as a read only, anything moving data between partitions is refused with the rule
    named."""
    allowed = LANES[name][1][1 if as_write else 0]
    s = lane_stream(name, engine, as_write)
    if allowed:
        s.timed()
    else:
        with pytest.raises(StreamError, match=r"engine capabilities, engines.toml \[lanes\]"):
            s.timed()


def test_a_one_partition_instruction_may_read_and_write_along_any_axis():
    """t[5, 0:32] = nl.exp(u[2, 0:32]): one lane, 32 elements of its partition (int indexing drops the axis)."""
    s = Stream()
    t, u = s.tensor("sbuf", (64, 128), site=2), s.tensor("sbuf", (64, 128), site=3)
    s.emit("memset", "dve", [s.at(u)], [], value=1.0)
    s.emit("ew", "act", [s.at(t, 5, (0, 32))], [s.at(u, 2, (0, 32))], fn="exp")
    s.timed()


def test_a_reduction_across_partitions_is_refused_whatever_its_attributes_say():
    s = Stream()
    t, r = s.tensor("sbuf", (64, 128), site=2), s.tensor("sbuf", (1, 128), site=3)
    s.emit("memset", "dve", [s.at(t)], [], value=1.0)
    s.emit("ew", "dve", [s.at(r, 0, (0, 64))], [s.at(t, (0, 64), 0)], fn="copy")     # column -> row
    with pytest.raises(StreamError, match=r"engines.toml \[lanes\]"):
        s.timed()


def test_dma_moves_data_across_partitions():
    s = Stream()
    t = s.tensor("sbuf", (64, 128), site=2)
    h = s.tensor("hbm", (64, 32))
    s.emit("memset", "dve", [s.at(t)], [], value=1.0)
    s.emit("dma", "dma", [s.at(h)], [[t, LANES["transposed"][0]]])
    s.timed()


# -- the red team's kernels, written in NKI and judged through the sandbox --------------------------------------
@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return SimKit(tmp_path_factory.mktemp("trn-capabilities"))


@pytest.mark.system
def test_tanh_on_the_vector_engine_through_a_private_helper_is_refused(kit):
    """12 tanh passes over 128x8192 were judged correct at 60.22 us on the Vector engine, where the Scalar engine
    alone needs 70.2 us: nl._compute("ew", "dve", ...) recorded tanh on an engine that cannot evaluate it."""
    p = kit.problem({"a": ((128, 512), "float32")}, {"out": ((128, 512), "float32")},
                    "def reference(a):\n    return np.tanh(a)\n")
    r = kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            x = nl.load(a)
            nl.store(out, nl._compute("ew", "dve", [x], {"fn": "tanh"}, None))
            return out
        """)
    assert r.error_kind == "compile" and "Vector engine does not evaluate 'tanh'" in r.error, explain(r)
    assert "it runs on the Scalar engine" in r.error


@pytest.mark.system
@pytest.mark.parametrize("body", [
    # one partition spread over 128 lanes, priced as a broadcast at 0 cycles
    """
    m = nl.load(a)
    res = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    for b in nl.affine_range(128):
        res[i_p, b] = nl.copy(m[b, i_p])
    nl.store(out, res)
    """,
    # a whole 128x128 transpose in one Vector instruction
    """
    m = nl.load(a)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(128)[None, :]
    nl.store(out, nisa.tensor_copy(m[i_f, i_p], engine=nisa.vector_engine))
    """,
], ids=["copy-from-one-partition", "vector-transpose"])
def test_moving_data_across_partitions_on_a_compute_engine_is_refused(kit, body):
    p = kit.problem({"a": ((128, 128), "float32")}, {"out": ((128, 128), "float32")},
                    "def reference(a):\n    return a.T.copy()\n")
    code = ("@nki.jit\ndef solution(a):\n    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n"
            + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n    return out\n")
    r = kit.evaluate(p, code)
    assert r.error_kind == "compile" and "engines.toml [lanes]" in r.error, explain(r)
    honest = kit.evaluate(p, """
        @nki.jit
        def solution(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.transpose(nl.load(a)))
            return out
        """)
    ok(honest)
