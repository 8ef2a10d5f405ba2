"""Coordinator memory under hostile messages sent before authentication.

A real Router runs in a child process (a fresh one per attack); an attacker
DEALER in this process connects over tcp 127.0.0.1 and sends one oversized
multipart message. Reported per attack: frames and bytes offered, the
coordinator's RSS before, at its peak, 1 s after the rejection, the growth
(peak - before) and the time from the first send until the coordinator
rejected the message or dropped the connection. Goal: growth <= 50 MiB for a
peer without the run secret.

Rows marked "knows secret" come from a peer that passes the connection gate
(bus/gate.py, when the code under test has one): they show what is left to a
holder of the run secret, whom the transport trusts.

    python bench/bench_bus_memory.py [--quick] [--root DIR] [--baseline DIR] [--json PATH]

--baseline runs every attack against another checkout too, for old-vs-new, e.g.
an export of the commit before the gate:
    mkdir /tmp/base && git archive 65c15ef bus protocols | tar -x -C /tmp/base
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import zmq

ROOT = Path(__file__).resolve().parents[1]
MB, MiB = 1000 * 1000, 1024 * 1024


def use_checkout(root):
    """Make the checkout at root importable whatever its layout, and give the prefix of its module names: one
    autocomp_zmq namespace (bound to that folder, whatever is installed), or the top-level packages of
    checkouts from before it. Runs here and, by its source, in the children."""
    import sys
    import types
    from pathlib import Path
    root = Path(root)
    sys.path.insert(0, str(root))
    if "autocomp_zmq" not in (root / "launch.py").read_text():
        return ""
    pkg = types.ModuleType("autocomp_zmq")
    pkg.__path__ = [str(root)]
    sys.modules["autocomp_zmq"] = pkg
    return "autocomp_zmq."


PRELUDE = inspect.getsource(use_checkout) + "import importlib, sys\nNS = use_checkout(sys.argv[1])\n"
# The child: a bare Router that reports each change of its rejection count on stdout.
CHILD = PRELUDE + r"""
import json, time
import structlog
structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout carries the reports
Router = importlib.import_module(NS + "bus.router").Router
BusTiming = importlib.import_module(NS + "bus.timing").BusTiming
router = Router(["tcp://127.0.0.1:*"], bytes.fromhex(sys.argv[2]), "bench", BusTiming(heartbeat_s=0.5))
print(json.dumps({"endpoint": router.endpoints[0]}), flush=True)
last = 0
while True:
    router.poll(0.01)
    n = sum(router.rejected.values())
    if n != last:
        last = n
        print(json.dumps({"rejected": n, "t": time.monotonic()}), flush=True)
"""


class Coordinator:
    """The Router child process, its RSS and its rejections."""

    def __init__(self, root: Path, key: bytes) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), key.hex()], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, cwd=root)
        self.endpoint = json.loads(self.proc.stdout.readline())["endpoint"]
        self.ps = psutil.Process(self.proc.pid)
        self.rejected_at: float | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if self.rejected_at is None and line.startswith('{"rejected"'):
                self.rejected_at = json.loads(line)["t"]

    def rss(self) -> int:
        return self.ps.memory_info().rss

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def attacker(endpoint: str, root_modules: dict, key: bytes | None) -> tuple[zmq.Socket, zmq.Socket]:
    """A DEALER (with the gate's credentials when key is given) and a monitor on its connection."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 0)
    if key is not None:
        root_modules["gate"].authenticate_client(sock, key)
    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                                      | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    sock.connect(endpoint)
    return sock, monitor


def run_attack(root: Path, modules: dict, frames: list, authenticated: bool, settle_s: float = 1.0) -> dict:
    key = secrets.token_bytes(32)
    coord = Coordinator(root, key)
    try:
        time.sleep(0.5)                                   # let the child finish importing and allocating
        before = min(coord.rss() for _ in range(5))
        peak = [before]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], coord.rss())
                time.sleep(0.005)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        sock, monitor = attacker(coord.endpoint, modules, key if authenticated else None)
        t0 = time.monotonic()
        for f in frames[:-1]:                 # zero-copy: the attacker need not hold a copy of its gigabyte
            sock.send(f, zmq.SNDMORE, copy=False)
        sock.send(frames[-1], copy=False)
        dropped_at = None
        deadline = t0 + 120
        while coord.rejected_at is None and dropped_at is None and time.monotonic() < deadline:
            if monitor.poll(10):
                monitor.recv_multipart()
                dropped_at = time.monotonic()
        ends = [t for t in (coord.rejected_at, dropped_at) if t is not None]
        time.sleep(settle_s)
        stop.set()
        sampler.join()
        after = coord.rss()
        # stop the monitor before closing either socket: libzmq's I/O thread sends monitor events
        # blocking, and would wait forever for a monitor socket closed while the connection shuts down
        sock.disable_monitor()
        monitor.close()
        sock.close()
        return {"before": before, "peak": peak[0], "after": after, "growth": peak[0] - before,
                "reject_s": (min(ends) - t0) if ends else None,
                "how": "rejected" if coord.rejected_at is not None and (dropped_at is None or coord.rejected_at <= dropped_at)
                else ("dropped" if dropped_at is not None else "timeout")}
    finally:
        coord.close()


def load(root: Path, with_gate: bool) -> dict:
    """The frame limit (and the gate, if any) of the checkout under test. The limit comes from a child
    so that a baseline checkout's modules never mix with this one's; only --root's gate is imported."""
    code = PRELUDE + ("import json, importlib.util as u; e = importlib.import_module(NS + 'protocols.envelope'); "
                      "print(json.dumps({'frame': e.MAX_FRAME_BYTES, 'protocol': e.PROTOCOL.decode(), "
                      "'gate': NS + 'bus.gate' if u.find_spec(NS + 'bus.gate') else None}))")
    info = json.loads(subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True,
                                     check=True, cwd=root).stdout)
    modules = {"frame": info["frame"], "protocol": info["protocol"].encode()}
    if info["gate"] and with_gate:       # this script imports nothing else of the product: --root's gate it is
        use_checkout(root)
        modules["gate"] = importlib.import_module(info["gate"])
    return modules


def attacks(frame_limit: int, scale: float, protocol: bytes) -> list[tuple[str, list]]:
    big = memoryview(bytes(50 * MB))
    under = memoryview(bytes(frame_limit - 4096))
    small = memoryview(bytes(4096))
    total = int(scale * 1024 * MiB)
    return [
        ("21 frames: 20 x 50 MB", [protocol, *[big] * max(1, int(20 * scale))]),
        ("frames just under MAXMSGSIZE", [protocol, *[under] * max(2, math.ceil(total / len(under)))]),
        ("one frame over MAXMSGSIZE", [protocol, b"s" * 32, b"h", bytes(frame_limit + MiB)]),
        ("many 4 KiB frames", [protocol, *[small] * int(total / len(small) * 0.75)]),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a quarter of the sizes")
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout under test (default: this one)")
    ap.add_argument("--baseline", type=Path, help="another checkout to run the same attacks against")
    ap.add_argument("--json", type=Path, help="write the rows here too")
    args = ap.parse_args()
    scale = 0.25 if args.quick else 1.0
    roots = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [("current", args.root.resolve())]
    for _, root in roots:
        if not (root / "bus" / "router.py").is_file():   # else the child would import this checkout instead
            ap.error(f"{root} is not a checkout (no bus/router.py)")
    rows = []
    for label, root in roots:
        modules = load(root, with_gate=label == "current")
        for name, frames in attacks(modules["frame"], scale, modules["protocol"]):
            for authenticated in ([False, True] if "gate" in modules else [False]):
                r = run_attack(root, modules, frames, authenticated)
                rows.append({"code": label, "attack": name, "peer": "knows secret" if authenticated else "no secret",
                             "frames": len(frames), "bytes": sum(len(f) for f in frames), **r})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    header = f"{'code':9} {'peer':13} {'attack':30} {'frames':>7} {'sent MB':>8} {'RSS before':>10} " \
             f"{'peak':>7} {'after':>7} {'growth':>7} {'reject s':>8}  how"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['code']:9} {r['peer']:13} {r['attack']:30} {r['frames']:>7} {r['bytes'] / MB:>8.0f} "
              f"{r['before'] / MiB:>10.0f} {r['peak'] / MiB:>7.0f} {r['after'] / MiB:>7.0f} {r['growth'] / MiB:>7.0f} "
              f"{'-' if r['reject_s'] is None else format(r['reject_s'], '.2f'):>8}  {r['how']}")
    print("RSS in MiB. 'how': rejected = the Router counted a rejection; dropped = the connection was closed "
          "(gate or MAXMSGSIZE) before the Router saw a message.")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
