"""Chip presets, each figure from the vendor datasheet named beside it.

Bandwidths are one direction per chip (datasheet NVLink figures are bidirectional and are halved here).
Inter-node: one NIC per GPU as in DGX/HGX systems (A100: 200 Gb/s HDR; H100/H200/B200/MI300X: 400 Gb/s).
Memory: HBM capacity in GiB as the driver reports it where that differs from the marketing figure.
"""

from __future__ import annotations

from pipesim.analytic.chip_spec import ChipSpec

GB = 1e9
TFLOPS = 1e12

_PRESETS = [
    # NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB): BF16 312 TFLOPS dense (624 with sparsity);
    # 80GB HBM2e (81920 MiB); 2,039 GB/s; NVLink 600 GB/s bidirectional. DGX A100: 8× HDR 200 Gb/s.
    ChipSpec("a100-80gb", 312 * TFLOPS, 80.0, 2039 * GB, 300 * GB, 25 * GB),
    # NVIDIA H100 datasheet (SXM): BF16 1,979 TFLOPS with sparsity → 989.4 dense; 80GB HBM3 (nvidia-smi
    # 81559 MiB = 79.6 GiB); 3.35 TB/s; NVLink 900 GB/s bidirectional. DGX H100: 8× ConnectX-7 400 Gb/s.
    ChipSpec("h100-sxm", 989.4 * TFLOPS, 79.6, 3350 * GB, 450 * GB, 50 * GB),
    # NVIDIA H200 datasheet (SXM): BF16 1,979 TFLOPS sparse → 989.4 dense; 141GB HBM3e (nvidia-smi
    # 143771 MiB = 140.4 GiB); 4.8 TB/s; NVLink 900 GB/s bidirectional; 400 Gb/s NICs.
    ChipSpec("h200", 989.4 * TFLOPS, 140.4, 4800 * GB, 450 * GB, 50 * GB),
    # NVIDIA HGX B200 datasheet: 8 GPUs give FP16/BF16 36 PFLOPS sparse → 2.25 PFLOPS dense per GPU;
    # 1.44 TB HBM3e total → 180 GB each (taken as 180 GiB: HBM is sized in binary units); 64 TB/s → 8 TB/s
    # each; NVLink 5 1.8 TB/s bidirectional per GPU. DGX B200: 8× ConnectX-7 400 Gb/s.
    ChipSpec("b200", 2250 * TFLOPS, 180.0, 8000 * GB, 900 * GB, 50 * GB),
    # AMD Instinct MI300X datasheet: BF16 1307.4 TFLOPS dense (2614.9 sparse); 192 GB HBM3; 5.3 TB/s;
    # Infinity Fabric 896 GB/s aggregate bidirectional peer bandwidth (7 links × 128 GB/s) → 448 GB/s one
    # direction for a ring that uses all links; a single peer gets 64 GB/s. 400 Gb/s NIC per GPU.
    # Measured GEMM efficiency on MI300X is below the NVIDIA parts; lower achievable_fraction if you know it.
    ChipSpec("mi300x", 1307.4 * TFLOPS, 192.0, 5300 * GB, 448 * GB, 50 * GB),
]

CHIP_PRESETS: dict[str, ChipSpec] = {c.name: c for c in _PRESETS}
