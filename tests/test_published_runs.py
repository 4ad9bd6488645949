"""pipesim against published measured runs (experiments/published_runs.py): each row's signed error, and the
table's mean, for step time and for memory separately. Nothing is fitted per row. Rows known to miss the
15 % bar are strict xfails that name why, so the day they pass the test says so."""

import json

import pytest

from experiments.p2p_sync_overhead import derived_overhead, sync_gaps
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels
from pipesim.cli.main import main
from pipesim.validation.runs import PublishedRun, cli_args, predict
from pipesim.validation.sources import IN_SAMPLE_RUNS, MEMORY_ONLY_RUNS, MEMORY_RUNS, PUBLISHED_RUNS, module_of


def _key(run):
    """A row's name in KNOWN_STEP_MISSES: its source, configuration, recomputation and sequence length."""
    extra = (f" {run.precision.value}" if run.precision.quantized else "") + (" async-tp" if run.async_tp else "")
    extra += (" sp" if run.sequence_parallel else "") + _elementwise(run) + _flash1(run)
    return f"{run.source} | {run.label} {run.recompute.value} s{run.seq_len or '-'}{extra}"


def _elementwise(run):
    return "" if run.elementwise is ElementwiseKernels.FUSED else f" {run.elementwise.value}"


def _flash1(run):
    """FlashAttention v1's rows share their layouts with FlashAttention-2's (Hagemann et al.'s trials of both): named
    apart. The other kernels' rows never do, and keep the names their reasons were written under."""
    return " flash1" if run.attention is AttentionKernel.FLASH1 else ""


# row key (_key): why the row misses the 15 % bar, as a strict xfail. No in-sample row is here since the P2P
# synchronisation overhead (chip field p2p_sync_overhead) took Qi et al.'s 14.6B interleaved rows from -16 % to
# -6 %. The out-of-sample sources (issue #24) were added without touching any constant; two constants were fitted
# to them since (the Hopper training GEMM ratio, ZeRO-3's overlap share: tests/test_validation_loso.py validates
# them by source left out). Their misses are listed with the measured error, so the day the model improves the
# test says so.
# Regenerated from the current errors by `python -m tests.update_misses` (reasons kept, percents refreshed).
KNOWN_STEP_MISSES: dict[str, str] = {
    # mosaicml2023
    'MosaicML llm-foundry MPT benchmarks, H100 80GB BF16 table | mpt-7b tp1 pp1 m2 b1 1f1b 8×h100 full s65536 eager':
        ("+19%, pipesim too slow: a long sequence on one node with MosaicML's Triton attention, like the"
         ' other long-sequence rows here; within 15% until a step waited for its slowest GPU (+3.6% on 8);'
         ' unexplained'),
    'MosaicML llm-foundry MPT benchmarks, H100 80GB BF16 table | mpt-7b tp1 pp1 m2 b2 1f1b 8×h100 full s32768 eager':
        ("+16%, pipesim too slow: a long sequence on one node with MosaicML's Triton attention, like the"
         ' other long-sequence rows here; within 15% until the GPU spread refit to 0.03 (+4.3% on 8);'
         ' unexplained'),
    'MosaicML llm-foundry MPT benchmarks, A100 80GB table | mpt-30b tp1 pp1 m21 b1 1f1b 8×a100 full s8192 eager':
        '-19%, pipesim too fast: FSDP/ZeRO-3',
    'MosaicML llm-foundry MPT benchmarks, A100 40GB table | mpt-70b tp1 pp1 m1 b2 1f1b 64×a100 full s2048 eager':
        ('-19%, pipesim too fast: FSDP at micro-batch 2 with one microbatch a step; within 15% until the'
         ' presets took the fitted quarter of the per-layer collectives as overlapped (zero3_overlap_share 0'
         ' → 0.25)'),
    # fmsfsdp2024
    'IBM fms-fsdp README, Llama 2 throughput on 128 A100 | llama2-34b tp1 pp1 m1 b8 1f1b 128×a100 full s4096 eager':
        ("+16%, pipesim too slow: FSDP on IBM's A100 cluster at 50 Gb/s a GPU, as the blog's rows of the same"
         ' cluster (pytorch_fsdp_blog2024): collectives beside most of each layer, slowed by the SMs they'
         ' hold; within 15% until the GPU spread refit to 0.03'),
    'IBM fms-fsdp README, Llama 2 throughput on 128 A100 | llama2-70b tp1 pp1 m1 b6 1f1b 128×a100 full s4096 eager':
        ("+15%, pipesim too slow: FSDP on IBM's A100 cluster at 50 Gb/s a GPU, as the blog's rows of the same"
         ' cluster (pytorch_fsdp_blog2024): collectives beside most of each layer, slowed by the SMs they'
         ' hold; within 15% until the GPU spread refit to 0.03'),
    # dao2023
    'Dao 2023, FlashAttention-2, Table 1 | gpt3-1.3b tp1 pp1 m4 b4 1f1b 8×a100 full s8192':
        ('-29%, pipesim too fast: unfused-attention baseline at 8k, micro-batch and full recomputation'
         ' inferred (the paper gives neither)'),
    # narayanan2021_zero3
    ('Narayanan et al. 2021 Table 2 (PTD-P vs ZeRO-3), Megatron-LM on A100 |'
     ' gpt-529.6b tp1 pp1 m1 b4 1f1b 640×a100 full s-'):
        ('-19%, pipesim too fast: DeepSpeed ZeRO-3 (2021) tensor by tensor (modelled): the rest grows with'
         ' the model, not the ranks (175B rows within 14%); bytes moved slower than the ring model,'
         ' unexplained'),
    ('Narayanan et al. 2021 Table 2 (PTD-P vs ZeRO-3), Megatron-LM on A100 |'
     ' gpt-529.6b tp1 pp1 m1 b2 1f1b 1120×a100 full s-'):
        ('-23%, pipesim too fast: DeepSpeed ZeRO-3 (2021) tensor by tensor (modelled): the rest grows with'
         ' the model, not the ranks (175B rows within 14%); bytes moved slower than the ring model,'
         ' unexplained'),
    ('Narayanan et al. 2021 Table 2 (PTD-P vs ZeRO-3), Megatron-LM on A100 |'
     ' gpt-529.6b tp1 pp1 m1 b1 1f1b 2240×a100 full s-'):
        ('-29%, pipesim too fast: DeepSpeed ZeRO-3 (2021) tensor by tensor (modelled): the rest grows with'
         ' the model, not the ranks (175B rows within 14%); bytes moved slower than the ring model,'
         ' unexplained'),
    # mosaicml_small2023
    ('MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, H100 80GB BF16 table |'
     ' mpt-3b tp1 pp1 m2 b1 1f1b 8×h100 full s65536 eager'):
        ("+18%, pipesim too slow: a long sequence on one node with MosaicML's Triton attention, like the"
         ' other long-sequence rows here; within 15% until a step waited for its slowest GPU (+3.6% on 8);'
         ' unexplained'),
    ('MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, H100 80GB BF16 table |'
     ' mpt-3b tp1 pp1 m6 b3 1f1b 8×h100 full s32768 eager'):
        ("+18%, pipesim too slow: a long sequence on one node with MosaicML's Triton attention, like the"
         ' other long-sequence rows here; within 15% until a step waited for its slowest GPU (+3.6% on 8);'
         ' unexplained'),
    ('MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, H100 80GB BF16 table |'
     ' mpt-1b tp1 pp1 m2 b1 1f1b 8×h100 full s65536 eager'):
        ("+18%, pipesim too slow: a long sequence on one node with MosaicML's Triton attention, like the"
         ' other long-sequence rows here; within 15% until a step waited for its slowest GPU (+3.6% on 8);'
         ' unexplained'),
    ('MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, A100 80GB table |'
     ' mpt-760m tp1 pp1 m2 b48 1f1b 8×a100 none s1024 eager'):
        ('-18%, pipesim too fast: measured MFU falls from 57% at 2,048 tokens to 48/45%, unlike every other'
         ' model of the table'),
    ('MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, A100 80GB table |'
     ' mpt-760m tp1 pp1 m2 b96 1f1b 8×a100 none s512 eager'):
        ('-23%, pipesim too fast: measured MFU falls from 57% at 2,048 tokens to 48/45%, unlike every other'
         ' model of the table'),
    ('MosaicML llm-foundry MPT benchmarks up to 3B and at 128-512 GPUs, A100 40GB table |'
     ' mpt-1b tp1 pp1 m1 b10 1f1b 32×a100 none s2048 eager'):
        '-20%, pipesim too fast: measured 15,555 tokens/s/GPU against 19,001-19,085 at 16 and 64 GPUs',
    # glm130b_2022
    'Zeng et al. 2022, GLM-130B, §2.3 and Appendix B.4 | glm-130b tp4 pp8 m176 b1 1f1b 768×a100 full s-':
        ("-15%, pipesim too fast: A100 at 100B+ with full recomputation on DeepSpeed's pipeline engine;"
         " Megatron-LM's own runs of such shapes agree (Korthikanti); mechanism not found (docs/validation-log.md)"),
    # nemo_megatron2022
    ('NeMo Megatron 2022, NeMo-Framework-Launcher README §7.1.2 (DGX A100 80GB) |'
     ' gpt3-175b tp8 pp8 m1024 b2 1f1b 64×a100 selective s- sp'):
        ("-27%, pipesim too fast: NeMo of 2022 at Korthikanti's 175B shape, 1.4x slower than Megatron-LM's"
         " own row; the README's superseded table was 29-38% faster, within 12% of pipesim (the module)"),
    ('NeMo Megatron 2022, NeMo-Framework-Launcher README §7.1.2 (DGX A100 80GB) |'
     ' gpt3-175b tp8 pp8 m512 b2 1f1b 128×a100 selective s- sp'):
        ("-26%, pipesim too fast: NeMo of 2022 at Korthikanti's 175B shape, 1.4x slower than Megatron-LM's"
         " own row; the README's superseded table was 29-38% faster, within 12% of pipesim (the module)"),
    ('NeMo Megatron 2022, NeMo-Framework-Launcher README §7.1.2 (DGX A100 80GB) |'
     ' gpt3-175b tp8 pp8 m256 b2 1f1b 256×a100 selective s- sp'):
        ("-26%, pipesim too fast: NeMo of 2022 at Korthikanti's 175B shape, 1.4x slower than Megatron-LM's"
         " own row; the README's superseded table was 29-38% faster, within 12% of pipesim (the module)"),
    ('NeMo Megatron 2022, NeMo-Framework-Launcher README §7.1.2 (DGX A100 80GB) |'
     ' gpt3-175b tp8 pp8 m128 b2 1f1b 512×a100 selective s- sp'):
        ("-24%, pipesim too fast: NeMo of 2022 at Korthikanti's 175B shape, 1.4x slower than Megatron-LM's"
         " own row; the README's superseded table was 29-38% faster, within 12% of pipesim (the module)"),
    ('NeMo Megatron 2022, NeMo-Framework-Launcher README §7.1.2 (DGX A100 80GB) |'
     ' gpt3-175b tp8 pp8 m64 b2 1f1b 1024×a100 selective s- sp'):
        ("-23%, pipesim too fast: NeMo of 2022 at Korthikanti's 175B shape, 1.4x slower than Megatron-LM's"
         " own row; the README's superseded table was 29-38% faster, within 12% of pipesim (the module)"),
    # flagperf2024
    ('FlagPerf (BAAI) LLM training cases, 2024: llama2_7b-deepspeed (DeepSpeed 0.11.1 ZeRO-3) |'
     ' llama2-7b tp1 pp1 m1 b1 1f1b 8×h800 none s4096 eager'):
        '+17%, pipesim too slow: flagperf2024',
    # mlperf_v51_llama8b
    ('MLPerf Training v5.1 Llama 3.1 8B, Cisco H100 (NeMo FP8, RoCE) | llama3.1-8b tp2 pp1'
     ' m1 b1 1f1b 128×h100 none s8192 fp8 async-tp sp'):
        ('-19%, pipesim too fast: tp 2 on 128 H100 at one microbatch per step, 1.49x faster than tp 1 on 64'
         " where pipesim says 1.81x; its tp 1 row is -5%; the TP overlap's split GEMMs and reserved SMs and"
         ' the small cuBLAS workspace are not modelled; unexplained'),
    # hagemann2023
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp2 pp2 m32 b4 1f1b 64×a100 none s2048 eager-fused-norm'):
        ("-17%, pipesim too fast: Aleph Alpha's framework at tp 2 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp1 pp2 m32 b2 1f1b 64×a100 none s2048 eager'):
        ("-17%, pipesim too fast: Aleph Alpha's framework at tp 1 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp1 pp2 m16 b4 1f1b 64×a100 full s2048 eager'):
        ("-23%, pipesim too fast: Aleph Alpha's framework at tp 1 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp2 pp2 m16 b8 1f1b 64×a100 full s2048 eager'):
        ("-24%, pipesim too fast: Aleph Alpha's framework at tp 2 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp1 pp2 m8 b8 1f1b 64×a100 full s2048 eager'):
        ("-39%, pipesim too fast: Aleph Alpha's framework at tp 1 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp1 pp1 m4 b1 1f1b 128×a100 full s8192 eager'):
        ("-19%, pipesim too fast: Aleph Alpha's framework at tp 1 on 128 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp1 pp4 m32 b1 1f1b 256×a100 none s2048 eager-fused-norm'):
        ("-16%, pipesim too fast: Aleph Alpha's framework at tp 1 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp2 m32 b2 1f1b 256×a100 none s2048 eager-fused-norm'):
        ("-18%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp2 m64 b1 1f1b 256×a100 none s2048 eager-fused-norm'):
        ("-18%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp2 pp2 m32 b1 1f1b 256×a100 none s2048 eager-fused-norm'):
        ("-28%, pipesim too fast: Aleph Alpha's framework at tp 2 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp2 pp2 m32 b1 1f1b 256×a100 none s2048 eager'):
        ("-20%, pipesim too fast: Aleph Alpha's framework at tp 2 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m32 b1 1f1b 256×a100 none s2048 eager-fused-norm'):
        ("-29%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp1 pp2 m16 b1 1f1b 256×a100 full s2048 eager'):
        ("-21%, pipesim too fast: Aleph Alpha's framework at tp 1 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m16 b2 1f1b 256×a100 none s2048 eager-fused-norm'):
        ("-38%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp1 pp2 m8 b2 1f1b 256×a100 full s2048 eager'):
        ("-25%, pipesim too fast: Aleph Alpha's framework at tp 1 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp2 pp1 m16 b1 1f1b 256×a100 full s2048 eager'):
        ("-24%, pipesim too fast: Aleph Alpha's framework at tp 2 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m32 b1 1f1b 256×a100 none s2048 eager'):
        ("-28%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m8 b4 1f1b 256×a100 full s2048 eager'):
        ("-20%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m32 b1 1f1b 256×a100 full s2048 eager'):
        ("-16%, pipesim too fast: Aleph Alpha's framework at tp 4 on 256 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp2 pp2 m32 b1 1f1b 256×a100 none s2048 eager flash1'):
        ("-18%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp2 m32 b2 1f1b 256×a100 none s2048 eager flash1'):
        ("-16%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp1 pp2 m16 b1 1f1b 256×a100 full s2048 eager flash1'):
        ("-21%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp1 pp2 m8 b2 1f1b 256×a100 full s2048 eager flash1'):
        ("-22%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp2 pp1 m16 b1 1f1b 256×a100 full s2048 eager flash1'):
        ("-25%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m32 b1 1f1b 256×a100 none s2048 eager flash1'):
        ("-32%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-30b tp4 pp1 m32 b1 1f1b 256×a100 full s2048 eager flash1'):
        ("-16%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-65b tp8 pp8 m1024 b1 1f1b 128×a100 full s2048 eager'):
        ("-17%, pipesim too fast: Aleph Alpha's framework at tp 8 on 128 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-65b tp8 pp8 m1024 b1 1f1b 128×a100 full s2048 eager flash1'):
        ("-18%, pipesim too fast: Aleph Alpha's framework with FlashAttention v1 on 256 A100 (30B) or 128"
         " (65B), as its FlashAttention-2 rows of the same layouts; the source's rows grow more optimistic"
         ' with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp8 pp4 m256 b1 1f1b 64×a100 none s8192 sp eager-fused-norm'):
        ("-18%, pipesim too fast: Aleph Alpha's framework at tp 8 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp8 pp4 m128 b2 1f1b 64×a100 none s8192 eager-fused-norm'):
        ("-17%, pipesim too fast: Aleph Alpha's framework at tp 8 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    ('Hagemann et al. 2023, layout ablation on DGX A100 (Aleph Alpha; repository spreadsheets) |'
     ' aa-llama-13b tp8 pp4 m256 b1 1f1b 64×a100 none s8192 eager-fused-norm'):
        ("-19%, pipesim too fast: Aleph Alpha's framework at tp 8 on 64 A100; the source's rows grow more"
         ' optimistic with tp and GPU count; mechanism not found (its module)'),
    # smol2025
    ('Hugging Face 2025, The Smol Training Playbook (nanotron on AWS p5 H100): SmolLM3 stage 1 |'
     ' smollm3-3b tp2 pp1 m1 b3 1f1b 384×h100 none s4096 sp eager-activation'):
        ("-16%, pipesim too fast: nanotron's SmolLM3 run on 384 H100 at tp 2, one microbatch a step, where"
         ' the step is 88% compute in pipesim; its 1B baseline on one node is -12%; unexplained (the module)'),
    # internevo2023
    ('InternEvo 2023, InternLM-7B training performance on A100 (doc/en/train_performance.md, FLOPS Testing) |'
     ' internlm-7b tp1 pp1 m1 b2 1f1b 1024×a100 none s2048 eager-activation flash1'):
        ('-25%, pipesim too fast: one of the short steps on 512-1,024 A100 over four 100 Gb/s NICs a node,'
         ' whose gradient all-reduce outlasts the backward (1,024 GPUs: the step measures alike with and'
         " without checkpointing); pipesim's ring hides most of it; unexplained (the module)"),
    ('InternEvo 2023, InternLM-7B training performance on A100 (doc/en/train_performance.md, FLOPS Testing) |'
     ' internlm-7b tp1 pp1 m2 b2 1f1b 1024×a100 none s2048 eager-activation flash1'):
        ('-20%, pipesim too fast: one of the short steps on 512-1,024 A100 over four 100 Gb/s NICs a node,'
         ' whose gradient all-reduce outlasts the backward (1,024 GPUs: the step measures alike with and'
         " without checkpointing); pipesim's ring hides most of it; unexplained (the module)"),
    # megatron_llama2023
    ('Megatron-LLaMA 2023 (Alibaba), README: LLaMA-13B on A100 80GB: DistributedOptimizer | llama2-13b tp2'
     ' pp1 m2 b4 1f1b 512×a100 selective s2048 sp eager-fused-norm flash1'):
        ("-16%, pipesim too fast: Megatron-LM's distributed optimizer of 2023 on 256-512 A100 over four 200"
         ' Gb/s NICs a node, its reduce-scatter and all-gather after the passes; measured 1.3 s a step slower'
         " than the overlapped optimizer's rows, pipesim 0.5 s: the network's bytes take longer than the"
         " NICs' line rate (the module)"),
    # pytorch_fsdp_blog2024
    ('PyTorch blog 2024 (IBM and Meta), Maximizing training throughput using PyTorch FSDP, Table 1 |'
     ' llama2-34b tp1 pp1 m1 b2 1f1b 128×a100 full s4096 eager'):
        ("+16%, pipesim too slow: FSDP on IBM's A100 cluster at the blog's 400 Gb/s a node, as its 70B row"
         ' (below); within 15% until the GPU spread refit to 0.03'),
    ('PyTorch blog 2024 (IBM and Meta), Maximizing training throughput using PyTorch FSDP, Table 1 |'
     ' llama2-70b tp1 pp1 m1 b2 1f1b 128×a100 full s4096 eager'):
        ("+22%, pipesim too slow: FSDP on IBM's A100 cluster at the blog's 400 Gb/s a node (read as the"
         " node's), two 4k sequences a GPU: on this network the collectives run beside most of each layer,"
         ' which pipesim slows by the SMs they hold all that while (comm_sm_share), where the team reports'
         ' them hidden (the module)'),
    ('PyTorch blog 2024 (IBM and Meta) on torch.compile, Maximizing Training Throughput Using PyTorch FSDP and'
     ' Torch.compile, Tables 1 and 2 | llama2-34b tp1 pp1 m1 b2 1f1b 128×a100 full s4096'):
        ("+22%, pipesim too slow: the torch.compile runs on IBM's A100 cluster at the blog's 400 Gb/s a node"
         " (read as the node's), two 4k sequences a GPU: on this network the collectives run beside most of"
         ' each layer, which pipesim slows by the SMs they hold all that while (comm_sm_share), where the'
         ' team reports them hidden (the module)'),
    ('PyTorch blog 2024 (IBM and Meta) on torch.compile, Maximizing Training Throughput Using PyTorch FSDP and'
     ' Torch.compile, Tables 1 and 2 | llama2-70b tp1 pp1 m1 b2 1f1b 128×a100 full s4096'):
        ("+23%, pipesim too slow: the torch.compile runs on IBM's A100 cluster at the blog's 400 Gb/s a node"
         " (read as the node's), two 4k sequences a GPU: on this network the collectives run beside most of"
         ' each layer, which pipesim slows by the SMs they hold all that while (comm_sm_share), where the'
         ' team reports them hidden (the module)'),
    # yeung2024
    ('Yeung et al. 2024, Balancing Pipeline Parallelism with Vocabulary Parallelism, artifact (8 A100, pp 8):'
     ' baseline | vocab-4b-v256k tp1 pp8 m128 b1 1f1b 8×a100 none s2048'):
        ("-35%, pipesim too fast: the 256k vocabulary's baseline at sequence 2048, whose measured MFU (17.3 %) is"
         ' well under the same vocabulary at 4096 (27.6 %, predicted within 3 %) and whose reserved peak is above'
         " it; pipesim's last stage sets the pace as at 4096; unexplained (the module)"),
    # mlperf_v51_b200
    ('MLPerf Training v5.1 Llama 3.1 405B and 8B on DGX B200 (University of Florida HiPerGator; NeMo 25.09'
     ' FP8) | llama3.1-8b tp1 pp1 cp2 m1 b1 1f1b 256×b200 none s8192 fp8'):
        ('-20%, pipesim too fast: cp 2 at one sequence per data-parallel pair (0.19-0.22 s steps); the same'
         ' code at cp 1 is within 6%, its 405B rows within 6%; from 128 to 256 GPUs the step grows 15% where'
         " pipesim's barely moves; unexplained (docs/validation-log.md)"),
    # mlperf_v51_blackwell_ultra
    ('MLPerf Training v5.1 on NVIDIA Theia GB300 NVL72 | llama3.1-8b tp2 pp1 cp4 m1 b1'
     ' 1f1b 512×gb300 none s8192 fp8 async-tp sp'):
        ('-39%, pipesim too fast: 8B on 512 GB300 at tp 2 x cp 4, an eighth of a sequence a GPU (0.085 s'
         ' steps); the same code at cp 2 on 72 GPUs is within 2%; the strong-scaling end where the B200 cp 2'
         ' rows also miss most (its 256-GPU row -24%); what grows is not modelled; unexplained'),
    ("MLPerf Training v5.1 on NVIDIA Tyche GB200 NVL72 in FP8 at the GB300 runs' layouts | llama3.1-8b"
     ' tp2 pp1 cp4 m1 b1 1f1b 512×gb200 none s8192 fp8 async-tp sp'):
        ("-42%, pipesim too fast: the GB300 512-GPU run's twin on GB200 (0.089 s steps), missed as much: the"
         " strong-scaling miss is not the chip's; unexplained"),
}


# row key: why its peak memory misses the 15 % bar (strict xfail), for the out-of-sample sources.
KNOWN_MEMORY_MISSES: dict[str, str] = {
    # yeung2024
    ('Yeung et al. 2024, Balancing Pipeline Parallelism with Vocabulary Parallelism, artifact (8 A100, pp 8):'
     ' baseline | vocab-4b-v256k tp1 pp8 m128 b1 1f1b 8×a100 none s2048'):
        ("-20%, pipesim too low: the same row as its step miss: its reserved peak (35.6 GiB) is above the 4096"
         " run's (33.9 GiB, predicted within 4 %) at half the activations, as if the allocator had fragmented;"
         ' every other row of the source within 5 %; unexplained'),
}

# row key: why pipesim puts a run that ran over its GPU's memory by more than the memory band (strict xfail): every
# published run fitted as it ran, so each of these is a miss of the memory model or of the settings the row infers.
KNOWN_OVER_CAPACITY: dict[str, str] = {
    # llama3_2024
    ('Llama Team 2024, The Llama 3 Herd of Models, Table 4 | llama3.1-405b tp8 pp16'
     ' v8 m32 b1 interleaved 8192×h100 none s- sp'):
        ("89 GiB of 79.6: Megatron's interleaved schedule, which pipesim runs, holds 17.6 microbatches' share"
         ' in flight on rank 1; Meta ran its own (§3.3.2: the contiguous microbatches tunable, stage inputs'
         ' and outputs freed early), which holds fewer'),
    # nemo2407
    ('NVIDIA NeMo 24.07 performance summary (DGX-H100 FP8) | gpt3-20b tp2 pp1 m4'
     ' b2 1f1b 64×h100 none s- fp8 async-tp sp'):
        ("85 GiB of 79.6: just beyond the band: an FP32 gradient buffer (the launcher's default"
         " grad_sync_dtype) and Transformer Engine's FP8 weight copy beside the BF16 weights; what NeMo's"
         ' Apex distributed Adam kept of them is not stated; unexplained'),
    # dao2023
    'Dao 2023, FlashAttention-2, Table 1 | gpt3-2.7b tp1 pp1 m4 b4 1f1b 8×a100 none s8192':
        ("113 GiB of 80: the config's micro-batch (4 on an 80 GB GPU, gpt3-2.7B-flash-8k.yaml) and no"
         " checkpointing, as the paper says; Korthikanti et al.'s 34 bytes a token a hidden unit a layer (92"
         " GiB) exceed the GPU alone, and flash-attn's GPT block keeps as much by its code (each fused"
         " dropout-add-LayerNorm's FP32 sum and mask, the fused MLP's input, pre-activation and output): the"
         ' run must have used a smaller micro-batch or some recomputation; unexplained'),
    'Dao 2023, FlashAttention-2, Table 1 | gpt3-2.7b tp1 pp1 m4 b4 1f1b 8×a100 none s8192 flash1':
        ('113 GiB of 80: the FlashAttention-2 row of the same configuration (above), run with FlashAttention'
         ' v1, whose memory is the same; unexplained'),
}


def _miss(run):
    return KNOWN_STEP_MISSES.get(_key(run))


def _over_capacity(run):
    return KNOWN_OVER_CAPACITY.get(_key(run))


def _memory_miss(run):
    return KNOWN_MEMORY_MISSES.get(_key(run))


def _id(run):
    seq = f"-s{run.seq_len}" if run.seq_len else ""
    extra = (f"-{run.precision.value}" if run.precision.quantized else "") + ("-async_tp" if run.async_tp else "")
    return (f"{run.source.split(' ')[0]}-{run.label.replace(' ', '_')}-{run.schedule}-{run.recompute.value}{seq}"
            f"{extra}{_flash1(run).replace(' ', '-')}")


_COMPARISONS: dict[int, object] = {}


def _comparison(run):
    """Each row predicted once per process, on first use: a worker predicts only the rows it tests (the ZB-2p
    rows synthesise zb-auto for their costs, the slow part), the table test all of them."""
    if id(run) not in _COMPARISONS:
        _COMPARISONS[id(run)] = predict(run)
    return _COMPARISONS[id(run)]


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=_miss(r)))
                                 if _miss(r) else r for r in PUBLISHED_RUNS], ids=_id)
def test_step_time_within_15_percent(run):
    error = _comparison(run).step_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=_memory_miss(r)))
                                 if _memory_miss(r) else r for r in MEMORY_RUNS], ids=_id)
def test_memory_within_15_percent(run):
    error = _comparison(run).memory_error
    assert abs(error) <= 0.15, f"{run.label}: {error:+.1%}"


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=_over_capacity(r)))
                                 if _over_capacity(r) else r for r in PUBLISHED_RUNS + MEMORY_ONLY_RUNS], ids=_id)
def test_a_run_that_ran_fits_its_gpu_within_the_memory_band(run):
    """Every published run ran, so it fitted its GPU: pipesim's allocated peak may exceed the capacity by no more
    than the memory band (its 90/90 bound of |error| over the published peaks). A free check on every row, most of
    which publish no memory."""
    memory = _comparison(run).report.memory
    over = memory.over_capacity_beyond_band
    assert not over, f"{run.label}: {over[0].total / 2**30:.1f} GiB of {memory.capacity_gib:g}"


def test_hagemanns_trials_that_ran_fit_and_most_that_ran_out_of_memory_do_not():
    """Hagemann et al. 2023's spreadsheets mark every trial that stopped with "OOM Error" (339 of the FlashAttention-2
    trials, 121 of FlashAttention v1's) beside the 352 that ran: pipesim's allocated peak fits the A100's 80 GB for
    all that ran but one (65B at tp 8 × pp 4, micro-batch 4, on 64 GPUs: just over) and is over it for 79 % of the
    out-of-memory ones; the rest are mostly 8k-token layouts at micro-batch 2–4 that pipesim puts at 50–79 GiB
    (docs/validation-log.md)."""
    from pipesim.validation.sources.hagemann2023 import ROWS, out_of_memory_runs

    ran_over = [r for r in ROWS if _comparison(r).report.memory.over_capacity]
    assert [(r.label, r.micro_batch) for r in ran_over] == [("aa-llama-65b tp8 pp4 m256 b4 1f1b 64×a100", 4)]
    oom = out_of_memory_runs()
    over = [r for r in oom if predict(r).report.memory.over_capacity]
    assert len(oom) == 339 + 121 and len(over) / len(oom) >= 0.75


def test_flash_attention_v1_costs_hagemanns_layouts_what_it_measured_against_flash_attention_2():
    """Hagemann et al. ran 102 layouts with both FlashAttention v1.0.8 and FlashAttention-2 (without the RMS
    kernel both): v1's step over v2's is, per sheet, the ratio pipesim gets from Dao 2023's kernel benchmark alone
    (--attention flash1, nothing fitted to these rows): each sheet's median within 0.05 of the measured one (within
    0.025 but on the 13B 2k sheet, whose v1 trials are of an earlier batch, ids 97,399-104,144 against its v2's
    131,6xx-132,4xx, and scatter ×0.61-1.23), and the gap two to five times wider at 8k tokens than at 2k, as
    measured. Without the ratio (v1 at v2's rate) every sheet's prediction is ×1.00, and the 8k sheets miss by
    0.10-0.13."""
    import statistics

    from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels
    from pipesim.validation.sources.hagemann2023 import ROWS

    def layout(r):
        return r.model, r.seq_len, r.gpus, r.tp, r.pp, r.micro_batch, r.recompute, r.sequence_parallel

    v1 = {layout(r): r for r in ROWS if r.attention is AttentionKernel.FLASH1}
    v2 = {layout(r): r for r in ROWS if r.attention is AttentionKernel.FUSED
          and r.elementwise is ElementwiseKernels.EAGER}
    sheets: dict[tuple, list[tuple[float, float]]] = {}
    for key in v1.keys() & v2.keys():
        measured = v1[key].step_s / v2[key].step_s
        predicted = _comparison(v1[key]).report.step_time / _comparison(v2[key]).report.step_time
        sheets.setdefault(key[:3], []).append((measured, predicted))
    assert sum(map(len, sheets.values())) == 102 and len(sheets) == 5
    medians = {sheet: (statistics.median(m for m, _ in pairs), statistics.median(p for _, p in pairs))
               for sheet, pairs in sheets.items()}
    for sheet, (measured, predicted) in medians.items():
        assert abs(predicted - measured) <= (0.05 if sheet == ("aa-llama-13b", 2048, 64) else 0.025), sheet
    long, short = ([p - 1 for sheet, (_, p) in medians.items() if sheet[1] == seq] for seq in (8192, 2048))
    assert min(long) > 1.5 * max(short)


def test_the_layout_flagperf_ran_out_of_memory_does_not_fit_and_its_others_do():
    """FlagPerf's A800 ablation of Llama 3 8B (pipesim.validation.sources.flagperf2024): the one layout its README
    marks OOM (pp 1 × dp 8, ZeRO-1, no recomputation, 8,192 tokens) is predicted over the 80 GB, every layout
    that ran under it (the README's memory column is the device's, context and allocator reserve included, so
    only the verdict is compared)."""
    from dataclasses import replace

    from pipesim.validation.sources.flagperf2024 import A800_OUT_OF_MEMORY, ROWS

    a800 = [r for r in ROWS if r.chip == "a800-80gb" and r.model == "llama3.1-8b"]
    assert len(a800) == 7 and all(_comparison(r).report.memory.peak.total / 2**30 < 80 for r in a800)
    pp, dp, tp = A800_OUT_OF_MEMORY
    oom = predict(replace(a800[0], pp=pp, tp=tp, gpus=pp * dp * tp))
    assert oom.run.dp == dp and oom.report.memory.peak.total / 2**30 > 80


def test_opt_175b_fits_only_with_its_saved_activations_split_over_tp():
    """OPT-175B trained on 80 GB A100s (pipesim.validation.sources.opt175b_2022) with metaseq's
    --distribute-checkpointed-activations: pipesim fits it at about 58 GiB, all 96 layers' gathered FP16 weights
    held from the forward to the backward (--no-reshard-after-forward: 40.7 GiB) beside each layer's input split
    over the 8 tp ranks; kept whole, the inputs alone would take 36 GiB and the step would not fit. The
    batch is the launcher's: 8 sequences on each of 124 data-parallel ranks, one microbatch a step."""
    from dataclasses import replace

    from pipesim.validation.sources.opt175b_2022 import ROWS

    (row,) = ROWS
    assert row.dp == 124 and row.microbatches == 1 and row.global_batch * 2048 == 2_031_616
    split = _comparison(row).report.memory
    assert 50 < split.peak.total / 2**30 < 70 and not split.over_capacity
    whole = predict(replace(row, distribute_saved_activations=False)).report.memory
    assert whole.over_capacity
    assert "add --sequence-parallel (or --distribute-saved-activations)" in " ".join(whole.warnings())


@pytest.mark.parametrize("module", ["mlperf_v30_gpt3", "mlperf_v31_gpt3", "mlperf_v4_gpt3",
                                    "mlperf_v50_llama405b", "mlperf_v51_llama8b", "mlperf_v51_h200"])
def test_the_mlperf_rows_reproduce_what_their_logs_state(module):
    """MLPerf's logs state the global batch and the gradient accumulation steps; each row's layout
    (tp × pp × cp × dp at its micro-batch size) must give that many microbatches per pipeline on that many GPUs, and its
    gradients are reduced in 16 bits, as the submissions' optimizers set (grad_sync_dtype: bf16 in Apex's
    distributed Adam, grad_reduce_in_fp32=False in Megatron-Core's)."""
    from importlib import import_module

    source = import_module(f"pipesim.validation.sources.{module}")
    rows = source.ROWS
    assert [r.microbatches for r in rows] == source.LOGGED_MICROBATCHES and len(rows) == len(source.LOGGED)
    assert all(r.dp * r.tp * r.pp * r.cp == r.gpus and r.fp16_grads for r in rows)


def test_memory_only_rows_have_no_step_error_and_every_row_publishes_something():
    assert MEMORY_ONLY_RUNS and all(not r.measures_step and r.memory_gib for r in MEMORY_ONLY_RUNS)
    assert all(r.measures_step for r in PUBLISHED_RUNS)  # the step-time table
    comparison = _comparison(MEMORY_ONLY_RUNS[0])
    assert comparison.step_error is None and comparison.published_step_s is None
    assert comparison.report.step_time > 0  # still simulated, only not compared
    with pytest.raises(ValueError, match="neither a throughput nor a memory"):
        PublishedRun("s", "gpt3-1.3b", "a100-80gb", 8, 8)
    with pytest.raises(ValueError, match="2 throughputs"):
        PublishedRun("s", "gpt3-1.3b", "a100-80gb", 8, 8, step_s=1.0, tokens_per_gpu=1e3)


def test_the_p2p_sync_overhead_is_the_one_qi_et_al_measure():
    """The chips' constant is the median gap per synchronising call between Qi et al.'s Table 4 and Table 9."""
    assert derived_overhead() == pytest.approx(CHIP_PRESETS["a100-80gb"].p2p_sync_overhead, abs=0.05e-3)
    gaps = [gap.per_call_ms for gap in sync_gaps()]
    # of one size, and present in every cell but one (zb-28.3b's ZB-H1: -0.08 ms at the spread's 0.025, -0.23 ms at
    # its refit to 0.03)
    assert all(-0.3 < g < 3 for g in gaps) and sum(g > 0 for g in gaps) >= len(gaps) - 1


def test_passes_match_qi_et_al_table_9_profile():
    """Per pass of one stage, pipesim's forward, input backward and weight backward against the per-pass profile
    Qi et al. 2024 published (Table 9: four GPT models on A100, Megatron-LM's unfused attention, sequence 1024),
    each within 8 % (an in-sample source: the P2P constants were derived from this profile; no kernel constant
    was fitted to it). Unfused attention is half the 1.5B model's forward here: its batched products are timed per
    (sequence, head) product, and that is what these measured passes agree with (tiling the whole batch as one
    grid instead takes the products a sixth of that time and puts every forward 13-26 % under the profile: the
    products of these skinny shapes, or something beside them, cost what the per-product count says)."""
    from pipesim.analytic.kernels import layer_times
    from pipesim.analytic.layout import AttentionKernel, Layout
    from pipesim.analytic.model_presets import MODEL_PRESETS
    from pipesim.synth.paper import PAPER_ROWS, QI_TABLE4

    chip = CHIP_PRESETS["a100-80gb"]
    for name in ("1.5B", "6.2B", "14.6B", "28.3B"):
        pp, micro_batch, _, _ = QI_TABLE4[f"zb-{name.lower()}"]
        model = MODEL_PRESETS[f"zb-{name.lower()}"].with_shape(1024, micro_batch)
        layers = (model.layers + 2) // pp  # the paper's stages: the embedding and the head count as layers
        one = layer_times(model, Layout(pp=pp, microbatches=pp, attention=AttentionKernel.UNFUSED), chip)
        row = next(r for r in PAPER_ROWS if r.model == name)
        for predicted, measured in ((one.forward, row.forward), (one.backward_input, row.backward_input),
                                    (one.backward_weight, row.backward_weight)):
            assert layers * predicted * 1e3 == pytest.approx(measured, rel=0.08), name


def test_table_size_and_mean_errors():
    """The in-sample sources (those the constants were chosen against) hold the 8 % bound; the out-of-sample
    sources' means are reported by experiments/published_runs.py, not bounded (issue #24)."""
    comparisons = [_comparison(run) for run in IN_SAMPLE_RUNS]
    steps = [abs(c.step_error) for c in comparisons]
    memory = [abs(c.memory_error) for c in comparisons if c.memory_error is not None]
    assert len(steps) >= 20 and len(memory) >= 20
    assert sum(steps) / len(steps) <= 0.08
    assert sum(memory) / len(memory) <= 0.08


def test_every_row_has_a_source_module_and_a_unique_key():
    rows = PUBLISHED_RUNS + MEMORY_ONLY_RUNS
    assert all(module_of(run) for run in rows)
    assert len({_key(run) for run in rows if module_of(run) not in {"qi2024"}}) \
        == sum(module_of(run) != "qi2024" for run in rows)
    keys = {_key(run) for run in rows}
    assert set(KNOWN_STEP_MISSES) <= keys and set(KNOWN_MEMORY_MISSES) <= keys  # no stale entries


@pytest.mark.parametrize("run", PUBLISHED_RUNS[::10] + MEMORY_ONLY_RUNS, ids=_id)
def test_every_configuration_is_expressible_on_the_command_line(run, capsys):
    assert main([*cli_args(run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = _comparison(run).report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)


def test_smollm3s_row_is_the_configuration_it_published(capsys):
    """The smol2025 source's SmolLM3 row states stage1_8T.yaml's layout field by field; `simulate --config` on the
    published file (its layout, kernel and batch fields, in pipesim/validation/data) gives the same prediction."""
    from importlib.resources import files

    from pipesim.validation.sources.smol2025 import ROWS

    config = files("pipesim.validation.data") / "smollm3_stage1.yaml"
    assert main(["simulate", "--config", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["model_report"]
    expected = _comparison(ROWS[0]).report
    assert report["step_time_s"] == pytest.approx(expected.step_time, rel=1e-9)
    assert report["memory"]["peak_gib"] == pytest.approx(expected.memory.peak.total / 2**30, rel=1e-9)
    assert ROWS[0].global_batch * 4096 == 2_359_296  # the checkpoints' card: tokens a step
