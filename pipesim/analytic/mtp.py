"""Multi-token prediction's modules, what they hold and cost beyond their transformer layers.

DeepSeek-V3 §2.2 (Megatron-Core's ``MultiTokenPredictionBlock``, ``--mtp-num-layers D``): after the model's last
layer, module k normalises the previous depth's hidden state and the embedding of the token k ahead (two RMSNorms),
concatenates them and projects 2h → h (``eh_proj``), runs one transformer layer of the last layer's kind (MoE in
DeepSeek-V3, whose MTP module is a MoE layer), and predicts through a final norm and the model's output head, which
it shares, into a loss of its own (scaled and added to the model's). Megatron-Core builds the modules on the pipeline
stage with the loss, and builds the embedding there too to look the shifted tokens up: a copy of the table on that
stage where the embedding is not already there (pp > 1) and not tied to the output layer (whose weight it is
otherwise).

The modules run on the loss's stage unless ``Layout.mtp_stage`` names an earlier one (Megatron-Core's
``--pipeline-model-parallel-layout``), whose output then carries the modules' hidden states beside the model's to
the loss (``comm.stage_output_bytes``); the head's second pass is always the loss's stage's. The layers
themselves are counted as layers of their stage (``to_costs.stage_layer_groups``): compute, collectives, the
all-to-all and the activations as any layer of that kind. This module counts the rest: the projection's GEMMs,
the norms and concatenation, the head's projection and loss run again, their parameters and what they keep for
the backward. Megatron-Core counts the same in its FLOPs (``num_floating_point_operations``:
the MTP layers as layers of the last one's kind, the logits ``1 + D`` times, the projections).
"""

from __future__ import annotations

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.kernels import PassTimes, gemm_time, head_part_times
from pipesim.analytic.layout import Layout, Precision
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import embedding_params, layer_expert_params, layer_params

# Per module: the embedding's and the hidden state's norms (enorm, hnorm) and the final norm before the head.
MTP_NORMS = 3


def mtp_kind(model: ModelSpec) -> LayerKind:
    """The kind of the modules' transformer layers: the model's last layer's."""
    return model.layer_kind(model.layers - 1)


def mtp_module_params(model: ModelSpec) -> int:
    """The modules' own parameters: each one's layer, 2h → h projection and norms."""
    norm = model.hidden * (1 if model.rms_norm else 2)
    return model.mtp_layers * (layer_params(model, mtp_kind(model)) + 2 * model.hidden * model.hidden
                               + MTP_NORMS * norm)


def mtp_embedding_copy(model: ModelSpec, layout: Layout) -> int:
    """The embedding table's copy on the modules' slice, which looks the shifted tokens up: none on the first slice
    (it holds the table), nor on a tied model's head slice (its output layer's weight is the table), nor under
    DualPipe, whose rank with the last slice holds the other copy's first (DeepSeek-V3 §3.2.3: the embedding shared
    physically, parameters and gradients, by the modules and the model)."""
    stage = layout.mtp_slice
    if (not model.mtp_layers or stage == 0 or layout.model_copies == 2
            or (model.tied_embeddings and stage == layout.head_stage)):
        return 0
    return embedding_params(model)


def mtp_params(model: ModelSpec, layout: Layout) -> int:
    """Parameters the modules' slice holds for them: :func:`mtp_module_params` and :func:`mtp_embedding_copy`."""
    return mtp_module_params(model) + mtp_embedding_copy(model, layout)


def mtp_expert_params(model: ModelSpec) -> int:
    """The routed experts of the modules' layers (what expert parallelism shards)."""
    return model.mtp_layers * layer_expert_params(model, mtp_kind(model))


def mtp_module_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> PassTimes:
    """One microbatch through the modules' parts other than their layers and the head, seconds: the 2h → h
    projection's GEMMs (column-parallel over tp, BF16), the two norms and the concatenation (read and written once
    each way)."""
    if not model.mtp_layers:
        return PassTimes(0.0, 0.0, 0.0)
    tokens = model.micro_batch * model.seq_len // layout.cp
    h, out = model.hidden, model.hidden // layout.tp
    p = Precision.BF16
    elementwise = (2 * tokens * h + tokens * 2 * h) * model.dtype_bytes * 2 / chip.stream_bandwidth
    one = PassTimes(gemm_time(tokens, out, 2 * h, chip, p) + elementwise,
                    gemm_time(tokens, 2 * h, out, chip, p) + 2 * elementwise,
                    gemm_time(2 * h, out, tokens, chip, p))
    return one.scaled(model.mtp_layers)


def mtp_head_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> PassTimes:
    """The shared head's norm, projection, cast and loss again for each module, on the loss's slice, seconds."""
    if not model.mtp_layers:
        return PassTimes(0.0, 0.0, 0.0)
    return head_part_times(model, layout, chip).whole.scaled(model.mtp_layers)


def mtp_module_activation_bytes(model: ModelSpec, layout: Layout) -> float:
    """What the modules keep per microbatch beyond their layers and the head: the two norms' inputs and the
    projection's 2h-wide input (split over tp under sequence parallelism)."""
    shard = model.dtype_bytes * model.seq_len * model.micro_batch * model.hidden / (
        layout.tp if layout.sequence_parallel else 1)
    return model.mtp_layers * 4 * shard
