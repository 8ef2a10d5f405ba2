"""The cuda target's host facts without a GPU: nvidia-smi's CSV, device minors and nodes from stand-in /proc and /dev
trees, one evaluator per GPU through lock files, and the peak table's names."""
from __future__ import annotations

import pytest

from autocomp_zmq.hw_runners.cuda.gpu import PEAKS, claim_gpu, device_minor, device_nodes, parse_gpus, peaks_for

SMI = """0, GPU-1d5e0d3c-aaaa-bbbb-cccc-000000000000, NVIDIA H100 80GB HBM3, 570.124.06, 81559, 00000000:18:00.0
1, GPU-77e1f2aa-aaaa-bbbb-cccc-000000000001, NVIDIA H100 80GB HBM3, 570.124.06, 81559, 00000000:2A:00.0
"""


def test_nvidia_smi_csv_is_read_and_a_surprise_is_an_error():
    gpus = parse_gpus(SMI)
    assert [(g.index, g.name, g.memory_mib) for g in gpus] == [(0, "NVIDIA H100 80GB HBM3", 81559)] * 1 + \
        [(1, "NVIDIA H100 80GB HBM3", 81559)]
    assert gpus[1].uuid.startswith("GPU-77e1") and gpus[1].driver == "570.124.06"
    with pytest.raises(ValueError, match="unexpected nvidia-smi line"):
        parse_gpus("no gpus here")


def test_device_minor_comes_from_the_driver_not_the_index(tmp_path):
    info = tmp_path / "0000:2a:00.0"
    info.mkdir()
    (info / "information").write_text("Model: NVIDIA H100\nDevice Minor: 5\n")
    assert device_minor("00000000:2A:00.0", tmp_path) == 5
    assert device_minor("00000000:99:00.0", tmp_path) is None
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia5", "nvidia0"):
        (dev / name).touch()
    assert device_nodes(5, dev) == [str(dev / n) for n in ("nvidiactl", "nvidia-uvm", "nvidia5")]   # not nvidia0


def test_one_evaluator_per_gpu(tmp_path):
    gpus = parse_gpus(SMI)
    first = claim_gpu(gpus, tmp_path, environ={})
    second = claim_gpu(gpus, tmp_path, environ={})
    assert (first.gpu.index, second.gpu.index) == (0, 1)
    assert claim_gpu(gpus, tmp_path, environ={}) is None          # both taken
    first.release()
    assert claim_gpu(gpus, tmp_path, environ={}).gpu.index == 0   # free again once released
    # one GPU named by the environment (one per Slurm task), by index or UUID: taken as given
    assert claim_gpu(gpus, tmp_path, environ={"CUDA_VISIBLE_DEVICES": "1"}).source == "environment"
    assert claim_gpu(gpus, tmp_path, environ={"CUDA_VISIBLE_DEVICES": gpus[1].uuid}).gpu.index == 1


@pytest.mark.parametrize("name, key", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
                                       ("NVIDIA H200", "H200"), ("NVIDIA A100-SXM4-80GB", "A100"),
                                       ("NVIDIA L40S", "L40S"), ("Tesla T4", None)])
def test_peaks_by_gpu_name(name, key):
    found = peaks_for(name)
    assert (found[0] if found else None) == key
    if found:
        p = found[1]
        assert p.half_flops > p.tf32_flops > p.fp32_flops > 0 and p.dram_bytes_s > 0 and p.source
    assert PEAKS["H100 SXM"].half_flops == 989.4e12 and PEAKS["H100 SXM"].dram_bytes_s == 3.35e12
