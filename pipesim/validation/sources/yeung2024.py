"""Yeung et al. 2024, "Balancing Pipeline Parallelism with Vocabulary Parallelism" (Sea AI Lab; MLSys 2025), the
full experiment of its artifact (sail-sg/VocabularyParallelism at 6191c3b: ``artifact/README.md``, its results
``artifact/example-results/full-exp.txt``, "the 2 rows in Table 5 ... of the paper" at 8 GPUs): a 4B GPT on one
server of eight A100 at pp 8, 1F1B, at four vocabularies and two sequence lengths, MFU and peak memory.

What it tests: the output layer and its loss on the last pipeline stage. At 256k tokens of vocabulary the head is
as much work as several transformer layers, so the last stage sets the pace of every microbatch (MFU 47.5 % at a 32k
vocabulary, 17.3 % at 256k, sequence 2048); "redis" moves transformer layers off the last stage to balance it.

Stated (the artifact's ``exp_one_host.csv``, ``full_exp.sh``, ``pretrain_gpt.sh`` and
``show_result_full_exp.py``): 32 layers of 3072, 24 heads, MLP 12288, vocabularies 32,000, 64,000, 128,000 and
256,000 (presets ``vocab-4b-v32k`` … ``vocab-4b-v256k``), sequence 2048 and 4096, micro-batch 1, global batch 128
(128 microbatches), tp 1, pp 8, dp 1 on 8 GPUs; Megatron-Core's GPT (the layer redistribution asserts MCore models),
``--untie-embeddings-and-output-weights``, ``--use-flash-attn``, ``--use-distributed-optimizer`` (at dp 1 nothing
to shard), dropout 0, ``--fp16`` (A100's FP16 and BF16 tensor rates are the same 312 TFLOP/s; pipesim runs it as
BF16). The baseline splits the layers 4 a stage, the embedding on the first, the head and loss on the last;
``--enable-layer-redistribution --final-stage-num-layers N`` (N = 0, 2, 3 for 256k, 128k, 64k; 4 at 32k, the
baseline's split, so its two 32k "redis" rows are not added again) leaves N layers on the last stage and spreads
the rest as ``get_num_layers_to_build`` does: ``(32 − N) // 7`` a stage, the remainder one each on the stages
just before the last. The measurement: iteration 10's "elapsed time per iteration" turned into MFU by the
script's own count, ``3 · (2bshv + L · (8bsh² + 4bs²h + 4bsh·f))`` over pp · 312 TFLOP/s, from which each row's
step time is recovered exactly; the peak memory is the largest rank's ``max reserved`` of Megatron's
``report_memory`` (MiB) over 1024: GiB, the caching allocator's reserved peak.

Inferred: the A100 SXM 80GB (the artifact says "8 A100 GPUs"; Qi et al.'s, the same lab's, are the SXM 80GB) and
the ``a100-80gb`` preset; FlashAttention-2 (NGC PyTorch 24.03, the artifact's container); blocking pipeline
sends, the step synchronised at its end (no post-validation flag in the script).

Not used: the vocabulary-parallel methods (vocab-1, vocab-2, interlaced), which pipesim does not model.

The same lab, the same Megatron-LM fork and, inferred, the same cluster as Qi et al. 2024 (in sample for the P2P
synchronisation overhead derived from its Table 4), so validation leaves the two out together
(:data:`~pipesim.validation.sources.PLATFORM_OF`). Gathered after every constant was fixed, and predicted before
anything was changed: step −10.5 … −0.3 %, but the 256k baseline at sequence 2048 (−35 %, whose MFU, 17.3 %, is
well under the same vocabulary's 27.6 % at 4096, and whose reserved peak, 35.6 GiB, is above it); memory +2 … +4 %
but that row (−20 %).
"""

from pipesim.analytic.allocator import MemoryMeasure
from pipesim.analytic.layout import ZeroStage
from pipesim.validation.runs import PublishedRun

SOURCE = "Yeung et al. 2024, Balancing Pipeline Parallelism with Vocabulary Parallelism, artifact (8 A100, pp 8)"
_PP, _LAYERS, _HIDDEN, _MLP, _BATCH = 8, 32, 3072, 12288, 128
_A100_TFLOPS = 312e12
# (sequence, vocabulary) → (baseline MFU %, redis MFU %, baseline peak GiB, redis peak GiB), full-exp.txt
_RESULTS = {
    (2048, 32000): (47.52, 47.52, 16.01, 16.01), (2048, 64000): (40.82, 49.15, 17.74, 17.74),
    (2048, 128000): (33.70, 44.12, 21.00, 21.00), (2048, 256000): (17.29, 38.21, 35.56, 27.63),
    (4096, 32000): (52.82, 52.81, 22.23, 22.23), (4096, 64000): (45.78, 53.81, 23.98, 23.98),
    (4096, 128000): (37.13, 49.56, 27.22, 27.22), (4096, 256000): (27.63, 42.45, 33.86, 33.72),
}
_FINAL_STAGE_LAYERS = {32000: 4, 64000: 3, 128000: 2, 256000: 0}  # exp_one_host.csv's redis rows


def step_seconds(seq: int, vocab: int, mfu_percent: float) -> float:
    """The step time the artifact's MFU stands for (``calculate_mfu`` inverted)."""
    b, s, h, f = _BATCH, seq, _HIDDEN, _MLP
    flop = 3 * (2 * b * s * h * vocab + _LAYERS * (8 * b * s * h * h + 4 * b * s * s * h + 4 * b * s * h * f))
    return flop / _PP / (mfu_percent / 100 * _A100_TFLOPS)


def redistributed(final_stage_layers: int) -> tuple[int, ...]:
    """Layers per stage under ``--final-stage-num-layers`` (the fork's ``get_num_layers_to_build``)."""
    rest = _LAYERS - final_stage_layers
    stages = [rest // (_PP - 1)] * _PP
    for rank in range(_PP - 2, _PP - 2 - rest % (_PP - 1), -1):
        stages[rank] += 1
    stages[-1] = final_stage_layers
    return tuple(stages)


def _row(seq: int, vocab: int, mfu: float, memory: float, stages: tuple[int, ...] | None) -> PublishedRun:
    method = "baseline" if stages is None else "redis"
    return PublishedRun(f"{SOURCE}: {method}", f"vocab-4b-v{vocab // 1000}k", "a100-80gb", _PP, _BATCH, pp=_PP,
                        seq_len=seq, zero=ZeroStage.OPTIMIZER, stage_layers=stages,
                        step_s=step_seconds(seq, vocab, mfu), memory_gib=memory,
                        memory_measure=MemoryMeasure.RESERVED)


ROWS = [row for (seq, vocab), (base, redis, base_gib, redis_gib) in _RESULTS.items()
        for row in ([_row(seq, vocab, base, base_gib, None)]
                    + ([_row(seq, vocab, redis, redis_gib, redistributed(_FINAL_STAGE_LAYERS[vocab]))]
                       if _FINAL_STAGE_LAYERS[vocab] != _LAYERS // _PP else []))]
