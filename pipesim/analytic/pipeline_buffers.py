"""What a pipeline runtime keeps of the tensors that cross stage boundaries, beyond the layers' activations.

pipesim's activations are what each layer saves for its backward, for the microbatches in flight
(:mod:`.activations`), which is all Megatron-LM keeps: it allocates a receive buffer for each transfer, and once
a stage's output is sent it frees the output's data and keeps only its autograd node
(``deallocate_output_tensor``). ``torch.distributed.pipelining``, the runtime under torchtitan and under pipesim's
exported orders, keeps more (PyTorch 2.13, ``stage.py`` and ``schedules.py``; :class:`~.layout.PipelineBuffers`):

- **A receive buffer per microbatch, kept across steps.** ``_setup_forward_recv_info`` allocates, for every
  microbatch of the step, a buffer for the stage's input (not on a first stage), and ``_create_grad_recv_info`` one
  for the gradient of its output (not on a last stage), once, when the schedule first runs. The input buffer of
  a microbatch in flight *is* that microbatch's stage input, which the first layer's saved activations already
  count, so a microbatch in flight adds nothing for it.
- **Each microbatch's output until its backward.** ``forward_one_chunk`` keeps the stage's output whole in
  ``fwd_cache`` (its backward starts from it): ``b·s·h`` per tp rank, or on a last stage the logits in the model's
  dtype (the loss casts its own copy, which :func:`~.activations.output_activation_bytes` counts). Under a split
  backward the output stays with the weight gradient's state (``backward_state``) until the W, and so does the
  rest: the input backward runs ``autograd.grad`` with ``retain_graph=True`` (``stage_backward_input``), so every
  tensor the stage saved lives until its W, where Megatron-style accounting frees all but the weight gradients'
  operands at the I (docs/torch-runtime.md measured it: each I freed nothing). Not counted: the gradients of the
  intermediate nodes it keeps for the W (``param_groups``).
- **What it sent, until the step ends, in the multi-stage runtime.** ``_PipelineScheduleRuntime`` (torchtitan's
  interleaved, looped BFS, zero-bubble and DualPipe-V schedules, and any order loaded from a file) waits for its
  batches of sends only when the step ends (``send_ops``), and a send's tensor lives while its request does: each
  backward leaves the stage's output (sent forward) and the input gradient it sends back allocated until then.
  PyTorch's own measurement of the fix in progress (pytorch/pytorch pull request #193903, August 2026: DeepSeek-V3,
  4,096 tokens, pp 4, four stages a rank, 64 microbatches) puts the forward sends alone at 11.9 GiB of a rank's
  232.8 GiB reserved peak. Its single-stage Schedule1F1B waits for each batch of sends at the next exchange.
- **The last stage's outputs, until the step ends, where they are returned** (``pipeline_outputs_kept``): a
  schedule's ``step()`` returned every microbatch's output, so the last stage kept them all (``output_chunks``)
  until PyTorch added ``return_outputs=False`` (pull request #165822), which torchtitan passes since October 2025
  (pytorch/torchtitan pull request #1922, "Update PP to release memory earlier"); before May 2025 every stage kept
  its outputs that way (pytorch/pytorch pull request #153383), which for a stage other than the last is what the
  multi-stage runtime's held sends keep anyway.

At the fold of a V placement the two stages share a rank and hand their tensors over directly
(``set_local_fwd_input``, ``set_local_bwd_input``): nothing is sent, but the receiving stage's slot for that
microbatch keeps a reference to the handed tensor until the next step replaces it, so the fold keeps as many
buffers as a boundary between ranks, and the sending stage's output is one of them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pipesim.analytic.comm import p2p_bytes
from pipesim.analytic.layout import Layout
from pipesim.errors import PipesimError

if TYPE_CHECKING:
    from pipesim.analytic.model_spec import ModelSpec
    from pipesim.program.ir import PipelineShape
    from pipesim.sim.costs import StageCosts


def logits_bytes(model: ModelSpec, layout: Layout) -> float:
    """One microbatch's logits as the last stage outputs them, per tp rank: in the model's dtype, over the
    vocabulary's shard where the loss is vocabulary-parallel."""
    tokens = model.micro_batch * model.seq_len / layout.cp
    return model.dtype_bytes * tokens * model.vocab / layout.loss_shards


def output_bytes(model: ModelSpec, layout: Layout, shape: PipelineShape, stage: int) -> float:
    """A stage's output for one microbatch: the boundary tensor, or the logits on a last stage."""
    return logits_bytes(model, layout) if shape.is_last_stage(stage) else p2p_bytes(model, layout)


def _receives_from_rank(shape: PipelineShape, stage: int) -> bool:
    """Whether ``stage``'s input comes from another rank (not a first stage, not past a V's fold)."""
    return not shape.is_first_stage(stage) and shape.rank_of(stage - 1) != shape.rank_of(stage)


def _sends_to_rank(shape: PipelineShape, stage: int) -> bool:
    """Whether ``stage``'s output goes to another rank (not a last stage, not at a V's fold)."""
    return not shape.is_last_stage(stage) and shape.rank_of(stage + 1) != shape.rank_of(stage)


def kept_per_microbatch(model: ModelSpec, layout: Layout, shape: PipelineShape, stage: int) -> float:
    """Bytes a microbatch in flight adds to ``stage``'s activations: its output kept until the backward (the
    logits on a last stage; at a V's fold the output is the next stage's buffer already), less its input, which
    lives in a buffer slot (:func:`receive_buffer_bytes`) and not in the flight."""
    if not layout.pipeline_buffers.preallocates:
        return 0.0
    kept = shape.is_last_stage(stage) or _sends_to_rank(shape, stage)
    output = output_bytes(model, layout, shape, stage) if kept else 0.0
    return output - (0.0 if shape.is_first_stage(stage) else p2p_bytes(model, layout))


def held_to_step_end(model: ModelSpec, layout: Layout, shape: PipelineShape, stage: int) -> float:
    """Bytes each backward of ``stage`` leaves allocated until the step ends: the output it sent and the input
    gradient it sends back, in a runtime that waits for its sends at the step's end; the last stage's output, where
    the step returns it."""
    held = 0.0
    if layout.pipeline_buffers.holds_sends:
        boundary = p2p_bytes(model, layout)
        held += boundary * (_sends_to_rank(shape, stage) + _receives_from_rank(shape, stage))
    if layout.pipeline_outputs_kept and shape.is_last_stage(stage):
        held += logits_bytes(model, layout)
    return held


def receive_buffer_bytes(model: ModelSpec, layout: Layout, shape: PipelineShape, rank: int) -> float:
    """The receive buffers ``rank`` keeps across steps: for each of its stages, one per microbatch for the input
    (not on a first stage) and one for the output's gradient (not on a last stage); at a V's fold the slots keep
    the tensors handed over on the rank instead, as many."""
    if not layout.pipeline_buffers.preallocates:
        return 0.0
    buffers = sum((not shape.is_first_stage(s)) + (not shape.is_last_stage(s))
                  for s in (shape.stage(rank, c) for c in range(shape.chunks)))
    return buffers * shape.microbatches_per_stage * p2p_bytes(model, layout)


def check_runtime_buffers(layout: Layout, shape: PipelineShape) -> None:
    """Refuse a runtime that keeps buffers (torch.distributed.pipelining's) under DualPipe's two model copies."""
    if (layout.pipeline_buffers.preallocates or layout.pipeline_outputs_kept) and shape.pipelines > 1:
        raise PipesimError(f"--pipeline-buffers {layout.pipeline_buffers.value}: DualPipe's two model copies run in "
                           "no torch.distributed.pipelining schedule (its DualPipe-V is one copy: -s dualpipe-v); "
                           "choose another schedule or drop the option")


def with_runtime_buffers(per_stage: list[StageCosts], model: ModelSpec, layout: Layout,
                         shape: PipelineShape) -> list[StageCosts]:
    """``per_stage`` (each stage's costs, a rank's share of v chunks: :mod:`pipesim.analytic.to_costs`) with what
    the runtime keeps per microbatch added to the activations, a split backward's W keeping all of them but a last
    stage's logits (torch's I retains the graph) and a sent output the runtime holds (counted with the held sends
    from the I on), and what it holds to the step's end; unchanged where it keeps nothing more."""
    if not layout.pipeline_buffers.preallocates and not layout.pipeline_outputs_kept:
        return per_stage
    check_runtime_buffers(layout, shape)
    v = layout.chunks
    result = []
    for s, costs in enumerate(per_stage):
        per_microbatch = costs.activation_bytes / v  # one chunk's bytes for one microbatch
        total = per_microbatch + kept_per_microbatch(model, layout, shape, s)
        kept_for_w = costs.weight_grad_activation * per_microbatch
        if layout.pipeline_buffers.preallocates:
            # torch's split backward keeps the whole graph from I to W (stage_backward_input's retain_graph) and
            # the stage's output with it (backward_state); a last stage's W keeps the loss, not the logits; an
            # output whose send is held to the step's end is counted there from the I on, not twice
            held_output = layout.pipeline_buffers.holds_sends and _sends_to_rank(shape, s)
            kept_for_w = total - (logits_bytes(model, layout) if shape.is_last_stage(s) else 0.0) - (
                p2p_bytes(model, layout) if held_output else 0.0)
        result.append(replace(costs, activation_bytes=v * total,
                              weight_grad_activation=min(1.0, kept_for_w / total) if total > 0 else 0.0,
                              held_to_step_end=held_to_step_end(model, layout, shape, s)))
    return result
