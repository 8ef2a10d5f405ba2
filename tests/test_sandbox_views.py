"""sandbox: the views a sandboxed program gets of the filesystem (a private root holding only its work directory and
the paths it is given, or Landlock where no mount namespace can be made), of device nodes (read-write, ioctls), of
/proc (its own PID namespace's, or none), and that no path leads from one running sandbox into another."""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from dataclasses import replace as dataclass_replace
from pathlib import Path

import pytest

from autocomp_zmq import sandbox
from autocomp_zmq.sandbox import Limits
from tests.test_sandbox import IS_ROOT, SH, out, run_probe, run_sh, static_probe, workdir  # noqa: F401

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]


# --------------------------------------------------------------------------- private filesystem view
PRIVATE = Limits(wall_s=10, cpu_s=10, private_fs=True, ro_paths=sandbox.toolchain_paths())


@pytest.fixture
def host_file(tmp_path_factory):
    """A file outside the work directory that any user could read."""
    d = tmp_path_factory.mktemp("host")
    f = d / "host-secret.txt"
    f.write_text("HOST-SECRET\n")
    for p in (d, *d.parents):
        if p == Path("/"):
            break
        try:
            p.chmod(p.stat().st_mode | 0o005)
        except PermissionError:
            break
    f.chmod(0o644)
    return f


@pytest.mark.parametrize("landlock", [False, True], ids=["mount-namespace", "landlock"])
def test_private_fs_shows_only_the_work_directory_and_the_toolchain(workdir, host_file, landlock):
    assert sandbox.run([SH, "-c", f"cat {host_file}"], workdir, Limits(wall_s=10)).ok   # readable without it
    limits = dataclass_replace(PRIVATE, force_landlock=landlock)
    (workdir / "mine.txt").write_text("mine\n")
    r = run_sh(workdir, f"cat mine.txt; echo made > new.txt; cat {host_file} /etc/passwd /proc/self/environ; "
                        f"ls /; gcc --version | head -1", limits)
    assert ("fs landlock" if landlock else "fs private") in r.notes, r.notes
    text = out(workdir) + out(workdir, "stderr.txt")
    assert "mine" in text and (workdir / "new.txt").read_text() == "made\n"
    assert "HOST-SECRET" not in text and "root:" not in text
    assert "gcc" in out(workdir)                      # the toolchain is there
    if not landlock:                                   # nothing else even exists
        listing = set(out(workdir).split())
        assert {"etc", "root", "home", "proc", "work"}.isdisjoint(listing), listing
        assert "No such file or directory" in out(workdir, "stderr.txt")


def test_private_fs_cannot_be_written_outside_the_work_directory(workdir):
    r = run_sh(workdir, "touch /usr/autocomp-probe /tmp-probe 2>&1; echo done", PRIVATE)
    assert r.ok and "done" in out(workdir)
    assert not Path("/usr/autocomp-probe").exists() and not Path("/tmp-probe").exists()


@pytest.mark.skipif(not IS_ROOT, reason="needs root to start the launcher as another user")
def test_private_fs_works_for_an_unprivileged_user(workdir, host_file):
    # Started by a normal user, the launcher builds the view inside a user namespace (or uses Landlock).
    launcher = workdir / "launcher"
    shutil.copy(sandbox.launcher_path(), launcher)
    sandbox.prepare_workdir(workdir, PRIVATE)
    cmd = [str(launcher), "--chdir", str(workdir), "--private-fs",
           *[a for p in PRIVATE.ro_paths for a in ("--ro", p)], "--fd", f"1:w:{workdir / 'stdout.txt'}",
           "--", SH, "-c", f"cat {host_file} 2>&1; echo end"]
    import subprocess

    def become_nobody():
        os.setgid(sandbox.NOBODY_UID)
        os.setuid(sandbox.NOBODY_UID)
    proc = subprocess.run(cmd, preexec_fn=become_nobody, env={}, capture_output=True, timeout=30, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert "HOST-SECRET" not in out(workdir) and "end" in out(workdir)


def test_private_fs_takes_any_number_of_read_only_paths(workdir, tmp_path):
    # a GPU host's view names dozens (the launcher once took at most 32 and refused the 33rd)
    dirs = []
    for i in range(60):
        d = tmp_path / f"ro{i}"
        d.mkdir()
        (d / "f").write_text(f"line {i}\n")
        d.chmod(0o755)
        (d / "f").chmod(0o644)
        dirs.append(str(d))
    limits = dataclass_replace(PRIVATE, ro_paths=(*PRIVATE.ro_paths, *dirs))
    r = run_sh(workdir, " ".join(f"cat {d}/f;" for d in dirs), limits)
    assert r.ok and "fs private" in r.notes, (r.notes, out(workdir, "stderr.txt"))
    assert out(workdir).splitlines() == [f"line {i}" for i in range(60)]


# --------------------------------------------------------------------------- read-write device nodes
@pytest.mark.parametrize("landlock", [False, True], ids=["mount-namespace", "landlock"])
def test_devices_open_read_write_and_take_ioctls(workdir, static_probe, landlock):
    # /dev/zero stands in for a GPU's node, which CUDA opens O_RDWR and drives by ioctl
    view = Limits(wall_s=10, cpu_s=5, private_fs=True, force_landlock=landlock)
    r = run_probe(workdir, static_probe, "dev", "/dev/zero", seccomp=False,
                  limits=dataclass_replace(view, devices=("/dev/zero",)))
    assert ("fs landlock" if landlock else "fs private") in r.notes, r.notes
    # opened read-write; the ioctl reached the driver (ENOTTY: not a terminal), Landlock did not refuse it
    assert r.ok and out(workdir) == f"started\nopen 0 ioctl {errno.ENOTTY}\n"
    r = run_probe(workdir, static_probe, "dev", "/dev/full", seccomp=False,
                  limits=dataclass_replace(view, devices=("/dev/zero",)))
    assert out(workdir) == f"started\nopen {errno.EACCES if landlock else errno.ENOENT} ioctl -1\n"   # only those named
    if landlock:    # why the field exists: a read-only path is read-only under Landlock, devices included
        r = run_probe(workdir, static_probe, "dev", "/dev/zero", seccomp=False,
                      limits=dataclass_replace(view, ro_paths=("/dev/zero",)))
        assert out(workdir) == f"started\nopen {errno.EACCES} ioctl -1\n"


# --------------------------------------------------------------------------- a private /proc
PRIVATE_PROC = dataclass_replace(PRIVATE, pid_ns=True, proc=True)


def test_private_proc_shows_the_sandbox_s_own_processes_only(workdir):
    r = run_sh(workdir, "ls /proc; echo --; grep ' /proc ' /proc/mounts; grep NSpid /proc/self/status; "
                        "head -1 /proc/cpuinfo; echo > /proc/self/comm", PRIVATE_PROC)
    assert "proc private" in r.notes or "proc private (without hidepid: the launcher is listed)" in r.notes, r.notes
    text = out(workdir)
    pids = {int(name) for name in text.split("--")[0].split() if name.isdigit()}
    assert pids and max(pids) < 50, pids                     # the shell, ls and friends in a fresh namespace
    assert "NSpid:\t" in text and len(text.split("NSpid:\t")[1].split("\n")[0].split()) == 1  # one level: its own
    mount = next(line for line in text.splitlines() if " /proc " in line).split()[3].split(",")
    assert {"ro", "nosuid", "nodev", "noexec"} <= set(mount)  # nothing to write, execute or open as a device
    assert "processor" in text                                # the kernel's files are there (CUDA reads some)
    assert "Read-only file system" in out(workdir, "stderr.txt")
    if IS_ROOT and "proc private" in r.notes:                 # hidepid: the reaper (root) is not even listed
        assert 1 not in pids


@pytest.mark.parametrize("why", ["no pid namespace", "landlock"])
def test_no_proc_where_none_can_show_only_the_sandbox(workdir, why):
    limits = dataclass_replace(PRIVATE_PROC, pid_ns=why != "no pid namespace", force_landlock=why == "landlock")
    r = run_sh(workdir, "ls /proc; cat /proc/self/status; echo end", limits)
    assert r.ok and any(n.startswith("proc none (") for n in r.notes), r.notes
    assert out(workdir) == "end\n"                            # an empty /proc, or none the program may read


@pytest.mark.skipif(not IS_ROOT, reason="needs root to prepare a mount namespace and become another user")
@pytest.mark.parametrize("host_proc", ["whole", "partly covered"])
def test_private_proc_for_an_unprivileged_user_shows_its_own_processes_or_none(workdir, host_proc):
    # Started by a normal user, the launcher mounts the /proc inside a user namespace, where the kernel allows
    # a new procfs only while a whole one is visible (not in many containers): else the program gets none.
    import ctypes
    import subprocess
    libc = ctypes.CDLL(None, use_errno=True)
    launcher = workdir / "launcher"
    shutil.copy(sandbox.launcher_path(), launcher)
    sandbox.prepare_workdir(workdir, PRIVATE)

    def cover_proc_and_become_nobody():
        if host_proc == "partly covered":   # CLONE_NEWNS; then MS_REC | MS_PRIVATE, so the host keeps its /proc
            if libc.unshare(0x20000) or libc.mount(None, b"/", None, 0x4000 | 0x40000, None) or \
                    libc.mount(b"none", b"/proc/sys", b"tmpfs", 0, None):
                raise OSError(ctypes.get_errno(), "cannot cover /proc/sys")
        os.setgid(sandbox.NOBODY_UID)
        os.setuid(sandbox.NOBODY_UID)
    cmd = [str(launcher), "--status", str(workdir / "status"), "--chdir", str(workdir), "--private-fs", "--pid-ns",
           "--proc", *[a for p in PRIVATE.ro_paths for a in ("--ro", p)], "--fd", f"1:w:{workdir / 'stdout.txt'}",
           "--", SH, "-c", "ls /proc; echo --; cat /proc/self/status; echo end"]
    proc = subprocess.run(cmd, preexec_fn=cover_proc_and_become_nobody, env={}, capture_output=True, timeout=30,
                          cwd=workdir)
    notes = (workdir / "status").read_text().splitlines()
    assert proc.returncode == 0, (proc.stderr, notes)
    text = out(workdir)
    if host_proc == "partly covered":
        assert any(n.startswith("proc none (") for n in notes) and text == "--\nend\n", notes
    elif any(n.startswith("proc private") for n in notes):
        pids = {int(name) for name in text.split("--")[0].split() if name.isdigit()}
        assert pids and max(pids) < 50 and "NSpid:" in text, text
    else:
        assert any(n.startswith("proc none (") for n in notes) and text == "--\nend\n", notes


# --------------------------------------------------------------------------- no path into another sandbox
# What a candidate tries against a sibling sandbox: find it through /proc (command lines, then its root, cwd and
# memory), or guess its directory's path; the sibling's directory holds a secret and must stay untouched.
ATTACK = r"""
m=SIBLING-MAR; m=${m}KER
for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in *"$m"*) echo "sees $p";; esac
  [ "$(readlink $p/cwd 2>/dev/null)" = "$PWD" ] && continue     # our own processes
  (exec 3<$p/mem) 2>/dev/null && echo "mem $p"
  cat $p/root$A/secret.txt 2>/dev/null
  echo B 2>/dev/null > $p/root$A/from-root && echo "wrote root $p"
  [ "$(readlink $p/cwd 2>/dev/null)" = "$A" ] && cat $p/cwd/secret.txt && echo B > $p/cwd/from-cwd && echo "wrote cwd"
done
ls -a "${A%/*}" "$A" 2>/dev/null
cat $A/secret.txt 2>/dev/null
echo B 2>/dev/null > $A/from-path && echo "wrote path"
echo end
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("view", ["host proc", "private proc", "landlock"])
def test_no_path_leads_into_another_running_sandbox(workdir, view):
    limits = {"host proc": dataclass_replace(PRIVATE, pid_ns=True, ro_paths=(*PRIVATE.ro_paths, "/proc")),
              "private proc": PRIVATE_PROC,
              "landlock": dataclass_replace(PRIVATE_PROC, force_landlock=True)}[view]
    limits = dataclass_replace(limits, wall_s=60, cpu_s=60)
    if view == "host proc" and not IS_ROOT:
        pytest.skip("both run as one user in sibling user namespaces, which already keeps them apart")
    if view == "host proc" and "hidepid" in next(line for line in Path("/proc/mounts").read_text().splitlines()
                                                 if line.split()[1] == "/proc"):
        pytest.skip("this host's /proc hides other users' processes")
    sibling = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    try:
        (sibling / "secret.txt").write_text("SIBLING-SECRET\n")
        sandbox.prepare_workdir(sibling, limits)
        other = sandbox.start([SH, "-c", "echo ready > ready; sleep 60; : SIBLING-MARKER"], sibling, limits)
        try:
            deadline = time.monotonic() + 20
            while not (sibling / "ready").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            before = sorted(p.name for p in sibling.iterdir())
            r = run_sh(workdir, f"A={os.path.realpath(sibling)}\n" + ATTACK, limits)
        finally:
            sandbox.kill_group(other.proc.pid)
            other.wait()
        text = out(workdir)
        assert r.ok and text.endswith("end\n"), (r.notes, out(workdir, "stderr.txt"))
        found = [line for line in text.splitlines() if line.split(" ")[0] in ("sees", "mem", "wrote")]
        if view == "host proc":   # the red team's finding, and proof that the attack above works where it can
            assert "SIBLING-SECRET" in text and any(line.startswith("wrote root") for line in found), text
            return
        assert ("proc private" if view == "private proc" else "fs landlock") in r.notes, r.notes
        assert not found and "SIBLING-SECRET" not in text and sibling.name not in text, text
        after = sorted(p.name for p in sibling.iterdir() if p.name not in ("stdout.txt", "stderr.txt"))
        assert after == [n for n in before if n not in ("stdout.txt", "stderr.txt")]
    finally:
        shutil.rmtree(sibling, ignore_errors=True)
