"""Published training logs that print both peaks: ``max_memory_allocated`` and ``max_memory_reserved``.

Where :data:`pipesim.analytic.allocator.RESERVED_SHARE` comes from. Each pair is one training run's log as
published in a public GitHub document (tutorials, course material, framework docs, users' notes), almost all
Megatron-LM's ``report_memory`` line (``[Rank 0] (after N iterations) memory (MB) | allocated: … | max
allocated: … | reserved: … | max reserved: …``), read through the project's code-search index. The index names a
document by an id, not by repository and path; each pair says what the document says of itself, and its index
id, so that a reader with the index can find it again.

Kept: the 27 pretraining runs on Megatron-LM and Megatron-DeepSpeed found, one pair per run (the rank with the
largest allocated peak: ranks of one run repeat each other), on NVIDIA GPUs. Left out: runs on ROCm or other
allocators (LUMI's MI250X, Intel XPU, Ascend), runs capturing CUDA graphs (their private pools count as reserved),
a summary printed at an out-of-memory error, reinforcement-learning runs with an inference engine's cache in the
same process, DeepSpeed's ``see_memory_usage`` (it resets the peaks at every print and rounds the reserved peak to
whole GB), a run with activation offloading (which pipesim does not model), test fixtures with made-up numbers, and
fine-tuning runs of other trainers (Hugging Face TRL's DPO and PEFT's LoRA, LeRobot: 2 GB to 27 GB allocated, +1 …
+86 %), whose allocation patterns are not those of the full-parameter pretraining pipesim models.

Uncertain: most logs print once, at the first logging interval (iteration 1–100), so a later phase could raise
the reserved peak; few state whether ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` was set, and none
runs ZeRO-3 or FSDP, where GMLake (Guo et al. 2024) measures the most fragmentation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class AllocatorPair:
    """One run's two peaks, MiB as the log prints them."""

    index_id: int  # the code-search index's id of the document; 0: a GitHub issue, named in ``described``
    framework: str
    described: str  # what the document says the run was
    max_allocated_mib: float
    max_reserved_mib: float

    @property
    def reserved_share(self) -> float:
        """How much more the allocator reserved than tensors held, as a share of the latter."""
        return self.max_reserved_mib / self.max_allocated_mib - 1


_MEGATRON, _MDS = "megatron", "megatron-deepspeed"
PAIRS = (
    AllocatorPair(46239071709, _MEGATRON, "Megatron-Bridge llama32_1b recipe, TP 8, seq 1024, H100 (user's notes)",
                  12003.6, 12232.0),
    AllocatorPair(25324620254, _MEGATRON, "DeepSeek-V3 proxy, 14 layers, TP1 PP4 EP16, H100, baseline without "
                  "offloading (a fine-grained activation offloading guide)", 65203.9, 74306.0),
    AllocatorPair(9506752970, _MEGATRON, "Megatron-LM tutorial, GPT-2 small, seq 512, one GPU, FP16", 1464.3, 1576.0),
    AllocatorPair(33443949567, _MEGATRON, "ms-swift Megatron pretraining test, Qwen2-0.5B, DP 2", 7960.0, 8266.0),
    AllocatorPair(58521273019, _MEGATRON, "Megatron-Bridge Qwen3-4B on one GPU, course exercise baseline", 69454.8,
                  73472.0),
    AllocatorPair(41373183261, _MEGATRON, "Ling-V2 continual pretraining example log (MoE with MTP)", 63359.8,
                  66802.0),
    AllocatorPair(52487340057, _MEGATRON, "Pai-Megatron-Patch Llama 3.1 8B, TP2 PP2, selective recomputation",
                  44819.1, 45930.0),
    AllocatorPair(16669093845, _MEGATRON, "Megatron GPT tutorial, run A (global batch 8, FP16)", 8696.9, 8786.0),
    AllocatorPair(16669093845, _MEGATRON, "Megatron GPT tutorial, run B (4 ranks, global batch 16)", 7253.2, 7622.0),
    AllocatorPair(53225447792, _MEGATRON, "Apertus Qwen3-30B-A3B, PP4 EP2 DP2, micro-batch 4, seq 4096, MoE "
                  "activation recomputation", 84019.4, 84732.0),
    AllocatorPair(29417827768, _MEGATRON, "Slurm job-monitoring guide, a Megatron run's rank 24", 3869.3, 4020.0),
    AllocatorPair(8819121795, _MEGATRON, "dense 0.21B baseline, micro-batch 8, 8 GPUs", 20561.5, 28404.0),
    AllocatorPair(8819121795, _MEGATRON, "MoE 4.37B variant of the same study", 33279.6, 37878.0),
    AllocatorPair(66011901751, _MEGATRON, "6.44B-parameter model, global batch 1024", 75078.4, 75682.0),
    AllocatorPair(40965174410, _MEGATRON, "open-sci-ref 1.7B, seq 4096, on Leonardo's A100 64GB", 50277.2, 53386.0),
    AllocatorPair(25097858135, _MEGATRON, "0.35B model, 4 ranks", 2589.1, 2608.0),
    AllocatorPair(20020290649, _MEGATRON, "Megatron-LM r0.10.0 Llama 2 3B, TP1 PP4, RTX 4090 24GB", 15754.9, 16334.0),
    AllocatorPair(19144444268, _MEGATRON, "Megatron-LM r0.10.0 Llama 2 7B, TP1 PP4, RTX 4090 48GB", 30227.7, 31086.0),
    AllocatorPair(51780658802, _MEGATRON, "70B-class GPT, TP4 PP4 DP2, full recomputation, seq 4096 "
                  "(gnosia93/slurm-on-aws lesson)", 47104.3, 48934.0),
    AllocatorPair(52696439354, _MEGATRON, "0.09B MoE, first iteration", 999.6, 1126.0),
    AllocatorPair(25139531826, _MEGATRON, "0.05B model, five-iteration smoke run", 623.6, 648.0),
    AllocatorPair(24112904958, _MEGATRON, "legacy Megatron-LM GPT-2 345M, one GPU, FP16 ('max cached')", 11927.5,
                  13826.0),
    AllocatorPair(24112904958, _MEGATRON, "the same blog's second run (600 iterations)", 6237.8, 7890.0),
    AllocatorPair(52723628686, _MEGATRON, "MTP and Liger cross-entropy smoke run, peak over 10 steps", 28392.6,
                  30526.0),
    AllocatorPair(0, _MEGATRON, "NeMo 2.0 Qwen3-30B-A3B pretraining (NVIDIA-NeMo/NeMo issue #14850; GB as printed)",
                  53.9 * 1024, 57.5 * 1024),
    AllocatorPair(24522434823, _MDS, "GenSLM on Perlmutter's A100, MP4, micro-batch 4, seq 2048 (ALCF notes)",
                  23105.1, 35048.0),
    AllocatorPair(24255785376, _MDS, "TP2 DP4, seq 4096, FP16, on Polaris's A100 40GB (ALCF notes)", 14024.8,
                  17240.0),
)


def reserved_shares(pairs: tuple[AllocatorPair, ...] = PAIRS) -> list[float]:
    """Every run's reserved share, smallest first."""
    return sorted(p.reserved_share for p in pairs)


def median_share(pairs: tuple[AllocatorPair, ...] = PAIRS) -> float:
    return statistics.median(reserved_shares(pairs))


def share_range(pairs: tuple[AllocatorPair, ...] = PAIRS) -> tuple[float, float]:
    """The 10th and 90th percentiles of the runs' reserved shares."""
    deciles = statistics.quantiles(reserved_shares(pairs), n=10)
    return deciles[0], deciles[-1]
