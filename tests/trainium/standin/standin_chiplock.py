"""What the stand-in SDK's timing calls record for the tests: whether the chip's timing lock (the job's
chip_lock, which harness_common holds around the timed runs) was held while they timed. Copied into each
stand-in environment by tests/trainium/sdk.py."""
import fcntl
import os
import sys


def record_chip_lock():
    common = sys.modules.get("harness_common")
    lock = common.JOB.get("chip_lock") if common is not None else None
    if not lock:
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        common.RESULT["standin_chip_lock"] = "free"
    except OSError:
        common.RESULT["standin_chip_lock"] = "held"
    finally:
        os.close(fd)
