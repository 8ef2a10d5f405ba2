"""Install a seccomp allowlist from inside a Python process, once its imports are done.

After this, the process can compute, allocate memory, and read and write the descriptors it already
holds; every other system call (open, socket, fork/clone, execve, kill, ...) fails with EPERM, so
Python raises a clean error that names what the kernel tried. A call made through another
architecture's ABI kills the process. Used by the trainium-sim child (child.py); pure ctypes, so it
needs no compiler in the sandbox.
"""
from __future__ import annotations

import ctypes
import platform

_ALLOWED = ("read", "write", "readv", "writev", "pread64", "pwrite64", "lseek", "close", "fstat", "newfstatat",
            "mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "exit", "exit_group", "rt_sigreturn",
            "rt_sigprocmask", "rt_sigaction", "sigaltstack", "clock_gettime", "gettimeofday", "getpid", "gettid",
            "futex", "sched_yield", "getrandom", "getrusage", "fcntl")
# system call numbers and audit architecture of the ABIs these filters know
_NR = {
    "x86_64": (0xC000003E, dict(read=0, write=1, close=3, fstat=5, lseek=8, mmap=9, mprotect=10, munmap=11, brk=12,
                                rt_sigaction=13, rt_sigprocmask=14, rt_sigreturn=15, pread64=17, pwrite64=18,
                                readv=19, writev=20, sched_yield=24, mremap=25, madvise=28, getpid=39, exit=60,
                                fcntl=72, gettimeofday=96, getrusage=98, sigaltstack=131, gettid=186, futex=202,
                                clock_gettime=228, exit_group=231, newfstatat=262, getrandom=318)),
    "aarch64": (0xC00000B7, dict(fcntl=25, close=57, lseek=62, read=63, write=64, readv=65, writev=66, pread64=67,
                                 pwrite64=68, newfstatat=79, fstat=80, exit=93, exit_group=94, futex=98,
                                 clock_gettime=113, sched_yield=124, sigaltstack=132, rt_sigaction=134,
                                 rt_sigprocmask=135, rt_sigreturn=139, getrusage=165, gettimeofday=169, getpid=172,
                                 gettid=178, brk=214, munmap=215, mremap=216, mmap=222, mprotect=226, madvise=233,
                                 getrandom=278)),
}
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_KILL_PROCESS, _ERRNO, _ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_EPERM = 1


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) statements for an architecture ('x86_64' or 'aarch64')."""
    arch, nr = _NR[machine]
    prog = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL_PROCESS), (_LD_ABS, 0, 0, 0)]
    if machine == "x86_64":   # x32 ABI: same audit arch, numbers offset by 0x40000000
        prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _KILL_PROCESS)]
    for name in _ALLOWED:
        prog += [(_JEQ, 0, 1, nr[name]), (_RET, 0, 0, _ALLOW)]
    prog.append((_RET, 0, 0, _ERRNO | _EPERM))
    return prog


_built: tuple | None = None


def prepare() -> None:
    """Build the filter and look up prctl now, so that install() only applies it: the fork server prepares
    once before it forks (~1 ms a job less), and its children inherit the same filter, never modified."""
    global _built
    if _built is not None:
        return
    machine = platform.machine()
    if machine not in _NR:
        _built = (machine, None, None, None)
        return
    statements = program(machine)
    insns = (_Insn * len(statements))(*[_Insn(*s) for s in statements])
    _built = (machine, insns, _Prog(len(statements), insns), ctypes.CDLL(None, use_errno=True))


def install() -> str:
    """Apply the filter to this process (irreversible); returns a note for the sandbox log."""
    prepare()
    machine, _insns, prog, libc = _built
    if prog is None:
        return f"seccomp unavailable on {machine}"
    if libc.prctl(38, 1, 0, 0, 0) != 0:                                   # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:                 # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    return "seccomp python-child"
