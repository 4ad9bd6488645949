"""torchtitan team, "Llama 3.1 8B, 70B, 405B" benchmarks of December 2024 (pytorch/torchtitan,
benchmarks/llama3_h100_202412_torchtitan.md, **Table 1 only**: Llama 3.1 8B, BF16 and Float8): tokens/s per GPU
and peak memory on Meta's Grand Teton H100s (96GB HBM2e, 500 W; the ``h100-96gb-hbm2e`` preset).

Only the Llama 3.1 8B Float8 table is ours to use: the team keeps torchtitan's other benchmark tables (the
70B and 405B FSDP/TP/PP/CP runs of Tables 2–6, the same numbers as Liang et al. 2024, arXiv 2410.06511) for
its own held-out validation. They were read once while this module was written and then removed, before any
constant was re-derived; nothing here or in :mod:`pipesim.validation.constants` was fitted to them. The notes
below on Tables 2–6 describe what was stated there, for whoever holds that validation.

Stated (Table 1): Llama 3.1 8B on 8 GPUs, FSDP over all 8 (ZeRO-3), local batch 2 (global 16), selective
activation checkpointing, torch.compile, BF16 or Float8 linears (torchao, tensorwise dynamic scaling), TPS/GPU
read at the 90th iteration, memory the maximum over GPUs. Inferred: sequence length 8192 (torchtitan's Llama 3.1
training configs); the whole local batch as one microbatch; fused attention (PyTorch SDPA's FlashAttention-2
backend: the Hopper FA2 shares of the H100 preset); the memory column as PyTorch's reserved peak (torchtitan
logs ``max_reserved``), which sits above allocated memory by the caching allocator's fragmentation: compared with
pipesim's reserved figure (:func:`pipesim.analytic.allocator.reserved_peak`, whose share comes from other runs'
logs, not from these rows; until it existed they were compared with the allocated peak, −3.9 % and −2.6 %).
Its FSDP is FSDP2 (``fully_shard``): each per-layer gather copied into the parameters on the compute stream
(``--fsdp2``; the rows −8.6 → −7.5 % and −0.5 → +0.9 % when it was modelled).
Its Llama copied the grouped keys and values out to every query head before the attention call
(``repeat_kv`` in ``torchtitan/models/llama/model.py`` from its first release until "GQA without kv repeats",
pytorch/torchtitan #2259, January 2026), so the kernel saved and read four times the 8B's K and V (``--repeat-kv``;
the rows −8.6 → −8.0 % and −0.6 → +0.2 % on step time when it was modelled, memory unmoved: the loss's peak
is the larger transient).
torchtitan's launcher sets ``PYTORCH_ALLOC_CONF=expandable_segments:True`` (``run_llama_train.sh`` since
2024-10-22), which the share's runs mostly do not state: these two rows are its only test under that setting.

Stated by torchtitan's code rather than the table: its "selective" checkpointing is per-op SAC by default
(``selective_ac_option = "op"``: the attention kernel's output and every other matmul's output kept, the rest
recomputed; ``--recompute per-op``), and its loss is ``F.cross_entropy`` on the logits cast to FP32 (``--loss
pytorch``, whose backward peak is 12 bytes per logit), and its ``FeedForward`` keeps ``w1`` and ``w3`` apart
(``--mlp-up split``: two GEMMs). Until these were modelled the rows ran as pipesim's
selective recomputation (attention core only) with Megatron's loss, +27% and +28% on memory. torch.compile is not
modelled beyond the fused element-wise kernels. The Float8 row runs torchao's dynamic scaling as pipesim's
per-tensor current scaling (``--fp8-recipe tensorwise``, with its amax pass), as the table states it; until the
release that added OLMo-core's rows it ran as delayed scaling (2 points more optimistic). Its linears are torchao's
``Float8Linear`` (``--fp8-linears torchao``): they save the BF16 input and weight and cast them at each GEMM, so
no FP8 weight copy is kept (until that was read from torchao's ``matmul_with_hp_or_float8_args``, pipesim counted
Transformer Engine's copy here: +2.7 % on this row's memory, now +1.6 %), and it casts each GEMM's weight in the
forward and again for the input gradient, where Transformer Engine casts once a step (this row's step −3.1 →
−0.5 %); its inputs' casts are counted as Transformer Engine's (torch.compile fuses an unknown part of
torchao's). Uncertain: the chip's real peak (500 W; the preset takes the middle of the SXM and NVL datasheet
peaks, as the file's "between SXM and NVL" reads; with the SXM peak, used before, these rows were 6 points more
optimistic). The chip presets' FP8 share
cites this table's Float8/BF16 ratio as a cross-check, so its Float8 row is not fully held out.
"""

from pipesim.analytic.allocator import MemoryMeasure
from pipesim.analytic.frameworks import Framework
from pipesim.analytic.layout import Fp8Linears, Fp8Recipe, LossKernel, MlpUp, Precision, Recompute, ZeroStage
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
                        first_last=first_last, tokens_per_gpu=tps, memory_gib=gib, loss=LossKernel.PYTORCH,
                        memory_measure=MemoryMeasure.RESERVED, mlp_up=MlpUp.SPLIT,
                        # torchao's dynamic scaling: each tensor's scale from its own amax (pipesim's tensorwise)
                        fp8_recipe=Fp8Recipe.TENSORWISE if precision is _FP8 else Fp8Recipe.DELAYED,
                        # torchao's Float8Linear: BF16 input and weight saved, no FP8 weight copy kept
                        fp8_linears=Fp8Linears.TORCHAO if precision is _FP8 else Fp8Linears.TRANSFORMER_ENGINE,
                        framework=Framework.TORCHTITAN, fsdp2=True,
                        # its Llama repeated K and V to every query head before SDPA until January 2026
                        kv_repeated=True)


_SEL, _FULL = Recompute.PER_OP, Recompute.FULL  # torchtitan's "selective" is per-op SAC
ROWS = [
    # Table 1: 8B, 8 GPUs, local batch 2, global 16, selective AC (FSDP + torch.compile, + Float8)
    _row(1, "llama3.1-8b", 8, 2, 8192, _BF16, _SEL, 6667, 77.0),
    _row(1, "llama3.1-8b", 8, 2, 8192, _FP8, _SEL, 8532, 76.8),
]
