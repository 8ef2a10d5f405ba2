"""What this host has of the Neuron SDK: NeuronCores, the Pythons that compile (neuronx-cc, nki) and run
(nrtpy) kernels, the runtime's C library (libnrt), the command-line tools, and which NeuronCore this evaluator
process owns.

Nothing here needs Trainium hardware to be tested: discovery takes the `neuron-ls` text and the
/dev and /sys roots as arguments, and core claiming takes the lock directory and the environment.
"""
from __future__ import annotations

import fcntl
import functools
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from autocomp_zmq.hw_runners.trainium_sim.dialect import Sdk

NEURON_BIN = Path("/opt/aws/neuron/bin")   # where the aws-neuronx-tools packages install neuron-ls and friends
DEFAULT_LOCK_DIR = Path("/tmp/autocomp-neuron-cores")
VISIBLE_CORES = "NEURON_RT_VISIBLE_CORES"   # the runtime uses only the NeuronCores this names
# The Neuron DLAMI ships ready-made virtual environments with the compiler installed (e.g.
# /opt/aws_neuronx_venv_pytorch_2_5/bin/python); we try them when our own Python lacks neuronxcc.
DLAMI_PYTHONS = "/opt/aws_neuronx_venv_*/bin/python"
INSTALL_HINT = (
    "Install the AWS Neuron SDK on a trn1/trn2 instance (the Neuron DLAMI has it): the driver and runtime "
    "(apt/dnf packages aws-neuronx-dkms, aws-neuronx-runtime-lib, aws-neuronx-tools from "
    "https://apt.repos.neuron.amazonaws.com) and the compiler in a Python environment "
    "(`pip install neuronx-cc --extra-index-url=https://pip.repos.neuron.amazonaws.com`); then point "
    "AUTOCOMP_NEURON_PYTHON at that environment's python (SDK 2.27 and later: also `pip install nki` for NKI v2). "
    "Setup guide: "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/setup/index.html")


# -- NeuronCores of this host ------------------------------------------------------------------------

def parse_neuron_ls(text: str, lnc: int | None = None) -> list[int]:
    """NeuronCore ids from `neuron-ls --json-output`.

    The output is a JSON list with one object per Neuron device, e.g. on a trn1.2xlarge
    `[{"neuron_device": 0, "nc_count": 2, "neuroncore_ids": [0, 1], "memory_size": 34359738368, ...}]`
    (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-sys-tools/neuron-ls.html documents
    the flag; the field names are from captured output). Neuron 2.34 announces a new JSON layout with
    instance-level fields on top, so a top-level object holding the device list (under "neuron_devices"
    or "devices") is read too. Devices without core ids count nc_count cores after the previous device's.
    lnc: the logical core config our kernels run at. neuron-ls lists each device's cores at the config it reports
    (logical_neuroncore_config; trn2's default is 2: 4 of a chip's 8 physical cores), but under
    NEURON_LOGICAL_NC_CONFIG=1 the runtime numbers them one per physical core (a trn2.48xlarge has 64 at LNC=2
    and 128 at LNC=1, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-features/
    logical-neuroncore-config.html), so a device listed at another config is renumbered at ours.
    Raises ValueError on anything else: the caller then falls back to /dev."""
    doc = json.loads(text)
    if isinstance(doc, dict):
        doc = doc.get("neuron_devices", doc.get("devices"))
    if not isinstance(doc, list):
        raise ValueError("neuron-ls JSON is not a list of devices")
    cores: list[int] = []
    for dev in doc:
        if not isinstance(dev, dict):
            raise ValueError("neuron-ls JSON device entry is not an object")
        ids = dev.get("neuroncore_ids")
        listed_at = dev.get("logical_neuroncore_config")
        if lnc and isinstance(listed_at, int) and listed_at != lnc and isinstance(dev.get("nc_count"), int):
            start = max(cores) + 1 if cores else 0
            cores += range(start, start + dev["nc_count"] * listed_at // lnc)
        elif isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            cores += ids
        elif isinstance(dev.get("nc_count"), int):
            start = max(cores) + 1 if cores else 0
            cores += range(start, start + dev["nc_count"])
        else:
            raise ValueError("neuron-ls JSON device entry has neither neuroncore_ids nor nc_count")
    return sorted(set(cores))


def device_nodes(dev: Path = Path("/dev")) -> list[Path]:
    """The Neuron driver's device files, /dev/neuron0, /dev/neuron1, ..."""
    try:
        return sorted((p for p in dev.iterdir() if re.fullmatch(r"neuron\d+", p.name)),
                      key=lambda p: int(p.name[6:]))
    except OSError:
        return []


def cores_per_device(sysfs: Path = Path("/sys/devices/virtual/neuron_device")) -> int:
    """NeuronCores per device from the driver's sysfs (neuron0/core_count); 2 (trn1, NeuronCore-v2) if unknown."""
    try:
        n = int((sysfs / "neuron0" / "core_count").read_text().strip())
        return n if n > 0 else 2
    except (OSError, ValueError):
        return 2


def tool(name: str) -> str | None:
    """A Neuron command-line tool from PATH or its default install directory."""
    found = shutil.which(name)
    if found:
        return found
    path = NEURON_BIN / name
    return str(path) if os.access(path, os.X_OK) else None


def discover_cores(neuron_ls_text: str | None, dev: Path = Path("/dev"),
                   sysfs: Path = Path("/sys/devices/virtual/neuron_device"), lnc: int | None = None) -> list[int]:
    """NeuronCore ids: neuron-ls's answer when there is one, else device files x cores per device."""
    if neuron_ls_text:
        try:
            return parse_neuron_ls(neuron_ls_text, lnc)
        except (ValueError, TypeError):
            pass
    nodes = device_nodes(dev)
    return list(range(len(nodes) * cores_per_device(sysfs)))


# Neuron 2.34 drops `--json-output` for `--output-format json` (a new layout with instance-level fields on top:
# announce-intent-eos-neuron-ls-json.html); both are asked, the older first
NEURON_LS_JSON_FLAGS = (("--json-output",), ("--output-format", "json"))


def neuron_ls_json(ls: str) -> str | None:
    """neuron-ls's JSON device list, through whichever of its two JSON flags this version takes; None if neither."""
    for flags in NEURON_LS_JSON_FLAGS:
        try:
            out = subprocess.run([ls, *flags], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout
    return None


@functools.cache
def host_cores(lnc: int | None = None) -> tuple[int, ...]:
    """This host's NeuronCores at logical core config `lnc` (cached: the hardware does not change under a running
    process)."""
    ls = tool("neuron-ls")
    return tuple(discover_cores(neuron_ls_json(ls) if ls else None, lnc=lnc))


# -- the Pythons that compile and run kernels -----------------------------------------------------------

PROBE = Path(__file__).with_name("sdk_side") / "probe.py"


@functools.cache
def probe(python: str) -> Sdk | None:
    """What Neuron packages `python` has (sdk_side/probe.py, run in it); None when it cannot run."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):   # ours: asked in process
        spec = importlib.util.spec_from_file_location("autocomp_neuron_probe", PROBE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return Sdk.from_probe({**module.facts(), "python": python})
    try:
        out = subprocess.run([python, str(PROBE)], capture_output=True, text=True, timeout=120)
        doc = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    # the Python as we run it (a wrapper script or a venv's link), not the interpreter it resolves to
    return Sdk.from_probe({**doc, "python": python}) if isinstance(doc, dict) else None


def _candidates(configured: str | None) -> tuple[str, ...]:
    """A configured Python is the only candidate; otherwise ours, then the DLAMI's environments."""
    return (configured,) if configured else (sys.executable, *sorted(glob.glob(DLAMI_PYTHONS)))


@functools.cache
def find_sdk(configured: str | None) -> tuple[Sdk | None, tuple[str, ...]]:
    """(the first Python's SDK that provides an NKI dialect or None, every Python tried)."""
    tried = _candidates(configured)
    found = (probe(p) for p in tried)
    return next((sdk for sdk in found if sdk is not None and sdk.dialects()), None), tried


@functools.cache
def find_nrtpy(configured: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(the first Python that has nrtpy, every Python tried): nrtpy runs NKI v2's NEFFs, and cannot share an
    environment with the nki wheel, so it is looked for on its own (AUTOCOMP_NRTPY_PYTHON or option nrtpy_python)."""
    tried = _candidates(configured)
    return next((p for p in tried if (sdk := probe(p)) is not None and sdk.nrtpy), None), tried


def missing_sdk(sdk: Sdk | None, tried: Sequence[str], cores: Sequence[int], visible_cores: str | None) -> list[str]:
    """What stops every evaluation on this host, one phrase each (empty: nothing)."""
    missing = []
    if sdk is None:
        missing.append("the Neuron compiler: no Python among " + ", ".join(tried) + " has NKI (the neuronx-cc "
                       "package's neuronxcc.nki, or the nki package)")
    if not cores and not visible_cores:
        missing.append("Neuron devices: no /dev/neuron* and `neuron-ls` lists none (the driver "
                       "aws-neuronx-dkms, on a trn1/trn2/trn3 instance)")
    return missing


# where aws-neuronx-runtime-lib installs the runtime's C library (the soname first)
LIBNRT_PATHS = ("/opt/aws/neuron/lib/libnrt.so.1", "/opt/aws/neuron/lib/libnrt.so")


def find_libnrt(configured: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(the runtime's C library, every path tried): a configured path (option libnrt or $AUTOCOMP_LIBNRT) is the
    only candidate, else the runtime package's install paths."""
    tried = (configured,) if configured else LIBNRT_PATHS
    return next((p for p in tried if os.path.isfile(p)), None), tried


NRTPY_HINT = ("Compiled kernels are run and timed through nrtpy (Neuron SDK 2.32 and later) or, without it, the "
              "runtime's C library libnrt (package aws-neuronx-runtime-lib, /opt/aws/neuron/lib/libnrt.so.1; the "
              "trainium option libnrt or AUTOCOMP_LIBNRT names another path). nrtpy cannot be installed "
              "beside the nki package: create a separate Python 3.11+ environment, `pip install nrtpy "
              "--extra-index-url=https://pip.repos.neuron.amazonaws.com`, and point AUTOCOMP_NRTPY_PYTHON (or the "
              "trainium option nrtpy_python) at its python "
              "(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrtpy/index.html)")


# -- which NeuronCore this evaluator owns ------------------------------------------------------------

@dataclass
class CoreClaim:
    """The NeuronCore(s) an evaluator process runs kernels on: a NEURON_RT_VISIBLE_CORES value,
    held through an open locked file (or given by the environment, e.g. one per Slurm task)."""
    cores: str
    source: str                     # "environment" or the lock file's path
    fd: int | None = None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)       # closing the descriptor drops the flock: the core is free again
            self.fd = None


def parse_core_list(text: str) -> list[int] | None:
    """The cores a NEURON_RT_VISIBLE_CORES value names ("3", "0-7", "0,2,4-5"); None if it is not such a list."""
    cores: list[int] = []
    for part in text.replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if not (first.isdigit() and (not dash or last.isdigit())) or (dash and int(last) < int(first)):
            return None
        cores += range(int(first), int(last if dash else first) + 1)
    return sorted(set(cores))


def claim_core(cores: Sequence[int], lock_dir: Path = DEFAULT_LOCK_DIR,
               environ: Mapping[str, str] | None = None) -> CoreClaim | None:
    """Claim one NeuronCore for this process: the environment's NEURON_RT_VISIBLE_CORES when it names one
    core (one per Slurm task), else the first core (of those it names, or of `cores`) whose lock file
    (lock_dir/core-N.lock) takes an exclusive non-blocking flock. flock locks belong to the open file, so
    claims conflict even within one process, and the kernel drops them when the process dies however it
    dies: no stale claims. None when every core is taken."""
    environ = os.environ if environ is None else environ
    preset = (environ.get(VISIBLE_CORES) or "").strip()
    if preset:
        named = parse_core_list(preset)
        if named is None or len(named) == 1:   # one core, or a value we do not read: the runtime's business
            return CoreClaim(preset, "environment")
        cores = named                          # several: this process takes one of them
    lock_dir.mkdir(parents=True, exist_ok=True)
    for core in cores:
        path = lock_dir / f"core-{core}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:             # e.g. another user's lock file: that user's evaluator owns the core
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)         # the owner's pid, for people looking at the lock directory
        os.write(fd, f"{os.getpid()}\n".encode())
        return CoreClaim(str(core), str(path), fd)
    return None


# NEURON_PLATFORM_TARGET_OVERRIDE's documented values (nki.jit's docstring: "trn1|inf2|gen2, trn2|gen3,
# trn3|gen4"): NeuronCore-v2 (trn1, inf2), v3 (trn2), v4 (trn3)
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.jit.html
PLATFORM_OVERRIDES = {"trn1": "trn1", "inf2": "trn1", "gen2": "trn1", "trn2": "trn2", "gen3": "trn2",
                      "trn3": "trn3", "gen4": "trn3"}
DEVICE_NAMES = (("trainium3", "trn3"), ("trainium2", "trn2"))   # the driver's device_name, newest first


class PlatformError(ValueError):
    """NEURON_PLATFORM_TARGET_OVERRIDE names no platform the SDK documents."""


def platform_name(sysfs: Path = Path("/sys/devices/virtual/neuron_device"),
                  environ: Mapping[str, str] | None = None) -> str:
    """trn1, trn2 or trn3: from NEURON_PLATFORM_TARGET_OVERRIDE (PlatformError for a value the SDK does not
    document), else the driver's device name in sysfs (neuron0/info/architecture/device_name, e.g.
    "Trainium2"), else trn1."""
    environ = os.environ if environ is None else environ
    override = environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip().lower()
    if override:
        if override not in PLATFORM_OVERRIDES:
            raise PlatformError(f"NEURON_PLATFORM_TARGET_OVERRIDE={override!r} is not a platform the Neuron SDK "
                                f"documents (trn1|inf2|gen2, trn2|gen3, trn3|gen4)")
        return PLATFORM_OVERRIDES[override]
    try:
        name = (sysfs / "neuron0" / "info" / "architecture" / "device_name").read_text().lower()
    except OSError:
        return "trn1"
    return next((platform for device, platform in DEVICE_NAMES if device in name), "trn1")
