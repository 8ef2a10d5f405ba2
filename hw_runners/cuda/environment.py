"""Where the cuda target's children run: the Python with PyTorch (probed once), what a host lacks, the children's
environment, and their sandbox: a private filesystem view holding the Python, the compilers load_inline needs, the
dynamic linker's cache, /sys (read-only), the work directory, a /proc of the child's own PID namespace (never the
host's: its /proc/<pid>/root would lead into other sandboxes), and of /dev only the claimed GPU's nodes (read-write)
and a few read-only ones."""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autocomp_zmq import sandbox
from autocomp_zmq.hw_runners.cuda.gpu import Gpu, device_nodes, host_gpus

PROBE = ("import json, os, site, sys\n"
         "out = {'python': sys.executable, 'prefix': sys.prefix, 'base_prefix': sys.base_prefix,\n"
         "       'site': site.getsitepackages()}\n"
         "try:\n"
         "    import torch\n"
         "    out.update(torch=torch.__version__, torch_cuda=torch.version.cuda, torch_dir=os.path.dirname(torch.__file__),\n"
         "               cuda_available=bool(os.environ.get('AUTOCOMP_PROBE_CUDA')) and torch.cuda.is_available())\n"
         "except Exception as exc:\n"
         "    out['torch_error'] = '%s: %s' % (type(exc).__name__, exc)\n"
         "try:\n"
         "    import triton\n"
         "    out.update(triton=triton.__version__, triton_dir=os.path.dirname(triton.__file__))\n"
         "except Exception as exc:\n"
         "    out['triton_error'] = '%s: %s' % (type(exc).__name__, exc)\n"
         "print(json.dumps(out))\n")
INSTALL_HINT = ("install the target's extra in the evaluator's environment (`pip install -e '.[cuda]'`: PyTorch with "
                "CUDA and Triton), or point AUTOCOMP_TORCH_PYTHON (target option python) at a Python that has them")


def own_python() -> str:
    return sys.executable


@functools.cache
def probe(python: str, cuda: bool = False) -> dict:
    """What `python` has: torch (version, CUDA build, whether it sees a GPU when `cuda`), triton, its prefixes."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    if cuda:
        env["AUTOCOMP_PROBE_CUDA"] = "1"
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        return {"torch_error": f"{python} could not be run: {exc}"}


def unmet(python: str, device: str) -> list[str]:
    """What stops every evaluation on this host, one phrase each (empty: nothing)."""
    facts = probe(python)
    if "torch_error" in facts:
        return [f"PyTorch in {python} ({facts['torch_error']}): {INSTALL_HINT}"]
    if device == "cpu":
        return []
    missing = []
    if not host_gpus():
        missing.append("an NVIDIA GPU: nvidia-smi lists none (no GPU or no driver; without one, use "
                       "--target-option device=cpu only to check kernels' correctness, or run on a GPU host)")
    elif not facts.get("torch_cuda"):
        missing.append(f"a CUDA build of PyTorch ({python} has torch {facts.get('torch')}, a CPU-only build)")
    elif not probe(python, cuda=True).get("cuda_available"):
        missing.append(f"a GPU PyTorch can use (torch {facts.get('torch')} built for CUDA {facts.get('torch_cuda')} "
                       "sees none: check the driver version)")
    if "triton_error" in facts:
        missing.append(f"Triton in {python} ({facts['triton_error']})")
    return missing


def _cuda_home() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    nvcc = shutil.which("nvcc")
    return home or (str(Path(os.path.realpath(nvcc)).parent.parent) if nvcc else None)


def child_env(work: Path, python: str, gpu_uuid: str | None, device: str) -> dict[str, str]:
    """Only what the child needs: the compilers on PATH, the GPU (by UUID: unambiguous whatever order CUDA lists
    devices in), private caches for inline CUDA and Triton, and a private HOME and TMPDIR."""
    cuda = _cuda_home()
    path = [os.path.dirname(python)] + ([os.path.join(cuda, "bin")] if cuda else []) + ["/usr/local/bin", "/usr/bin",
                                                                                      "/bin"]
    env = {"PATH": ":".join(dict.fromkeys(path)), "HOME": str(work), "TMPDIR": str(work / "tmp"),
           "TORCH_EXTENSIONS_DIR": str(work / "torch_extensions"), "TRITON_CACHE_DIR": str(work / "triton"),
           "PYTHONDONTWRITEBYTECODE": "1", "MAX_JOBS": str(os.cpu_count() or 4)}
    if cuda:
        env["CUDA_HOME"] = cuda
    if gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
    # the evaluator interleaves the reference's and the candidate's runs: an OpenMP pool that spins after its work
    # would take the cores the other child's run needs next
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"          # Triton kernels run on the CPU tensors, in Triton's interpreter
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["OMP_NUM_THREADS"] = "1"           # a functional check: one thread times steadily on a shared machine
    return env


def read_only_paths(python: str) -> tuple[str, ...]:
    """The paths a child may read: the Python's prefixes and site directories, the compilers, the dynamic linker's
    cache and alternatives, /sys and /dev's zero and random nodes. Not /proc (the sandbox mounts one of the child's
    own) nor the GPU's nodes (limits() grants them read-write)."""
    facts = probe(python)
    pythons = [facts.get("prefix"), facts.get("base_prefix"), *facts.get("site", []), facts.get("torch_dir"),
               facts.get("triton_dir"), os.path.dirname(os.path.realpath(python)), _cuda_home()]
    # the Python's trees where they really are (a venv's links point there); the toolchain's as they are named
    # (the launcher recreates merged-/usr links such as /lib64 -> usr/lib64, which the loader is found through)
    paths = [os.path.realpath(p) for p in pythons if p] + list(sandbox.toolchain_paths("gcc"))
    paths += ["/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/sys",
              "/dev/zero", "/dev/urandom", "/dev/random"]
    ncu = shutil.which("ncu")
    if ncu:                                 # Nsight Compute's own tree (it injects its libraries into the child)
        paths.append(str(Path(os.path.realpath(ncu)).parent))
    return tuple(p for p in dict.fromkeys(paths) if os.path.lexists(p))


def limits(base: sandbox.Limits, python: str, gpu: Gpu | None) -> sandbox.Limits:
    """The children's sandbox in the private view: the paths above, the claimed GPU's nodes read-write (CUDA opens
    them O_RDWR and drives them by ioctl, which Landlock grants only so) and a private /proc (CUDA reads
    /proc/self/* and /proc/driver/nvidia/*; it needs the PID namespace the target's limits ask for)."""
    if not base.private_fs:
        return base
    devices = device_nodes(gpu.minor) if gpu is not None else []
    return dataclasses.replace(base, ro_paths=tuple(dict.fromkeys((*base.ro_paths, *read_only_paths(python)))),
                               devices=tuple(dict.fromkeys((*base.devices, *devices))), proc=True)
