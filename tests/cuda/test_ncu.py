"""Nsight Compute's CSV (`ncu --csv --page raw`), read without a GPU: the busiest kernel's occupancy, registers,
shared memory, throughput and top warp-stall reasons, after the profiler's own log lines."""
from __future__ import annotations

from autocomp_zmq.hw_runners.cuda.ncu import STALL_METRIC, command, describe_failure, parse

COLS = ["gpu__time_duration.sum", "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
        "launch__shared_mem_per_block_dynamic", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        STALL_METRIC.format("long_scoreboard"), STALL_METRIC.format("barrier"), STALL_METRIC.format("wait")]
CSV = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.11)",
    "==PROF== Profiling \"softmax_row\" - 0: 0%....50%....100% - 9 passes",
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",' + ",".join(f'"{c}"' for c in COLS),
    '"","","","","","","","usecond","%","register/thread","byte","%","","",""',
    '"0","4242","python3.11","h","elementwise_kernel","1","7","3.10","45.2","16","0","80.1","0.5","0.1","2.0"',
    '"1","4242","python3.11","h","softmax_row","1","7","1,234.50","61.7","40","32768","91.3","12.25","3.5","0.75"',
])


def test_the_busiest_kernel_and_its_top_stalls():
    m = parse(CSV)
    assert m["kernel"] == "softmax_row" and m["kernels"] == 2
    assert m["duration"] == "1234.5 usecond" and m["achieved occupancy %"] == "61.7"
    assert m["registers/thread"] == "40 register/thread" and m["dynamic smem/block"] == "32768 byte"
    assert m["DRAM throughput %"] == "91.3"
    assert m["top stalls (cycles/instruction)"] == "long scoreboard 12.2, barrier 3.5, wait 0.8"


def test_no_kernels_and_why():
    assert parse("==PROF== No kernels were profiled.\n") == {}
    assert "performance counters" in describe_failure("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    argv = command("/usr/bin/ncu", "/venv/bin/python", "profile_run.py", "job.json")
    assert argv[:4] == ["/usr/bin/ncu", "--csv", "--page", "raw"] and argv[-3:] == ["/venv/bin/python",
                                                                                  "profile_run.py", "job.json"]


def test_ncu_is_not_tried_where_the_driver_refuses_ordinary_users(tmp_path):
    from autocomp_zmq import sandbox
    from autocomp_zmq.hw_runners.cuda import ncu
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    assert "RmProfilingAdminOnly: 1" in ncu.refused_to(sandbox.Limits(drop_root=True), str(params), euid=0)
    assert ncu.refused_to(sandbox.Limits(drop_root=False), str(params), euid=0) is None
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert ncu.refused_to(sandbox.Limits(drop_root=True), str(params), euid=0) is None
