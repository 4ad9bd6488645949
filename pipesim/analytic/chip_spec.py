"""What it runs on: an accelerator's compute, memory and links (ChipSpec), loaded from a preset or a file.

Link bandwidths are **one direction, per chip**, in bytes/s: a ring collective or a P2P send moves data one
way per link at a time, so that is the figure every formula in :mod:`pipesim.analytic.comm` divides by.
Datasheets quote NVLink as bidirectional totals (A100 600 GB/s = 300 GB/s each way); presets halve them.

``achievable_fraction`` scales the peak FLOP/s for the transformer's matmuls. It stands for everything the
FLOP count does not model: GEMM efficiency below peak (large BF16 GEMMs reach 70–80 % of peak on A100/H100)
and the memory-bound element-wise kernels (norms, softmax, GeLU/SwiGLU, dropout, residual adds) that take a
further 15–25 % of a layer's time. Default 0.6 for every chip; it is the single largest lever on predicted
step time, so set it from a measured layer when you have one (``--achievable-fraction``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pipesim.errors import PipesimError
from pipesim.io.spec_files import build_frozen, preset_or_file

DEFAULT_ACHIEVABLE_FRACTION = 0.6


@dataclass(frozen=True)
class ChipSpec:
    """One accelerator and the node it sits in."""

    name: str
    peak_flops: float  # dense BF16 FLOP/s (no structured sparsity)
    memory_gib: float  # usable HBM capacity, GiB
    hbm_bandwidth: float  # bytes/s
    intra_node_bandwidth: float  # bytes/s per chip, one direction (NVLink / Infinity Fabric)
    inter_node_bandwidth: float  # bytes/s per chip, one direction (one NIC per chip)
    node_size: int = 8  # chips sharing the intra-node fabric
    achievable_fraction: float = DEFAULT_ACHIEVABLE_FRACTION  # of peak_flops, for matmul-dominated layers
    link_latency: float = 10e-6  # s per P2P transfer / collective step (NCCL small-message latency order)

    def __post_init__(self) -> None:
        for key in ("peak_flops", "memory_gib", "hbm_bandwidth", "intra_node_bandwidth", "inter_node_bandwidth"):
            if not getattr(self, key) > 0:
                raise PipesimError(f"chip {self.name}: {key}={getattr(self, key)!r} must be > 0")
        if not 0 < self.achievable_fraction <= 1:
            raise PipesimError(f"chip {self.name}: achievable_fraction={self.achievable_fraction} must be in (0, 1]")
        if self.node_size < 1 or self.link_latency < 0:
            raise PipesimError(f"chip {self.name}: node_size must be ≥ 1 and link_latency ≥ 0")

    @property
    def achievable_flops(self) -> float:
        return self.peak_flops * self.achievable_fraction

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30

    def to_dict(self) -> dict:
        return asdict(self)


_FLOATS = {"peak_flops", "memory_gib", "hbm_bandwidth", "intra_node_bandwidth", "inter_node_bandwidth",
           "achievable_fraction", "link_latency"}


def chip_from_dict(data: dict, source: str) -> ChipSpec:
    data = dict(data)
    data.setdefault("name", source)
    return build_frozen(ChipSpec, data, source, ints={"node_size"}, floats=_FLOATS, bools=set())


def load_chip(spec: str) -> ChipSpec:
    """A preset name (``pipesim chips``) or a path to a .yaml/.json chip file."""
    from pipesim.analytic.chip_presets import CHIP_PRESETS

    return preset_or_file(spec, CHIP_PRESETS, flag="--hardware", what="chip", listing="pipesim chips",
                          from_dict=chip_from_dict)
