"""The data-parallel bucket a stage's overlapped gradient reduce cannot hide: the one the backward fills last.

A framework that overlaps the data-parallel gradient reduce with the backward cuts the stage's gradients into
buckets and reduces each as soon as its last gradient is ready. The backward produces gradients from the last
layer to the first, so the bucket holding the first layers (and, on the first stage, the embedding, whose
gradient is the very last) fills only when the backward ends: its reduce runs with nothing left to hide it. The
same bucket is the first one the next step's forward needs when a sharded optimizer gathers the parameters
beside the forward, so its gather is waited for before the first layer runs. With many microbatches a step the
two are a sliver of it; with one (small models over many GPUs, the regime of strong-scaling runs) they are not.

Megatron-Core's DDP (``megatron/core/distributed/distributed_data_parallel.py`` and ``param_and_grad_buffer.py``,
``_compute_default_per_buffer_param_layout``): with ``overlap_grad_reduce`` it walks the parameters in reverse
order ("backprop order") and closes a bucket once it holds at least ``bucket_size`` parameters, by default
``max(40,000,000, 1,000,000 · dp)`` ("larger DP sizes need larger buckets to ensure collectives do not become
latency-bound"; dp without context parallelism), so the last bucket holds what is left over at the front. It
buckets only the first pipeline stage's first model chunk: on every other stage (``pp_rank > 0``) and chunk
(``disable_bucketing``) the whole stage is one bucket, reduced after its last backward, "not on the critical
path". With ``overlap_param_gather`` the distributed optimizer gathers the buckets in forward order, the first
launched at ``zero_grad`` and waited for by the first layer's forward pre-hook, each next one launched as the
one before it is waited for.

PyTorch's DDP (nanotron's data parallelism, :class:`~pipesim.analytic.frameworks.GradReduce` ``DDP_HOOKS``): the
same reverse-order rule (the Reducer's ``_compute_bucket_assignment_by_size``) with a cap in bytes of the
gradients as the model holds them, ``bucket_cap_mb = 25`` (torch's default and nanotron's
``ddp_bucket_cap_mb``), on every stage.

torchtitan's data parallelism without sharding (``apply_replicate`` in ``torchtitan/models/llama3/parallelize.py``
since pytorch/torchtitan #2458, March 2026: ``replicate``, whose module is an ``FSDPModule``) reduces per module,
as its FSDP does: the token embedding, each transformer block, and the final norm with the output projection are
units of their own, each all-reduced when its backward ends (and, under pipelining, only in the last
microbatch's backward). The unit the backward finishes last is the embedding on the first stage and the stage's
first transformer block on every other (``GradBuckets.PER_MODULE``). Before it, torchtitan wrapped the model in
torch's DDP with ``bucket_cap_mb=100``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

from pipesim.analytic.kernels import layer_parameter_tensors
from pipesim.analytic.layout import GradBuckets, Layout
from pipesim.analytic.model_spec import LayerKind, ModelSpec

MEGATRON_MIN_BUCKET = 40_000_000  # parameters (Megatron-Core's DistributedDataParallel default)
MEGATRON_BUCKET_PER_REPLICA = 1_000_000  # parameters a bucket grows by per data-parallel rank
TORCH_DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel's bucket_cap_mb default


def bucket_capacity(model: ModelSpec, layout: Layout, stage: int) -> float | None:
    """Parameters a bucket of ``stage`` closes at, per rank; None where the stage is one bucket (or, per module,
    cut by no size)."""
    if layout.grad_buckets is GradBuckets.PER_MODULE:
        return None
    if layout.grad_buckets is GradBuckets.TORCH_DDP:
        return TORCH_DDP_BUCKET_BYTES / model.dtype_bytes
    if stage != 0:  # Megatron buckets only the first pipeline stage's first model chunk
        # (and only with overlap_grad_reduce, which Megatron-LM requires beside overlap_param_gather: "Must use
        # --overlap-param-gather with --overlap-grad-reduce"; pipesim takes a gather overlapped alone as bucketed)
        return None
    return max(MEGATRON_MIN_BUCKET, MEGATRON_BUCKET_PER_REPLICA * layout.dp)


def last_bucket(runs: Iterable[tuple[float, int]], capacity: float | None) -> float:
    """Elements of the last bucket filled when a stage's tensors, in the order the backward produces their
    gradients and given as runs of ``count`` tensors of ``size`` elements, are cut greedily into buckets closed
    once they hold ``capacity`` elements: what is left after the last full one, or the last full one when
    nothing is. A run is taken whole, not tensor by tensor (a mixture-of-experts layer holds hundreds of equal
    expert tensors)."""
    runs = list(runs)
    if capacity is None:
        return float(sum(size * count for size, count in runs))
    filling = last_closed = 0.0
    for size, count in runs:
        if size <= 0:
            continue
        while count:
            to_close = max(1, math.ceil((capacity - filling) / size))  # tensors that close the open bucket
            if to_close > count:
                filling += count * size
                break
            last_closed, filling, count = filling + to_close * size, 0.0, count - to_close
            per_bucket = max(1, math.ceil(capacity / size))  # then every bucket of this run alone
            if count >= per_bucket:
                last_closed, count = per_bucket * size, count % per_bucket
    return filling if filling > 0 else last_closed


def _runs(sizes: Iterable[float]) -> list[tuple[float, int]]:
    return [(size, len(list(group))) for size, group in itertools.groupby(sizes)]


def stage_tensors_backward(model: ModelSpec, layout: Layout, stage: int, layer_kinds: Sequence[LayerKind],
                           has_head: bool) -> list[tuple[float, int]]:
    """The stage's parameter tensors per rank, as runs of equal tensors, in the order the backward finishes their
    gradients: the LM head's output projection and final norm (on the head's stage), the layers from last to
    first (``layer_kinds`` in forward order), the embedding (the first stage; a tied embedding on one stage is one
    tensor, finished last)."""
    t = layout.tp
    head: list[float] = []
    if has_head:
        if not (model.tied_embeddings and layout.num_stages == 1):
            head.append(model.vocab * model.hidden / t)
        head += [model.hidden] * (1 if model.rms_norm else 2)
    runs = _runs(head)
    per_kind: dict[LayerKind, list[tuple[float, int]]] = {}
    for kind in reversed(layer_kinds):
        if kind not in per_kind:
            per_kind[kind] = _runs(reversed(layer_parameter_tensors(model, layout, kind)))
        runs += per_kind[kind]
    if stage == 0:  # Megatron's embedding module holds the positions' table after the words' (built in that order)
        if model.learned_positions:
            runs.append((model.seq_len * model.hidden, 1))
        runs.append((model.vocab * model.hidden / t, 1))
    return runs


def last_module(model: ModelSpec, layout: Layout, stage: int, layer_kinds: Sequence[LayerKind],
                has_head: bool) -> float:
    """Elements per rank of the module unit ``stage``'s backward finishes last where each module is reduced on its
    own (``GradBuckets.PER_MODULE``): the embedding on the first stage, else the stage's first layer, else (a stage
    of the LM head alone) the final norm with the output projection."""
    if stage == 0:  # a tied output projection is the embedding's tensor, in the embedding's unit
        return model.vocab * model.hidden / layout.tp + (model.seq_len * model.hidden if model.learned_positions
                                                         else 0.0)
    if layer_kinds:
        return float(sum(layer_parameter_tensors(model, layout, layer_kinds[0])))
    return sum(size * count for size, count in stage_tensors_backward(model, layout, stage, (), has_head))


def last_bucket_share(model: ModelSpec, layout: Layout, stage: int, layer_kinds: Sequence[LayerKind],
                      has_head: bool) -> float:
    """The share of ``stage``'s parameters in the bucket its backward fills last (1: the stage is one bucket)."""
    runs = stage_tensors_backward(model, layout, stage, layer_kinds, has_head)
    total = sum(size * count for size, count in runs)
    if total <= 0:
        return 1.0
    if layout.grad_buckets is GradBuckets.PER_MODULE:
        return min(1.0, last_module(model, layout, stage, layer_kinds, has_head) / total)
    return min(1.0, last_bucket(runs, bucket_capacity(model, layout, stage)) / total)
