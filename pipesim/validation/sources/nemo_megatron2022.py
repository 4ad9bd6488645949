"""NVIDIA NeMo Megatron (NeMo-Framework-Launcher README, §7.1.2 "Training Performance Results", September 2022):
GPT-3 5B and 175B training throughput on DGX SuperPOD A100 80GB, tokens per second over 1–32 and 8–128 nodes.

Stated (README at commit 3579cdb3, 7 September 2022, the table set by a2b2f83a the day before): DGX A100 80GB
nodes of 8 GPUs; GPT-3 5B on 1, 2, 4, 8, 16 and 32 nodes (40,345 … 1,159,288 tokens/s in all), GPT-3 175B on
8, 16, 32, 64 and 128 nodes (7,500 … 109,684 tokens/s); "near-linear scaling".

Stated by the launcher's training configs of the same commit (``conf/training/gpt3/5b.yaml`` and ``175b.yaml``),
taken as the runs' settings: sequence 2048, global batch 2048 sequences, BF16 with FP32 master weights
(``megatron_amp_O2``), gradient accumulation fused into the weight-gradient GEMMs; 5B: tp 1, pp 1, micro-batch
2, activation checkpointing "block" over 0 layers (none recomputed); 175B: tp 8, pp 8, micro-batch 2, sequence
parallelism, selective recomputation, no virtual pipeline (1F1B); both with Apex's ``distributed_fused_adam``.

Stated by NeMo's code of the time (``megatron_gpt_model.py`` at 193a0c3216, August 2022, "Add support for Apex
distributed Adam optimizer with GPT-3"): with the distributed Adam and neither pipeline nor sequence parallelism
(5B), every microbatch but the last runs under the optimizer's ``no_sync`` (gradients summed into a full-size
contiguous buffer) and the reduce-scatter overlaps the last backward; with either (175B), "overlapped
communication interferes with grad reductions", so ``overlap_grad_sync = False``: the reduce-scatter after the
pipeline. So in time the optimizer is a ZeRO-1 (``--zero 1``, one reduce-scatter and one all-gather a step;
``--overlap-grad-reduce`` for 5B only), although Apex's class shards gradients too (ZeRO-2, its docstring) once
they are reduced.

Inferred: attention with the score matrix materialised and Megatron's fused softmax (``--attention unfused``:
2022, before FlashAttention reached NeMo), dropout 0.1 (the configs' ``hidden_dropout``), the vocabulary padded
to 128·tp (the ``gpt3-5b`` and ``gpt3-175b`` presets); the parameter all-gather after the step, not overlapped;
blocking pipeline sends (no interleaving, so nothing to overlap them with in Megatron's
1F1B of the time); the standard DGX A100 network (the ``a100-80gb`` preset). Uncertain: that the published runs
used these configs unchanged, and NeMo's software of that month (its Megatron-core was Megatron-LM's mid-2022
code: Korthikanti et al.'s sequence parallelism and selective recomputation, both in these configs). pipesim puts
the 5B rows at 80.6 GiB per GPU on one node (74.5 GiB on eight), above the 79.6 available: its unfused-attention
activations (5·a·s²·b bytes a layer, Korthikanti et al.) or the gradient buffer's 4 bytes may be more than that
software kept.

Known miss: the 175B rows are 30–32 % too fast. Korthikanti et al.'s 175B row (Megatron-LM of 2022, the same
shape, tp 8 × pp 8, sequence parallelism, selective recomputation, 64 A100s; in sample, within 4 %) measured
149 tokens/s per GPU with an 11 % pipeline bubble; these rows measure 117 with none (1,024 microbatches at 8
nodes): the same model and chip, 1.4× slower in NeMo of the same months. Mechanism not found. The README's
own earlier 175B table, which this one replaced on 7 September 2022 (1f1e6be5), gave 20,642 / 38,025 /
141,306 tokens/s on 16 / 32 / 128 nodes, 29–38 % more per GPU than the new table at the same node counts, and
pipesim is within 6–12 % of those (too fast); which configuration either table measured is not stated, and
only the table the README kept is used here. So these rows say less about the model than their number
suggests: the source disagrees with itself by as much as pipesim disagrees with it. One setting would account
for the gap: had the new table been measured with full recomputation, pipesim would be −7…−11 % (−9…−11 %
without sequence parallelism). No config at hand sets it (the README's commit: selective; the launcher's April
2022 175B config, before release 22.06 made sequence parallelism and selective recomputation the default:
micro-batch 1 and one layer per stage checkpointed), so the rows keep selective.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to.
"""

from pipesim.analytic.layout import AttentionKernel, Recompute, ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "NeMo Megatron 2022, NeMo-Framework-Launcher README §7.1.2 (DGX A100 80GB)"

_GPUS_PER_NODE, _BATCH, _SEQ = 8, 2048, 2048
_COMMON = dict(micro_batch=2, attention=AttentionKernel.UNFUSED, zero=ZeroStage.OPTIMIZER)


def _row(model: str, nodes: int, tokens_per_s: float, **layout) -> PublishedRun:
    gpus = nodes * _GPUS_PER_NODE
    return PublishedRun(SOURCE, model, "a100-80gb", gpus, _BATCH, tokens_per_gpu=tokens_per_s / gpus,
                        **_COMMON, **layout)


ROWS = [_row("gpt3-5b", nodes, tokens, overlap_grad_reduce=True) for nodes, tokens in
        [(1, 40345), (2, 79815), (4, 161754), (8, 312774), (16, 659481), (32, 1159288)]]
ROWS += [_row("gpt3-175b", nodes, tokens, tp=8, pp=8, sequence_parallel=True, recompute=Recompute.SELECTIVE)
         for nodes, tokens in [(8, 7500), (16, 14950), (32, 29537), (64, 58211), (128, 109684)]]
