"""Problems beyond the benchmark list: parametric names and their limits on both simulators, what the
offline heuristic says it cannot optimize, and a problem definition on the wire (old messages still
decode, built-in problems keep their evaluation ids). Fast tier: no process is started."""
from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from autocomp_zmq.agents.workers.heuristic import unsupported
from autocomp_zmq.agents.engine.policy import code_hash, content_id, eval_job
from autocomp_zmq.agents.run.problemsource import wire
from autocomp_zmq.agents.engine.search import BeamSearch, BeamConfig
from autocomp_zmq.hw_runners.base import ProblemSizeError, UnknownProblemError, target_class
from autocomp_zmq.hw_runners.problemfile import read
from autocomp_zmq.protocols.envelope import decode, encode
from autocomp_zmq.protocols.jobs import EvalReport, EvalRequest, MenuOption, ProblemRef, ProblemDefinition

EXAMPLES = Path(__file__).resolve().parents[2] / "problems" / "examples"


def bare(name: str):
    """A target without its constructor (which probes the compiler): names need only its descriptor."""
    return object.__new__(target_class(name))


@pytest.mark.parametrize("name, dims, kernels", [
    ("gemm-100x100x100", {"I": 100, "J": 100, "K": 100}, ["naive", "baseline"]),
    ("gemm-1x1x1", {"I": 1, "J": 1, "K": 1}, ["naive", "baseline"]),
    ("gemm-48x80x16", {"I": 48, "J": 80, "K": 16}, ["naive", "baseline", "hwloop"]),
    ("gemm-32x64x128", {"I": 32, "J": 64, "K": 128}, ["naive", "baseline", "tuned", "hwloop"]),
    ("conv3x3-7-20", {"P": 7, "C": 20}, ["naive", "baseline", "hwloop"]),
    ("conv3x3-9-64", {"P": 9, "C": 64}, ["naive", "baseline", "tuned", "hwloop"]),
])
def test_gemmini_parametric_names_offer_the_kernels_that_handle_their_sizes(name, dims, kernels):
    p = bare("gemmini-sim").problem(name, "fine")
    assert (p.name, p.dims, list(p.kernels), p.isa) == (name, dims, kernels, "fine")
    assert f"Sizes: {', '.join(f'{k}={v}' for k, v in dims.items())}." in p.description


@pytest.mark.parametrize("name, message", [
    ("gemm-0x4x4", "gemm-0x4x4: I, J, K must each be at least 1"),
    ("gemm-20000x1024x1024", "gemm-20000x1024x1024: A would hold 20,480,000 elements; at most 16,777,216 per array"),
    ("gemm-4096x4096x1024", "gemm-4096x4096x1024: these sizes take 4,194,304 16x16x16 tile products; at most "
                            "1,048,576 keep an evaluation under about 15 s"),
    ("conv3x3-100-256", "conv3x3-100-256: these sizes take"),
    ("rmsnorm-100x512", "rmsnorm-100x512: trainium-sim's rmsnorm kernels need M a multiple of 128, M <= 8192, "
                        "N <= 7168"),
    ("gemm-128x500x128", "gemm-128x500x128: trainium-sim's gemm kernels need M a multiple of 128, N a multiple of 512"),
    ("layernorm-128x9000", "layernorm-128x9000: trainium-sim's layernorm kernels need"),
    ("transpose-512x512x512", "transpose-512x512x512: trainium-sim's transpose kernels need B a multiple of 128, "
                              "N a multiple of 128, D0 * B * N <= 33,554,432"),
])
def test_sizes_a_target_cannot_handle_say_what_it_needs(name, message):
    target = "trainium-sim" if name.startswith(("rmsnorm", "layernorm", "transpose")) or name == "gemm-128x500x128" else \
        "gemmini-sim"
    with pytest.raises(ProblemSizeError) as err:
        bare(target).problem(name)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_names_that_follow_no_pattern_are_unknown_and_listed_names_are_unchanged():
    for target, name in (("gemmini-sim", "gemm-010x16x16"), ("gemmini-sim", "gemm-16x16"),
                         ("trainium-sim", "rmsnorm-0128x512")):
        with pytest.raises(UnknownProblemError, match="; or any "):
            bare(target).problem(name)
    trn = bare("trainium-sim")
    assert trn.name_patterns() == ["gemm-MxNxK", "layernorm-MxN", "rmsnorm-MxN", "transpose-D0xBxN"]
    assert trn.problem("gemm-1024").semantics is None and trn.problem("rmsnorm").dims == {"M": 512, "N": 4096}
    p = trn.problem("layernorm-128x1024")
    assert list(p.kernels) == ["naive", "naive_nki2"]    # the tuned kernels prefetch a second row tile
    assert p.semantics.inputs[0].shape == (128, 1024) and p.semantics.flops == 7 * 128 * 1024
    assert list(trn.problem("layernorm-256x1024").kernels) == ["naive", "tuned", "naive_nki2", "tuned_nki2"]
    g = trn.problem("gemm-256x1024x512")
    assert g.dims == {"M": 256, "N": 1024, "K": 512} and [t.shape for t in g.semantics.inputs] == [(512, 256),
                                                                                                  (512, 1024)]


def wire_of(target: str, name: str) -> ProblemRef:
    t = bare(target)
    return wire(t.problem(name), t.info().latency_unit, None)


@pytest.mark.parametrize("target, name, why", [
    ("gemmini-sim", "gemm-256x256x256", None),
    ("gemmini-sim", "conv3x3-7-64", None),
    ("gemmini-sim", "gemm-100x100x100", None),     # edge tiles: any size
    ("gemmini-sim", "conv3x3-7-20", None),         # tiled_conv_auto takes any C
    ("trainium-sim", "rmsnorm-384x2048", None),
    ("trainium-sim", "gemm-256x1024x512", None),
])
def test_the_heuristic_says_up_front_what_it_cannot_optimize(target, name, why):
    got = unsupported(wire_of(target, name))
    assert got == why if why is None else got.startswith(why)


def test_under_the_fine_isa_a_conv_of_odd_channels_has_no_offline_moves():
    p = msgspec.structs.replace(wire_of("gemmini-sim", "conv3x3-7-20"), isa="fine")
    assert unsupported(p).startswith("its CPU-issued conv schedules need C to be a multiple of 16")
    assert unsupported(msgspec.structs.replace(wire_of("gemmini-sim", "gemm-100x100x100"), isa="fine")) is None


def test_a_problem_file_without_a_family_has_no_offline_moves():
    g = bare("gemmini-sim")
    p = wire(g.problem_from_definition(read(EXAMPLES / "gemmini-sim" / "my_gemm.toml")), "cycles", None)
    assert unsupported(p) is None
    own = msgspec.structs.replace(p, family="own:my-gemm")
    assert unsupported(own) == "the heuristic knows the gemmini-sim gemm and conv3x3 families; my-gemm declares no family"


def test_a_trainium_problem_of_no_known_family_is_refused_up_front():
    p = wire(bare("trainium-sim").problem_from_definition(read(EXAMPLES / "trainium-sim" / "my_rmsnorm.toml")),
             "us", None)
    assert unsupported(p) is None
    own = msgspec.structs.replace(p, family="own:my-rmsnorm")
    assert unsupported(own).startswith("the heuristic cannot optimize my-rmsnorm (family 'own:my-rmsnorm'; it knows "
                                       "attention, conv1d, conv2d, csa, cumsum, gemm, ")


def test_a_definition_travels_on_the_wire_and_old_messages_decode():
    p = wire(bare("trainium-sim").problem_from_definition(read(EXAMPLES / "trainium-sim" / "my_rmsnorm.toml")),
             "us", None)
    req = EvalRequest(problem=p, code="x", seed=1)
    back = decode(encode(req), EvalRequest)
    assert back.problem.definition == p.definition and back.problem.definition.digest == p.definition.digest
    old = {"problem": {"target": "gemmini-sim", "name": "gemm-256x256x256", "family": "gemm"}, "code": "x", "seed": 1}
    assert decode(encode(old), EvalRequest).problem.definition is None
    assert msgspec.convert(msgspec.to_builtins(p), ProblemRef) == p        # the run store's JSON round trip


def test_evaluation_ids_include_a_definition_and_keep_built_in_ids():
    built_in = ProblemRef(target="gemmini-sim", name="gemm-256x256x256", family="gemm")
    jid, _ = eval_job(built_in, "code", 3)
    assert jid == content_id("eval", "gemmini-sim", "gemm-256x256x256", code_hash("code"), 3)   # as before
    one = ProblemDefinition(path="a.toml", files={"a.toml": "name = 'a'"})
    other = ProblemDefinition(path="a.toml", files={"a.toml": "name = 'a' "})
    ids = {eval_job(msgspec.structs.replace(built_in, definition=d), "code", 3)[0] for d in (one, other)}
    assert len(ids) == 2 and jid not in ids and one.digest != other.digest


def test_a_search_halted_before_it_starts_evaluates_only_the_starting_kernel():
    search = BeamSearch(BeamConfig(iterations=3, beam=1, plans=1, codes=1), ProblemRef(target="t", name="p",
                        family="own:p"), "start", [MenuOption(id="o", title="O")])
    search.halt("no offline moves for this problem; use --model (it is mine)")
    search.start()
    [job] = search.next_jobs()
    assert job.kind == "eval" and not search.done
    search.on_result(job.id, True, EvalReport(correct=True, latency=100.0), None)
    assert search.done and search.next_jobs() == []
    s = search.summary()
    assert s.stop_reason == "no offline moves for this problem; use --model (it is mine)" and s.speedup == 1.0
