"""Assemble a stand-in Neuron SDK host (standin/README.md) in a directory: the SDK's Python environment of a
given release, nrtpy's own environment, and the tools each release ships, with wrapper `python` scripts that
run our interpreter on those packages. Everything is made readable by all: the sandbox may run kernels as
nobody."""
from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

STANDIN = Path(__file__).with_name("standin")
# per release: the neuronx-cc and nki wheels' versions (AWS's release manifest), the NKI v1 package it has, and
# the tools aws-neuronx-tools installs (neuron-profile is no longer supported from 2.30: neuron-explorer)
RELEASES = {"2.29": ("2.24.8799.0", "0.3.0", "v1", ("neuron-bench", "neuron-profile")),
            "2.30": ("2.25.4012.0", "0.4.0", "v2", ("neuron-bench", "neuron-explorer")),   # NKI v2 only, no nrtpy yet
            "2.32": ("2.27.5334.0", "0.6.0", "v2", ("neuron-bench", "neuron-explorer"))}

# The profiler's summary-json (values made up for the tests): neuron-profile wraps the metrics in one object keyed
# by the graph, neuron-explorer's is read both ways; both print a log line first.
SUMMARY = {"total_time": 2.0e-5, "total_active_time": 1.8e-5, "tensor_engine_active_time": 1.5e-5,
           "tensor_engine_active_time_percent": 0.75, "vector_engine_active_time": 2.0e-6,
           "scalar_engine_active_time": 0.0, "gpsimd_engine_active_time_percent": 0.01, "dma_active_time": 1.0e-5,
           "mfu_estimated_percent": 0.42, "hbm_read_bytes": 2 << 20, "hbm_write_bytes": 1 << 20}
PROFILER_OUTPUT = {"neuron-profile": {"kernel.neff": SUMMARY}, "neuron-explorer": SUMMARY}


@dataclass
class Host:
    root: Path
    python: Path                # the SDK's Python
    nrtpy: Path | None          # nrtpy's Python
    bin: Path
    libnrt: Path | None = None  # the runtime's C library (the stand-in, standin/libnrt)

    def compiles(self) -> list[str]:
        """One line per compile the stand-in SDK did, in order."""
        log = self.root / "site" / "compiles.log"
        return log.read_text().splitlines() if log.exists() else []


def _wrapper(path: Path, site: Path) -> Path:
    path.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    return path


def _dist_info(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _profiler(name: str) -> str:
    """The profiler's stand-in: `capture -n NEFF -s NTFF` traces a run (it checks that the NEFF exists), `view ...
    --output-format summary-json` prints a log line, then the summary."""
    return (f'#!/bin/sh\nif [ "$1" = capture ]; then\n  [ "$2" = -n ] && [ -f "$3" ] && [ "$4" = -s ] || exit 2\n'
            f'  echo "trace of $3 on NeuronCore $NEURON_RT_VISIBLE_CORES" > "$5"\n  exit 0\nfi\n'
            f"echo '[{name}] INFO reading $3'\ncat <<'EOF'\n{json.dumps(PROFILER_OUTPUT[name])}\nEOF\n")


def build_libnrt(lib_dir: Path) -> Path:
    """The stand-in libnrt.so.1, its device script beside it, run by this interpreter."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    script = shutil.copy(STANDIN / "libnrt" / "standin_device.py", lib_dir)
    out = lib_dir / "libnrt.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(out), str(STANDIN / "libnrt" / "libnrt.c"),
                    f'-DDEVICE_PYTHON="{sys.executable}"', f'-DDEVICE_SCRIPT="{script}"'], check=True)
    return out


def make_host(root: Path, release: str, nrtpy: bool = True, libnrt: bool = True) -> Host:
    compiler, nki_version, v1, tools = RELEASES[release]
    site, bin_dir = root / "site", root / "bin"
    shutil.copytree(STANDIN / v1 / "neuronxcc", site / "neuronxcc")
    shutil.copytree(STANDIN / "v2" / "nki", site / "nki")
    shutil.copy(STANDIN / "standin_chiplock.py", site)
    _dist_info(site, "neuronx-cc", compiler)
    _dist_info(site, "nki", nki_version)
    bin_dir.mkdir()
    scripts = [_wrapper(bin_dir / "python", site)]
    for name in tools:
        (bin_dir / name).write_text(_profiler(name) if name in PROFILER_OUTPUT else "#!/bin/sh\nexit 0\n")
        scripts.append(bin_dir / name)
    nrtpy_python = None
    if nrtpy:
        rt_site, rt_bin = root / "rt", root / "rt-bin"
        shutil.copytree(STANDIN / "rt", rt_site)
        shutil.copy(STANDIN / "standin_chiplock.py", rt_site)
        _dist_info(rt_site, "nrtpy", "2.34.10")
        rt_bin.mkdir()
        nrtpy_python = _wrapper(rt_bin / "python", rt_site)
        scripts.append(nrtpy_python)
        for name in tools:                 # the profiler is found on the run step's PATH too
            shutil.copy(bin_dir / name, rt_bin / name)
            scripts.append(rt_bin / name)
    lib = build_libnrt(root / "lib") if libnrt else None
    if lib:
        scripts.append(lib)
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
        if path.is_dir() or path in scripts:
            mode |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
        path.chmod(mode)
    (site / "compiles.log").touch()
    (site / "compiles.log").chmod(0o666)      # the kernel's process (nobody, under a root evaluator) appends
    return Host(root, bin_dir / "python", nrtpy_python, bin_dir, lib)
