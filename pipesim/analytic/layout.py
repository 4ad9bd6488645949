"""How the model is split and trained: parallel degrees and the memory-saving choices (Layout).

Rank order is DESIGN.md's (tp fastest, then dp, then pp), which decides which link each group uses: a tp
group is ``tp`` consecutive ranks, a dp group spans ``tp·dp`` consecutive ranks, and pipeline neighbours are
``tp·dp`` ranks apart.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pipesim.errors import PipesimError


class Recompute(enum.Enum):
    """Activation recomputation (Korthikanti et al. 2023, §5)."""

    NONE = "none"
    SELECTIVE = "selective"  # recompute only the attention core (QKᵀ, softmax, dropout, ·V)
    FULL = "full"  # store only each layer's input; recompute the whole layer forward in backward


class AttentionKernel(enum.Enum):
    """Whether the s×s attention scores are materialized (Korthikanti's 5as²b term) or not."""

    UNFUSED = "unfused"  # softmax(QKᵀ) and its dropout stored: Korthikanti et al. Table 2 as printed
    FUSED = "fused"  # FlashAttention (Dao et al. 2022): scores recomputed block-wise, never stored


@dataclass(frozen=True)
class OptimizerBytes:
    """Bytes per parameter of mixed-precision Adam; only ``optimizer`` is sharded by a distributed optimizer.

    Default 2 + 4 + 12 = 18, Megatron-LM's accounting (its ``theoretical_memory_usage.py``): BF16 weights,
    an FP32 gradient buffer (``main_grad``: gradients accumulate over many microbatches in FP32, which every
    pipeline-parallel recipe uses), and FP32 master weights + Adam m + v. The ZeRO paper (Rajbhandari et al.
    2020, §3.1) counts 2 + 2 + 12 = 16 because it keeps FP16 gradients; use ``OptimizerBytes(grads=2)``
    (``--param-bytes 16``) to reproduce it.
    """

    weights: float = 2.0
    grads: float = 4.0
    optimizer: float = 12.0

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer


@dataclass(frozen=True)
class Layout:
    """Parallel degrees, microbatches and the activation/optimizer memory choices of one training setup."""

    tp: int = 1
    dp: int = 1
    pp: int = 1
    chunks: int = 1  # v, model chunks per pipeline rank
    microbatches: int = 1  # per pipeline per step (m)
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False  # Korthikanti et al. 2023 §4.2.2: norms/dropout sharded along sequence
    distributed_optimizer: bool = False  # ZeRO-1 / Megatron distributed optimizer: optimizer state / dp
    attention: AttentionKernel = AttentionKernel.FUSED
    # Causal masking skips half of QKᵀ and ·V in FlashAttention kernels; Narayanan et al. 2021 and the MFU
    # convention of Chowdhery et al. 2022 (PaLM, App. B) count the full s² work. Off by default so FLOPs,
    # step time and MFU are comparable with those published numbers.
    halve_causal_attention: bool = False
    param_bytes: OptimizerBytes = OptimizerBytes()

    def __post_init__(self) -> None:
        for key in ("tp", "dp", "pp", "chunks", "microbatches"):
            if getattr(self, key) < 1:
                raise PipesimError(f"--{key} {getattr(self, key)} must be ≥ 1")

    @property
    def num_stages(self) -> int:
        return self.pp * self.chunks

    @property
    def world_size(self) -> int:
        return self.tp * self.dp * self.pp
