"""Zhang et al. 2022, "OPT: Open Pre-trained Transformer Language Models" (arXiv 2205.01068), §2.4 "Training
Processes": OPT-175B's pre-training throughput on 992 A100 80GB, with metaseq's launcher and logbook
(``facebookresearch/metaseq``) for its settings.

Stated (§2.4): "We trained OPT-175B on 992 80GB A100 GPUs, by utilizing Fully Sharded Data Parallel with Megatron-LM
Tensor Parallelism. We achieve utilization of up to 147 TFLOP/s per GPU"; FP16 weights with FP32 Adam state,
dynamic loss scaling; Table 1: 96 layers, 96 heads, width 12288, a batch of 2M tokens (the ``opt-175b`` preset).
The team's notes (``projects/OPT/chronicles/10_percent_update.md``): 8-way tensor parallelism, a 2M batch;
``27_percent_update.md``: a checkpoint of "992 files, each ~1.7GB", one per rank, which is what FP16 weights and
FP32 Adam moments with no FP32 master copy take (``--memory-efficient-fp16``: 10 bytes a parameter, 175B over 992
shards, 1.76 GB). ``56_percent_update.md`` plots the run's
logged throughput (``run12_upgrade_shift.jpeg``, metaseq's ``wps``, tokens a second over the whole job): about
1.005·10⁵ on Megatron 2.4, about 1.02·10⁵ after the team "accidentally upgraded" to Megatron 2.6 ("our
throughput (wps = words per second) increased by 2%"). The two agree: 147 TFLOP/s is what Megatron-LM's count of a
step with full recomputation (Narayanan et al. 2021, eq. 3: 96·B·s·l·h²·(1 + s/6h + V/16lh), four passes of the
forward's GEMMs) gives at 1.02·10⁵ tokens a second on 992 GPUs. The row takes the paper's 147 through that count
(19.9 s a step).

Stated by metaseq's launcher (``metaseq/launcher/opt_baselines.py`` and ``opt_job_constants.py``, the public
release of the code, May 2022), taken as the run's settings: ``--ddp-backend fully_sharded`` with
``--no-reshard-after-forward`` (fairscale's FSDP over the data-parallel group, each decoder layer wrapped, its
gathered weights kept from the forward to the backward: ZeRO-2's shape per layer, ``--zero 2 --zero-collectives
per-layer``), ``--memory-efficient-fp16`` (FP16 weights and gradients: metaseq's FSDP wrapper then turns
fairscale's ``mixed_precision`` off and keeps its ``fp32_reduce_scatter`` default, off, so the gradients are
reduce-scattered in 16 bits: ``--param-bytes 16``), ``--checkpoint-activations`` with
``--distribute-checkpointed-activations`` (every layer recomputed from its input, which is split over the tp ranks
and gathered in the backward: ``--recompute full --distribute-saved-activations``), ``--model-parallel-size`` 8,
``--criterion vocab_parallel_cross_entropy``, ``--update-freq 1`` and ``--batch-size`` 2·1024²/124/2048 = 8
sequences per data-parallel rank (124 ranks: 2,031,616 tokens a step), sequence 2048, dropout 0.1 (and 0.1 on the
attention probabilities), ReLU.

Stated by metaseq's model code at its first public commit (f2cd367, ``metaseq/model_parallel/modules``): the
attention scores materialised by ``torch.baddbmm`` and normalised by Megatron's fused upper-triangular softmax,
then dropout (``--attention unfused``); the MLP's ReLU, the dropouts and the residual adds as eager PyTorch ops
around Apex's fused LayerNorm (``--elementwise eager-fused-norm``); Megatron 2.6's ``ColumnParallelLinear``
all-reduces its input gradient in the blocking backward of ``copy_to_tensor_model_parallel_region``
(``--no-overlap-tp-dgrad``).

Inferred: the launcher's settings above, which the paper does not restate; the network, Azure's NDm A100 v4
(eight 200 Gb/s HDR InfiniBand links a node, the ``a100-80gb`` preset's; metaseq's launcher names Azure as the
environment holding the OPT data); no sequence parallelism (2021). Uncertain: the code that ran (Megatron 2.4
then 2.6 inside the team's fork, November 2021-January 2022) against the May 2022 release read here; ``up to``,
which the logged throughput bounds from below by 1.5 %; metaseq's ``torch.nan_to_num`` over the attention scores
(one pass over them, not modelled) and how far fairscale's per-layer gathers and reduce-scatters, each over 124
nodes on one link a GPU, ran beside the layers' kernels, which ZeRO's fitted overlap share decides.

Out-of-sample: gathered for issue #24 after every constant was fixed, never fitted to; ZeRO-3's overlap share,
fitted on the per-layer sharded rows without pipelining, reads this row too, and validation by source left out
refits it without it.
"""

from pipesim.analytic.layout import AttentionKernel, ElementwiseKernels, Recompute, ZeroCollectives, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.validation.runs import PublishedRun

SOURCE = "Zhang et al. 2022, OPT-175B, §2.4"

_GPUS, _TP, _MICRO_BATCH, _TFLOPS = 992, 8, 8, 147.0
_BATCH = _GPUS // _TP * _MICRO_BATCH  # sequences a step: 124 data-parallel ranks of 8


def _step_s() -> float:
    """Megatron-LM's FLOP count of the step with full recomputation (Narayanan et al. 2021, eq. 3) over the
    published 147 TFLOP/s per GPU."""
    m = MODEL_PRESETS["opt-175b"]
    layers, h, s, v = m.layers, m.hidden, m.seq_len, m.vocab
    flops = 96 * _BATCH * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    return flops / (_TFLOPS * 1e12 * _GPUS)


ROWS = [
    PublishedRun(SOURCE, "opt-175b", "a100-80gb", _GPUS, _BATCH, tp=_TP, micro_batch=_MICRO_BATCH,
                 recompute=Recompute.FULL, distribute_saved_activations=True, attention=AttentionKernel.UNFUSED,
                 elementwise=ElementwiseKernels.EAGER_FUSED_NORM, zero=ZeroStage.GRADIENTS,
                 zero_collectives=ZeroCollectives.PER_LAYER, fp16_grads=True, overlap_tp_dgrad=False,
                 step_s=_step_s()),
]
