"""Build trusted helper binaries once per machine and reuse them.

Outputs are keyed by the hash of their sources, the compiler's version and the
flags, so editing a source or switching compilers rebuilds automatically.
Concurrent evaluators on one host serialize on a lock file; a build is written
to a temporary name and renamed into place so nobody sees half a file.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path


class BuildError(RuntimeError):
    """A trusted helper failed to build: the host toolchain is missing or broken."""


def cache_root() -> Path:
    base = os.environ.get("AUTOCOMP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "autocomp-zmq")
    return Path(base)


@functools.cache
def compiler_version(cc: str = "gcc") -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"C compiler {cc!r} not usable: {exc}") from exc
    return out.stdout.splitlines()[0]


def cached_build(name: str, sources: Sequence[Path], flags: Sequence[str],
                 build: Callable[[Path], None]) -> Path:
    """Return the path of `name` built by `build(tmp_output_path)`; build if missing."""
    digest = hashlib.sha256()
    digest.update(compiler_version().encode())
    digest.update("\0".join(flags).encode())
    for src in sorted(sources):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    out_dir = cache_root() / f"{name}-{digest.hexdigest()[:16]}"
    out = out_dir / name
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            tmp = out_dir / f".{name}.{os.getpid()}.tmp"
            build(tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, out)
    return out


def run_build(cmd: Sequence[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise BuildError(f"build failed: {' '.join(cmd)}\n{proc.stderr[-4000:]}")
