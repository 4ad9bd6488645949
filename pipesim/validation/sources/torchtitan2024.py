"""torchtitan team, "Llama 3.1 8B, 70B, 405B" benchmarks of December 2024 (pytorch/torchtitan,
benchmarks/llama3_h100_202412_torchtitan.md, Tables 1–6; the numbers of Liang et al. 2024, "TorchTitan",
arXiv 2410.06511): tokens/s per GPU and peak memory on Meta's Grand Teton H100s (96GB HBM2e, 500 W; the
``h100-96gb-hbm2e`` preset).

Stated: model, GPUs, the FSDP / TP / PP / CP degrees, local batch size (sequences per data-parallel rank per
step) and global batch, selective (Tables 1, 3) or full (Tables 2, 4–6) activation checkpointing, sequence
length for Tables 2 and 6, torch.compile and Float8 linears (torchao) where the row says so, AsyncTP and the
pipeline schedule (1F1B, interleaved 1F1B) for Tables 5–6, TPS/GPU read at the 90th iteration, memory the
maximum over GPUs (footnote 1).

Inferred: sequence length 8192 where the table does not state one (Llama 3.1's pre-training length);
pipeline microbatch size 1 (assumed), so a pipelined rank's local batch is its microbatch count, and without
PP the local batch is one microbatch; two stages per rank for interleaved 1F1B; 126 layers split with the
lighter stages at the ends (1F1B: 15 on the first and last stage, 16 elsewhere; interleaved: 7 and 8) —
torchtitan's own split points are not stated; FSDP as ZeRO-3; TP with sequence parallelism (assumed for the
norms); fused attention (PyTorch SDPA's FlashAttention-2 backend: the Hopper FA2 shares of the H100 preset);
the memory column as PyTorch's reserved peak (assumed), which sits above allocated memory by the caching
allocator's fragmentation.

Approximations: torchtitan's "selective" checkpointing (its own per-op policy, which this file does not
describe) is taken as pipesim's selective recomputation (attention core only); torch.compile is not modelled —
only the compiled rows (BF16 and Float8) are used, the eager FSDP rows of Tables 1 and 3 are left out; FSDP in
torchtitan shards over data × context parallel ranks, as pipesim's ZeRO-3 does (n = dp·cp); with PP, whether
torchtitan's FSDP re-gathers a stage's weights for each microbatch is not stated, and pipesim's ZeRO-3 under
pipelining may count it differently. Left out: the "FSDP 1, CP 8" rows of Tables 2 and 6 (ZeRO-3 with dp = 1 is
refused by ``Layout`` although cp > 1 — the bug fixed on another branch; add them when it lands).

Uncertain: the chip's real peak (500 W), the Float8 recipe (not stated); the chip presets'
FP8 share cites Table 1's Float8/BF16 ratio as a cross-check, so Table 1's Float8 row is not fully held out.
"""

from pipesim.analytic.layout import Precision, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "torchtitan Llama 3.1 benchmarks on H100 (llama3_h100_202412_torchtitan.md)"
_CHIP = "h100-96gb-hbm2e"
_FSDP = ZeroStage.PARAMETERS
_BF16, _FP8 = Precision.BF16, Precision.FP8


def _row(table, model, gpus, local_batch, seq, precision, recompute, tps, gib, tp=1, pp=1, cp=1, chunks=1,
         schedule="1f1b", async_tp=False, first_last=None):
    dp = gpus // (tp * pp * cp)
    micro = local_batch if pp == 1 else 1  # no PP: the whole local batch is one microbatch
    return PublishedRun(f"{SOURCE}, Table {table}", model, _CHIP, gpus, local_batch * dp, tp=tp, pp=pp, cp=cp,
                        chunks=chunks, micro_batch=micro, seq_len=seq, schedule=schedule, recompute=recompute,
                        sequence_parallel=tp > 1, zero=_FSDP, precision=precision, async_tp=async_tp,
                        first_last=first_last, tokens_per_gpu=tps, memory_gib=gib)


_SEL, _FULL = Recompute.SELECTIVE, Recompute.FULL
ROWS = [
    # Table 1: 8B, 8 GPUs, local batch 2, global 16, selective AC (FSDP + torch.compile, + Float8)
    _row(1, "llama3.1-8b", 8, 2, 8192, _BF16, _SEL, 6667, 77.0),
    _row(1, "llama3.1-8b", 8, 2, 8192, _FP8, _SEL, 8532, 76.8),
    # Table 2: 8B, 8 GPUs, FSDP + CP + compile + Float8, local batch 1, full AC (FSDP 1, CP 8 left out)
    _row(2, "llama3.1-8b", 8, 1, 32768, _FP8, _FULL, 3890, 83.9),
    _row(2, "llama3.1-8b", 8, 1, 65536, _FP8, _FULL, 2540, 84.2, cp=2),
    _row(2, "llama3.1-8b", 8, 1, 131072, _FP8, _FULL, 1071, 84.0, cp=4),
    # Table 3: 8B, 128 GPUs, local batch 2, global 256, selective AC
    _row(3, "llama3.1-8b", 128, 2, 8192, _BF16, _SEL, 6514, 62.0),
    _row(3, "llama3.1-8b", 128, 2, 8192, _FP8, _SEL, 8380, 61.8),
    # Table 4: 70B, 256 GPUs (FSDP 32, TP 8), compile + Float8, local batch 16, global 512, full AC
    _row(4, "llama3.1-70b", 256, 16, 8192, _FP8, _FULL, 829, 71.9, tp=8),
    _row(4, "llama3.1-70b", 256, 16, 8192, _FP8, _FULL, 876, 67.6, tp=8, async_tp=True),
    # Table 5: 405B, 512 GPUs (FSDP 8, TP 8, PP 8), compile + Float8 + AsyncTP, local batch 32, global 256
    _row(5, "llama3.1-405b", 512, 32, 8192, _FP8, _FULL, 100, 82.5, tp=8, pp=8, async_tp=True, first_last=15),
    _row(5, "llama3.1-405b", 512, 32, 8192, _FP8, _FULL, 128, 72.7, tp=8, pp=8, chunks=2, schedule="interleaved",
         async_tp=True, first_last=7),
    # Table 6: 405B, 512 GPUs (TP 8, PP 8), + CP, 1F1B, local batch 8, full AC (FSDP 1, CP 8 left out)
    _row(6, "llama3.1-405b", 512, 8, 32768, _FP8, _FULL, 76, 75.3, tp=8, pp=8, async_tp=True, first_last=15),
    _row(6, "llama3.1-405b", 512, 8, 65536, _FP8, _FULL, 47, 75.9, tp=8, pp=8, cp=2, async_tp=True, first_last=15),
    _row(6, "llama3.1-405b", 512, 8, 131072, _FP8, _FULL, 31, 77.1, tp=8, pp=8, cp=4, async_tp=True, first_last=15),
]
