"""The fast tier's guard (tests/conftest.py) refuses processes and sockets in tests not marked `system`."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import zmq


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"]),
    lambda: os.fork(),
    lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM),
    lambda: zmq.Context.instance().socket(zmq.DEALER),
], ids=["subprocess", "fork", "socket", "zmq"])
def test_a_fast_test_cannot_start_a_process_or_open_a_socket(start):
    with pytest.raises(AssertionError, match="a fast-tier test"):
        start()


@pytest.mark.system
def test_a_system_test_can():
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
