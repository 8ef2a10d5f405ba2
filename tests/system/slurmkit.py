"""A one-node Slurm cluster on this host, for the system tests: Debian's munged, slurmctld and slurmd, each in the
foreground, with a slurm.conf (this host's name, its CPU count from psutil, free ports), a fresh munge key and
every state, spool and log file in one temporary directory. Nothing of the host's own Slurm or munge setup is
read or changed; commands reach this cluster through SLURM_CONF in their environment."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "srun")
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])   # daemons live in sbin

CONF = """\
ClusterName=autocomptest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
# no cgroups (a container may not delegate them): processes tracked by parentage, tasks not bound to cores
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# a cancelled task that ignores SIGTERM is killed after 5 s, not Slurm's default 30
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def missing() -> str | None:
    """Why this host cannot run the cluster (a reason to skip), or None."""
    absent = [tool for tool in DAEMONS + CLIENTS if shutil.which(tool, path=SEARCH_PATH) is None]
    if absent:
        return (f"Slurm is not installed here (no {', '.join(absent)}): .ci/run installs Debian's slurmctld, "
                "slurmd and munge")
    if os.geteuid() != 0:
        return "slurmd starts job steps as their user only when it runs as root (.ci/run runs as root)"
    return None


def _die_with_parent() -> None:
    """In the daemon, before exec: SIGTERM when the test process dies, however it dies (no cluster left running)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)     # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]                    # SLURM_CONF: what a command needs to reach this cluster
    procs: list[subprocess.Popen] = field(default_factory=list)

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=60)

    def queue(self) -> list[str]:
        """Every job squeue lists (pending, running, completing): 'ID NAME STATE'."""
        return self.run("squeue", "--noheader", "--format", "%i %j %T").stdout.split("\n")[:-1]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out")))

    def clear(self, timeout: float = 60.0) -> None:
        """Cancel every job still queued and wait until none is: a test that failed midway may leave one behind,
        and the next test must not find it."""
        for line in self.queue():
            self.run("scancel", line.split()[0])
        _wait(lambda: not self.queue(), timeout, "the queue to empty", self)

    def stop(self) -> None:
        try:
            self.clear(timeout=15)
        except (RuntimeError, subprocess.SubprocessError):   # a cluster that never came up, or died: stop it anyway
            pass
        for proc in reversed(self.procs):  # slurmd, slurmctld, then munged, which they need to say goodbye
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def start(timeout: float = 60.0) -> Cluster:
    """Start munged, slurmctld and slurmd; return once the node is idle (or fail with their logs)."""
    root = Path(tempfile.mkdtemp(prefix="autocomp-slurm-"))
    root.chmod(0o755)                      # munged wants its socket's directory open to every user
    for name, mode in (("munge", 0o755), ("munge-key", 0o700), ("state", 0o700), ("spool", 0o755)):
        (root / name).mkdir(mode=mode)
        (root / name).chmod(mode)
    key = root / "munge-key" / "munge.key"
    key.write_bytes(secrets.token_bytes(128))
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text(CONF.format(host=host, root=root, cpus=psutil.cpu_count(logical=True) or 1,
                                ctld_port=_free_port(), slurmd_port=_free_port()))
    cluster = Cluster(root, {"SLURM_CONF": str(conf)})
    env = {**os.environ, **cluster.env, "PATH": SEARCH_PATH}
    commands = [["munged", "--foreground", f"--key-file={key}", f"--socket={root}/munge/socket",
                 f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/munged.log",
                 f"--seed-file={root}/munge/seed"],
                ["slurmctld", "-D", "-c", "-f", str(conf)],      # -c: no state from an earlier start
                ["slurmd", "-D", "-f", str(conf)]]
    try:
        for argv in commands:
            with open(root / f"{argv[0]}.out", "wb") as out:
                cluster.procs.append(subprocess.Popen([shutil.which(argv[0], path=SEARCH_PATH), *argv[1:]], env=env,
                                                      stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                      preexec_fn=_die_with_parent))
            if argv[0] == "munged":
                _wait(lambda: (root / "munge" / "socket").exists(), timeout, "munged's socket", cluster)
        _wait(lambda: cluster.run("sinfo", "--noheader", "--format", "%t").stdout.strip() == "idle", timeout,
              "the node to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait(pred, timeout: float, what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        dead = [p.args[0] for p in cluster.procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}:\n{cluster.logs()}")
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}:\n{cluster.logs()}")
