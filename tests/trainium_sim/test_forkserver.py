"""The tracing fork server: kernels traced in forked children are judged as freshly launched ones are, a
job that blocks without using CPU is killed at its wall-clock limit, and a server that dies or stops
answering costs one job a sandbox failure, never the evaluator."""
from __future__ import annotations

import os
import signal

import pytest

from tests.trainium_sim.simkit import SimKit, explain, ok
from tests.trainium_sim.test_hostile import GOOD, REACH_OS

pytestmark = pytest.mark.system

REFERENCE = "def reference(a):\n    return np.exp(a)\n"
SHAPES = ({"a": ((128, 64), "float32")}, {"out": ((128, 64), "float32")})


@pytest.fixture()
def kit(tmp_path):
    return SimKit(tmp_path)


def test_forked_and_freshly_launched_children_give_the_same_verdict(tmp_path):
    forked, launched = SimKit(tmp_path / "f"), SimKit(tmp_path / "l", fork_server=False)
    pf, pl = forked.problem(*SHAPES, REFERENCE), launched.problem(*SHAPES, REFERENCE)
    a, b = forked.evaluate(pf, GOOD), launched.evaluate(pl, GOOD)
    ok(a)
    ok(b)
    assert a.latency == b.latency and a.sandbox == b.sandbox
    bad = "@nki.jit\ndef solution(a):\n    return nl.load(a[0:200, :])\n"
    a, b = forked.evaluate(pf, bad), launched.evaluate(pl, bad)
    assert (a.correct, a.error_kind, a.error) == (b.correct, b.error_kind, b.error), explain(a)


def test_a_kernel_blocked_without_cpu_is_killed_at_its_wall_limit(kit):
    """A lock acquired twice waits in the kernel forever using no CPU: only the wall clock can stop it."""
    p = kit.problem(*SHAPES, REFERENCE)
    code = REACH_OS + "lock = OS['sys'].modules['_thread'].allocate_lock()\nlock.acquire()\nlock.acquire()\n" + GOOD
    r = kit.evaluate(p, code, time_limit_s=2)
    assert not r.correct and r.error_kind == "timeout" and "timed out after 2 s" in r.error, explain(r)
    ok(kit.evaluate(p, GOOD))


def test_a_killed_server_is_replaced(kit):
    p = kit.problem(*SHAPES, REFERENCE)
    ok(kit.evaluate(p, GOOD))
    server = kit.sim._tracing_server()
    first = server._proc.proc.pid
    os.kill(first, signal.SIGKILL)
    server._proc.proc.wait()
    ok(kit.evaluate(p, GOOD))
    assert server._proc.proc.pid != first


def test_a_server_that_stops_answering_fails_one_job_and_is_replaced(kit):
    p = kit.problem(*SHAPES, REFERENCE)
    ok(kit.evaluate(p, GOOD))
    server = kit.sim._tracing_server()
    server.grace_s = 0.5
    stuck = server._proc.proc.pid
    os.kill(stuck, signal.SIGSTOP)
    r = kit.evaluate(p, GOOD, time_limit_s=1)
    assert not r.correct and "tracing server stopped answering" in explain(r), explain(r)
    ok(kit.evaluate(p, GOOD))
    assert server._proc.proc.pid != stuck


def test_closing_the_target_stops_its_server(kit):
    p = kit.problem(*SHAPES, REFERENCE)
    ok(kit.evaluate(p, GOOD))
    server = kit.sim._tracing_server()
    proc, root = server._proc.proc, server.root
    kit.sim.close()
    assert proc.poll() is not None and not root.exists()


def test_a_finished_jobs_files_are_removed_and_its_directory_reused(kit):
    """Once the server reported a job's child ended and its files were read, the evaluator removes the files and
    gives the empty directory to the next job (removing the directory cost 1-4 ms on the evaluation's path):
    one empty job directory between evaluations, and none once the server closes. A directory whose child
    was never reported ended is never reused."""
    p = kit.problem(*SHAPES, REFERENCE)
    server = kit.sim._tracing_server()
    jobs = lambda: sorted(d.name for d in server.root.iterdir() if d.name.startswith("job"))  # noqa: E731
    ok(kit.evaluate(p, GOOD))
    first = jobs()
    assert len(first) == 1 and not list((server.root / first[0]).iterdir())
    for _ in range(3):
        ok(kit.evaluate(p, GOOD))
        assert jobs() == first and not list((server.root / first[0]).iterdir())
    unused = server.job_dir()
    (unused / "trace.bin").write_bytes(b"left")
    server.discard(unused)          # no child ran in it: removed, not reused
    assert server.job_dir() != unused
    ok(kit.evaluate(p, GOOD))
    assert unused.name not in jobs()
    root = server.root
    kit.sim.close()
    assert not root.exists()


def test_what_a_kernel_plants_in_the_front_end_is_gone_for_the_next_one(kit):
    """Every job runs in its own child, forked ahead from a server no kernel has touched: a kernel that traces
    nl.exp as a copy and marks the module leaves neither behind (each child takes one job only)."""
    p = kit.problem(*SHAPES, REFERENCE)
    r = kit.evaluate(p, "nl.exp = nl.copy\nnl.planted = True\n" + GOOD)
    assert not r.correct and r.error_kind == "wrong_result", explain(r)
    for _ in range(2):
        ok(kit.evaluate(p, "assert not hasattr(nl, 'planted')\n" + GOOD))
