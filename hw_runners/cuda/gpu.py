"""What this host has of NVIDIA GPUs: the GPUs (nvidia-smi), their device nodes, which GPU this evaluator owns, and
the peak rates of each known model (for achieved-vs-peak feedback).

Nothing here needs a GPU to be tested: nvidia-smi's CSV text, /proc and /dev are arguments.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

DEFAULT_LOCK_DIR = Path("/tmp/autocomp-gpus")
QUERY = "index,uuid,name,driver_version,memory.total,pci.bus_id"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    driver: str
    memory_mib: int
    bus_id: str

    @property
    def minor(self) -> int:
        """The minor number of its /dev/nvidiaN node (the driver's; usually, not always, the index)."""
        return device_minor(self.bus_id) if device_minor(self.bus_id) is not None else self.index


def parse_gpus(csv: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.total,pci.bus_id --format=csv,noheader,nounits`"""
    gpus = []
    for line in csv.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6 or not parts[0].isdigit():
            raise ValueError(f"unexpected nvidia-smi line: {line!r}")
        mem = int(float(parts[4])) if re.fullmatch(r"[0-9.]+", parts[4]) else 0
        gpus.append(Gpu(int(parts[0]), parts[1], parts[2], parts[3], mem, parts[5]))
    return gpus


def host_gpus(timeout_s: float = 30) -> list[Gpu]:
    """The host's GPUs as nvidia-smi lists them (empty without nvidia-smi or a driver)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=timeout_s)
        return parse_gpus(out.stdout) if out.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


def device_minor(bus_id: str, proc: Path = Path("/proc/driver/nvidia/gpus")) -> int | None:
    """The GPU's device minor number from the driver's /proc information (bus ids there are lower case, with a
    four-digit domain: 0000:3b:00.0, where nvidia-smi prints 00000000:3B:00.0)."""
    short = bus_id.lower()[-12:]
    try:
        for d in proc.iterdir():
            if d.name.lower().endswith(short):
                m = re.search(r"Device Minor:\s*(\d+)", (d / "information").read_text())
                return int(m.group(1)) if m else None
    except OSError:
        return None
    return None


def device_nodes(minor: int, dev: Path = Path("/dev")) -> list[str]:
    """The device nodes a CUDA process needs for one GPU: the control node, unified memory, and the GPU's own."""
    wanted = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", f"nvidia{minor}"]
    return [str(dev / n) for n in wanted if (dev / n).exists()]


@dataclass
class GpuClaim:
    """The GPU an evaluator process runs kernels on, held through an open locked file (or given by the environment,
    e.g. one per Slurm task through CUDA_VISIBLE_DEVICES)."""
    gpu: Gpu
    source: str
    fd: int | None = None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def claim_gpu(gpus: Sequence[Gpu], lock_dir: Path = DEFAULT_LOCK_DIR,
              environ: Mapping[str, str] | None = None) -> GpuClaim | None:
    """One GPU for this process: the one CUDA_VISIBLE_DEVICES names when it names exactly one (by index or UUID),
    else the first of those it names (or of the host's) whose lock file takes an exclusive non-blocking flock.
    flock locks die with the process: no stale claims. None when every GPU is taken."""
    environ = os.environ if environ is None else environ
    named = [p.strip() for p in (environ.get("CUDA_VISIBLE_DEVICES") or "").split(",") if p.strip()]
    pool = [g for g in gpus if not named or str(g.index) in named or g.uuid in named]
    if len(named) == 1 and pool:
        return GpuClaim(pool[0], "environment")
    lock_dir.mkdir(parents=True, exist_ok=True)
    for gpu in pool:
        try:
            fd = os.open(lock_dir / f"gpu-{gpu.uuid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return GpuClaim(gpu, str(lock_dir / f"gpu-{gpu.uuid}.lock"), fd)
    return None


@dataclass(frozen=True)
class Peaks:
    """Dense peak rates of one GPU model, per second, and the source they come from."""
    fp32_flops: float            # CUDA cores (no tensor cores)
    tf32_flops: float            # tensor cores, dense
    half_flops: float            # tensor cores, fp16/bf16 dense, fp32 accumulate
    dram_bytes_s: float
    l2_bytes: int
    source: str


# Dense (no sparsity) figures. H100: NVIDIA H100 Tensor Core GPU datasheet (SXM5: 67 TFLOPS FP32, 494.5 TF32,
# 989.4 BF16/FP16, 3.35 TB/s HBM3; PCIe: 51, 378, 756, 2.0 TB/s) and the Hopper architecture whitepaper (50 MB L2).
# A100: A100 datasheet (19.5 FP32, 156 TF32, 312 BF16/FP16; 80GB SXM 2.039 TB/s, 40 MB L2). L40S: L40S datasheet
# (91.6 FP32, 183 TF32, 362 BF16/FP16 dense, 864 GB/s GDDR6, 48 MB L2).
PEAKS = {
    "H100 SXM": Peaks(67e12, 494.5e12, 989.4e12, 3.35e12, 50 << 20, "NVIDIA H100 datasheet (SXM5), dense"),
    "H100 PCIe": Peaks(51e12, 378e12, 756e12, 2.0e12, 50 << 20, "NVIDIA H100 datasheet (PCIe), dense"),
    "H200": Peaks(67e12, 494.5e12, 989.4e12, 4.8e12, 50 << 20, "NVIDIA H200 datasheet (SXM), dense"),
    "A100": Peaks(19.5e12, 156e12, 312e12, 2.039e12, 40 << 20, "NVIDIA A100 datasheet (80GB SXM), dense"),
    "L40S": Peaks(91.6e12, 183e12, 362e12, 0.864e12, 48 << 20, "NVIDIA L40S datasheet, dense"),
}


def peaks_for(name: str) -> tuple[str, Peaks] | None:
    """The peak table entry for an nvidia-smi GPU name ("NVIDIA H100 80GB HBM3" is an H100 SXM, "NVIDIA H100 PCIe"
    the PCIe card); None for a model the table does not know."""
    n = name.upper()
    if "H200" in n:
        return "H200", PEAKS["H200"]
    if "H100" in n:
        key = "H100 PCIe" if "PCIE" in n else "H100 SXM"
        return key, PEAKS[key]
    for key in ("A100", "L40S"):
        if key in n:
            return key, PEAKS[key]
    return None
