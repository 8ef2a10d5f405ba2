"""The simulated NeuronCores: trn1 (NeuronCore-v2), trn2 (NeuronCore-v3), trn3 (NeuronCore-v4), and the cost
model's parameters of each (params.toml and its per-platform overlays; every entry cites its source)."""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

PLATFORMS = ("trn1", "trn2", "trn3")
# each platform's figures over the previous one's: trn1 (NeuronCore-v2) is params.toml, trn2 (NeuronCore-v3)
# changes what params_trn2.toml lists, trn3 (NeuronCore-v4) what params_trn3.toml lists on top of that
_LAYERS = {"trn1": ("params.toml",), "trn2": ("params.toml", "params_trn2.toml"),
           "trn3": ("params.toml", "params_trn2.toml", "params_trn3.toml")}


# Whose measurements of trn1's DMA the model follows. The two published sets disagree: AWS's DMA guide and tutorials
# (the calibration table; the default) and Autocomp's optimization chains (measured on a trn1.2xlarge with a later
# compiler), where the same tutorial kernel ran 2.47x faster and small-row transfers moved at 171-241 GB/s. Each
# overlay changes only DMA figures, and says where each comes from.
DMA_FIGURES = {"aws": (), "autocomp": ("params_dma_autocomp.toml",)}


@functools.cache
def params(platform: str = "trn1", dma_figures: str = "aws") -> dict[str, float]:
    if platform not in _LAYERS:
        raise ValueError(f"unknown platform {platform!r}: one of {', '.join(PLATFORMS)}")
    if dma_figures not in DMA_FIGURES:
        raise ValueError(f"unknown dma_figures {dma_figures!r}: one of {', '.join(DMA_FIGURES)}")
    if DMA_FIGURES[dma_figures] and platform != "trn1":
        raise ValueError(f"dma_figures={dma_figures!r} are trn1 measurements; {platform} has AWS's figures only")
    out: dict = {}
    for name in _LAYERS[platform] + DMA_FIGURES[dma_figures]:
        layer = tomllib.loads(Path(__file__).with_name(name).read_text())
        unknown = set(layer) - set(out) if out else set()
        if unknown:          # an overlay only changes figures the NeuronCore-v2 table defines
            raise ValueError(f"{name} sets {sorted(unknown)}, which params.toml does not define")
        out.update({k: v["value"] for k, v in layer.items()})
    return out
