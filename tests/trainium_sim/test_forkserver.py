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
    """A child reports when its files are written and the server replies then; the child ends while the
    evaluator reads them (tearing its memory down took 1-2 ms of every evaluation) and is reaped before the
    server reads the next request. So once the next reply came, the evaluator removes a job's files and gives
    the empty directory to a later job (removing the directory cost 1-4 ms on the evaluation's path): two
    directories take turns, and none is left once the server closes. A directory whose child was never
    reported ended is never reused."""
    p = kit.problem(*SHAPES, REFERENCE)
    server = kit.sim._tracing_server()
    jobs = lambda: sorted(d.name for d in server.root.iterdir() if d.name.startswith("job"))  # noqa: E731
    seen = set()
    for _ in range(5):
        ok(kit.evaluate(p, GOOD))
        seen.update(jobs())
        assert len(jobs()) <= 2
    assert len(seen) == 2
    emptied = [n for n in jobs() if not list((server.root / n).iterdir())]
    assert len(emptied) == 1                       # the older job's, ready for the next one
    unused = server.job_dir()
    (unused / "trace.bin").write_bytes(b"left")
    server.discard(unused)          # no child ran in it: removed, not reused
    assert server.job_dir() != unused
    ok(kit.evaluate(p, GOOD))
    assert unused.name not in jobs()
    root = server.root
    kit.sim.close()
    assert not root.exists()


def test_a_kernel_that_reports_itself_done_early_is_stopped_and_judged_on_what_it_wrote(kit):
    """The report is the child's, so a kernel can forge it (descriptor 5) before its stream is written: the server
    replies, the evaluator judges the empty stream, and the child is killed (the server reaps it before the
    next request, which is served as usual). Nothing it writes afterwards reaches a verdict."""
    p = kit.problem(*SHAPES, REFERENCE)
    forged = REACH_OS + "OS['write'](5, (0).to_bytes(4, 'little'))\nwhile True:\n    pass\n" + GOOD
    r = kit.evaluate(p, forged, time_limit_s=30)
    assert not r.correct and r.error_kind == "crash", explain(r)     # not "timeout": stopped at its report
    assert "ended without writing its instruction stream" in r.error, explain(r)
    ok(kit.evaluate(p, GOOD))
    half = REACH_OS + "OS['write'](5, b'\\x00\\x00')\n" + GOOD       # a report cut short: the exit decides
    ok(kit.evaluate(p, half))


def test_what_a_kernel_plants_in_the_front_end_is_gone_for_the_next_one(kit):
    """Every job runs in its own child, forked ahead from a server no kernel has touched: a kernel that traces
    nl.exp as a copy and marks the module leaves neither behind (each child takes one job only)."""
    p = kit.problem(*SHAPES, REFERENCE)
    r = kit.evaluate(p, "nl.exp = nl.copy\nnl.planted = True\n" + GOOD)
    assert not r.correct and r.error_kind == "wrong_result", explain(r)
    for _ in range(2):
        ok(kit.evaluate(p, "assert not hasattr(nl, 'planted')\n" + GOOD))
