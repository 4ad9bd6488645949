"""Parameter counts: one transformer layer, the embedding, the output layer, and a whole pipeline stage.

Counts follow the layer definition of Narayanan et al. 2021, §5.1 (their ``12lh²(1 + 13/12h + (V+s)/12lh)``
for GPT), generalized to GQA (K and V projections of width ``kv_dim``), gated MLPs (three matrices) and
models without biases or with RMSNorm. With tied embeddings and more than one stage, the last stage keeps
its own copy of the embedding matrix for the output layer (Megatron-LM does; the copies' gradients are
all-reduced), so both ends hold ``V·h`` parameters.
"""

from __future__ import annotations

from pipesim.analytic.model_spec import ModelSpec


def layer_params(model: ModelSpec) -> int:
    h, kv, f = model.hidden, model.kv_dim, model.ffn_hidden
    attention = h * (h + 2 * kv) + h * h  # QKV and output projection
    mlp = h * f * (3 if model.gated else 2)
    norms = 2 * h * (1 if model.rms_norm else 2)
    biases = (h + 2 * kv) + h + f * (2 if model.gated else 1) + h if model.bias else 0
    return attention + mlp + norms + biases


def embedding_params(model: ModelSpec) -> int:
    positions = model.seq_len * model.hidden if model.learned_positions else 0
    return model.vocab * model.hidden + positions


def output_params(model: ModelSpec, num_stages: int) -> int:
    """Final norm plus the output projection (a second copy of the embedding when tied over several stages)."""
    norm = model.hidden * (1 if model.rms_norm else 2)
    projection = 0 if model.tied_embeddings and num_stages == 1 else model.vocab * model.hidden
    return norm + projection


def total_params(model: ModelSpec) -> int:
    """Unique parameters (a tied output layer counted once)."""
    return model.layers * layer_params(model) + embedding_params(model) + output_params(model, 1)


def stage_params(model: ModelSpec, stage: int, num_stages: int, layers: int | None = None) -> int:
    """Parameters of pipeline stage ``stage`` of ``num_stages`` holding ``layers`` layers (default: L/stages)."""
    count = (model.layers // num_stages if layers is None else layers) * layer_params(model)
    if stage == 0:
        count += embedding_params(model)
    if stage == num_stages - 1:
        count += output_params(model, num_stages)
    return count
