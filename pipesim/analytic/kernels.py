"""Time of each operation of a layer from its shape: GEMMs, attention, and memory-bound element-wise work.

One fraction of peak for everything (``--achievable-fraction``) makes weight-gradient passes (pure GEMMs) too
slow and small layers (where element-wise work and partial waves weigh more) too fast. Here each kernel class
has its own rate, one constant per chip, from a cited measurement (:mod:`.chip_presets`):

- **GEMM** ``M×N×K``: the roofline (Williams et al. 2009) ``max(2MNK / (peak · e_gemm · q), bytes / (β · e_mem))``,
  where ``q`` is tile and wave quantization (NVIDIA, "Matrix Multiplication Background User's Guide": the
  output is cut into ``T_m × T_n`` tiles, one per SM at a time, so a partial last tile or a partial last wave
  of ``sm_count`` tiles runs at the full tiles' cost). ``e_gemm`` is what a large GEMM reaches.
- **Fused attention** (FlashAttention; Dao 2023, "FlashAttention-2", §4.1): causal kernels skip the masked
  half; forward at ``e_attn_fwd`` of peak, backward (2.5× the forward's FLOPs: it recomputes ``QKᵀ``) at
  ``e_attn_bwd``, each scaled to the layer's sequence and head size where the chip has a measured table, and
  slowed when the kernel's grid of query tiles is too small to fill the chip (:mod:`.attention_shapes`).
  Unfused attention runs its two batched GEMMs over the full ``s²`` and a softmax over them.
- **Element-wise** (norms, residual adds, activations, RoPE, dropout, softmax, casts): bytes read and written
  over ``β · e_mem`` (HBM bandwidth times what a streaming copy reaches).
- **Backward of the non-GEMM work** (element-wise kernels, and unfused attention's batched GEMMs + softmax):
  ``NON_GEMM_BACKWARD`` × its forward time (for the element-wise part, the chip's
  ``elementwise_backward_ratio``: this constant by default, measured by ``pipesim profile``). Counting bytes
  alone says about 2× (a backward reads the saved
  input and the incoming gradient and writes a gradient), but the published per-pass profile of Qi et al.
  2024 (Table 9: T_F, T_B, T_W of four GPT models on A100, Megatron-LM kernels) gives ``T_B − T_W ≈ T_F −
  T_W`` — the input backward's non-GEMM part takes what the forward's does (the forward also generates the
  dropout masks, the backward only reads them). One constant for this kernel class: 1.0.

- **Routed experts** (mixture of experts): a grouped GEMM, one product per local expert
  (Megatron-Core's GroupedMLP / TE's grouped linear). With ``E`` experts over ``ep`` ranks a rank holds
  ``E/ep`` experts and, after the dispatch, ``tokens·k`` routed tokens (those of its ``ep`` peers that chose
  its experts), ``tokens·k·ep/E`` per expert on average — times ``moe_imbalance`` on the most-loaded rank,
  which sets the pace. Each expert's GEMM goes through the same roofline with wave quantization, so small
  per-expert GEMMs (few tokens, weights read from HBM for few rows) run below the large-GEMM rate: the
  shape-dependent efficiency is the one above, not a separate constant.

All times are for one tensor-parallel rank and one microbatch of ``b`` sequences of ``s/cp`` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from pipesim.analytic.attention_shapes import FLASH_TILE, cta_imbalance, flash1_slowdown
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.layout import (
    AttentionKernel,
    CpComm,
    CpKernels,
    Fp8Params,
    Fp8Recipe,
    GradAccumulation,
    HeadParts,
    Layout,
    LossKernel,
    MlpUp,
    Precision,
    Recompute,
    RecomputeModule,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.measured import measured_attention_rates, measured_gemm_rate
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import layer_params

NON_GEMM_BACKWARD = 1.0  # backward / forward time of element-wise and unfused-attention work (Qi et al. Table 9)
# FlashAttention in Triton against FlashAttention-2: Dao 2023 ("FlashAttention-2", §4.1, A100) measures FA2
# 1.3–2.5× faster than the Triton implementation, most in the backward; 1.8 is that range's middle on a log
# scale, for both passes (the paper's figures give no single ratio per pass). Uncertain within the range.
TRITON_FLASH_SLOWDOWN = 1.8


@dataclass(frozen=True)
class PassTimes:
    """Seconds of compute of one block per microbatch: forward, input backward, weight backward, recompute."""

    forward: float
    backward_input: float
    backward_weight: float
    recompute: float = 0.0  # forward work repeated inside the input backward

    def __add__(self, other: PassTimes) -> PassTimes:
        return PassTimes(self.forward + other.forward, self.backward_input + other.backward_input,
                         self.backward_weight + other.backward_weight, self.recompute + other.recompute)

    def scaled(self, factor: float) -> PassTimes:
        """Every pass ``factor`` times as long."""
        if factor == 1.0:
            return self
        return PassTimes(self.forward * factor, self.backward_input * factor, self.backward_weight * factor,
                         self.recompute * factor)


def wave_efficiency(m: int, n: int, chip: ChipSpec) -> float:
    """Useful share of the tiles launched: ``MN / (waves · sm_count · T_m · T_n)``."""
    tm, tn = chip.gemm_tile
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(tiles / chip.sm_count)
    return m * n / (waves * chip.sm_count * tm * tn)


# The inner dimension of the benchmark shape whose rate ``gemm_efficiency`` is (8192³-class best shapes): that
# benchmark already paid the per-tile overhead at this K, so gemm_time charges only the difference.
BENCHMARK_K = 8192


def tile_overhead_factor(k: int, chip: ChipSpec, rate: float) -> float:
    """How much longer a GEMM's compute takes than its main loops alone, relative to the benchmark's shape.

    An SM computes one ``T_m × T_n`` output tile at a time: ``K`` main-loop steps at ``rate / sm_count``, plus a
    fixed cost per tile (``gemm_tile_overhead``: filling the software pipeline before the first step, writing
    the tile after the last; CUTLASS's prologue / mainloop / epilogue structure, "Efficient GEMM in CUDA").
    So a tile takes ``t₀ + 2·T_m·T_n·K / (rate/sm_count)`` and the compute time grows by ``1 + t₀/t_K``: a
    short K (a tensor-parallel shard of a small model's hidden size, 256–1024) pays tens of percent, the
    benchmark's K = 8192 about one."""
    if chip.gemm_tile_overhead <= 0:
        return 1.0
    tm, tn = chip.gemm_tile
    per_sm = rate / chip.sm_count

    def factor(inner: int) -> float:
        return 1 + chip.gemm_tile_overhead * per_sm / (2 * tm * tn * inner)

    return factor(k) / factor(BENCHMARK_K)


def _roofline_tiles(m: int, n: int, k: int, chip: ChipSpec, precision: Precision) -> float:
    """The tiles of one ``(M×K)·(K×N)`` product on the roofline: the slower of compute and memory."""
    peak = chip.sustained_peak_for(precision)
    in_bytes = precision.element_bytes
    # BF16: a short benchmark's best shape times what a training step reaches of it; the FP8 share is already an
    # in-training figure (it carries Transformer Engine's scaling overheads; pipesim.validation.constants); the
    # FP4 share a benchmark's on quantized inputs (ChipSpec.gemm_share)
    rate = peak * chip.gemm_share(precision)
    compute = 2 * m * n * k / (rate * wave_efficiency(m, n, chip)) * tile_overhead_factor(k, chip, rate)
    memory = (in_bytes * (m * k + k * n) + 2 * m * n) / chip.stream_bandwidth
    return max(compute, memory)


def _table_gemm_rate(m: int, n: int, k: int, chip: ChipSpec, precision: Precision) -> float | None:
    """pipesim profile's measured rate of this product at the clock a training run sustains: the table's short
    runs times the chip's ``sustained_clock_ratio`` (the same profile's burn, :mod:`pipesim.profile.sustained`;
    1 where none ran). None: no table, or none for this precision."""
    rate = measured_gemm_rate(chip.measured, m, n, k, precision)
    return None if rate is None else rate * chip.sustained_clock_ratio


def gemm_kernel_time(m: int, n: int, k: int, chip: ChipSpec, precision: Precision) -> float:
    """The tiles of one ``(M×K)·(K×N)`` product, without the per-kernel overhead (a batched product of many such
    shapes is still one kernel: see :func:`gemm_time`); a measured table's rate when the chip has one."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    if (rate := _table_gemm_rate(m, n, k, chip, precision)) is not None:  # pipesim profile's table
        return 2 * m * n * k / rate
    return _roofline_tiles(m, n, k, chip, precision)


def gemm_time(m: int, n: int, k: int, chip: ChipSpec, precision: Precision) -> float:
    """One ``(M×K)·(K×N)`` GEMM kernel: its tiles plus ``gemm_kernel_overhead``, the ramp-up and tail every
    kernel pays (a measured table's rate already includes it)."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    if (rate := _table_gemm_rate(m, n, k, chip, precision)) is not None:
        return 2 * m * n * k / rate
    return _roofline_tiles(m, n, k, chip, precision) + chip.gemm_kernel_overhead


def attention_shapes(model: ModelSpec, layout: Layout) -> list[tuple[int, int]]:
    """(output width, input width) per tp rank of the attention block's weight matrices. Latent attention's
    down-projections are not split over tp (Megatron-Core keeps them whole on every tp rank)."""
    h, t = model.hidden, layout.tp
    if model.mla:
        q = ([(model.q_lora_rank, h), (model.q_width // t, model.q_lora_rank)] if model.q_lora_rank
             else [(model.q_width // t, h)])
        kv = [(model.kv_lora_rank + model.qk_rope_head_dim, h),
              (model.heads * (model.qk_nope_head_dim + model.v_head_dim) // t, model.kv_lora_rank)]
        return q + kv + [(h, model.attention_out_width // t)]
    return [((model.q_width + 2 * model.kv_dim) // t, h), (h, model.attention_out_width // t)]


def _mlp_shapes(model: ModelSpec, width: int, t: int) -> list[tuple[int, int]]:
    up = width * (2 if model.gated else 1)
    return [(up // t, model.hidden), (model.hidden, width // t)]


def _dense_mlp_shapes(model: ModelSpec, layout: Layout) -> list[tuple[int, int]]:
    """A dense layer's MLP weight matrices per tp rank: the gated MLP's gate and up projections one fused
    matrix, or two (:class:`~pipesim.analytic.layout.MlpUp`)."""
    shapes = _mlp_shapes(model, model.ffn_hidden, layout.tp)
    if model.gated and layout.mlp_up is MlpUp.SPLIT:
        half = (model.ffn_hidden // layout.tp, model.hidden)
        return [half, half, shapes[1]]
    return shapes


def linear_shapes(model: ModelSpec, layout: Layout) -> list[tuple[int, int]]:
    """(output width, input width) per tp rank of a dense layer's weight matrices."""
    return attention_shapes(model, layout) + _dense_mlp_shapes(model, layout)


_linear_shapes = linear_shapes  # the old private name (pipesim profile times these shapes)


def tokens_per_expert(model: ModelSpec, layout: Layout, tokens: int) -> float:
    """Routed tokens one local expert computes on the most-loaded rank: ``tokens·k·ep/E · imbalance``."""
    return tokens * model.experts_per_token * layout.ep / model.experts * layout.moe_imbalance


def layer_gemms(model: ModelSpec, layout: Layout, tokens: int,
                kind: LayerKind = LayerKind.DENSE) -> list[tuple[int, int, int, int]]:
    """Every weight GEMM of one layer on one rank as ``(rows M, output width N, input width K, count)``.

    A MoE layer: the attention, the router (not split over tp), the shared experts as one MLP of their summed
    width, and the routed experts' grouped GEMM — ``E/ep`` products of :func:`tokens_per_expert` rows, split over
    the expert tensor parallelism; under MoE parallel folding (``Layout.expert_tp`` 1) the router and the experts
    see the rank's own 1/tp of the tokens, its experts whole."""
    groups = [(tokens, n, k, 1) for n, k in attention_shapes(model, layout)]
    if kind is LayerKind.DENSE:
        return groups + [(tokens, n, k, 1) for n, k in _dense_mlp_shapes(model, layout)]
    routed_tokens = round(tokens * layout.expert_token_share)  # MoE parallel folding: the rank's own share
    groups.append((routed_tokens, model.experts, model.hidden, 1))
    if model.shared_experts:
        width = model.shared_experts * model.shared_expert_ffn_hidden
        groups += [(tokens, n, k, 1) for n, k in _mlp_shapes(model, width, layout.tp)]
    rows = max(1, round(tokens_per_expert(model, layout, routed_tokens)))
    local = model.experts // layout.ep
    groups += [(rows, n, k, local) for n, k in _mlp_shapes(model, model.expert_ffn_hidden, layout.etp)]
    return groups


def layer_parameter_tensors(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> list[int]:
    """Elements of each parameter tensor of one layer on one rank, as Megatron-LM builds the layer: one tensor
    per weight matrix of :func:`layer_gemms` (fused QKV, fused gate and up; each local expert's own), a bias per
    weight matrix when the model has biases, and the norms' weights (and biases, for LayerNorm; latent
    attention's two small latent norms are left out). What a framework that communicates tensor by tensor issues
    collectives for (:attr:`ZeroCollectives.PER_TENSOR`)."""
    tensors: list[int] = []
    for _rows, n_out, k_in, count in layer_gemms(model, layout, 1, kind):
        tensors += [n_out * k_in] * count + ([n_out] * count if model.bias else [])
    norm_tensors = 1 if model.rms_norm else 2
    return tensors + [model.hidden] * (model.block_norms * norm_tensors)


def _column_parallel_shapes(model: ModelSpec, layout: Layout, kind: LayerKind) -> list[tuple[int, int]]:
    """(output width, input width) per tp rank of a layer's column-parallel linears, one per input-gradient
    collective: the attention's input projection (the first of :func:`attention_shapes`: fused QKV, or latent
    attention's first projection) and, in a dense layer, the MLP's up projection (a MoE layer's experts
    communicate otherwise and are left out) — as two linears, each with its own collective, where a gated MLP's
    projections are split and no sequence parallelism gathers their shared input once."""
    shapes = [attention_shapes(model, layout)[0]]
    if kind is LayerKind.DENSE:
        mlp = _dense_mlp_shapes(model, layout)
        shapes += mlp[:-1] if split_up_collectives(model, layout, kind) else [_mlp_shapes(model, model.ffn_hidden,
                                                                                         layout.tp)[0]]
    return shapes


def split_up_collectives(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> bool:
    """Whether a layer's gated MLP makes two input-gradient collectives where a fused one makes one: its gate
    and up projections split into two column-parallel linears (``layout.mlp_up``) on an input no sequence
    parallelism gathers once for both (a dense layer, tp > 1)."""
    return (kind is LayerKind.DENSE and model.gated and layout.mlp_up is MlpUp.SPLIT and layout.tp > 1
            and not layout.sequence_parallel)


def column_parallel_weight_grads(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                                 kind: LayerKind = LayerKind.DENSE) -> list[float]:
    """The weight-gradient GEMM of each column-parallel linear of a layer, the one its input-gradient collective
    can run beside (:attr:`Layout.overlap_tp_dgrad`)."""
    return [gemm_time(k_in, n_out, tokens, chip, layout.precision)
            for n_out, k_in in _column_parallel_shapes(model, layout, kind)]


def column_parallel_input_grads(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                                kind: LayerKind = LayerKind.DENSE) -> list[float]:
    """The input-gradient GEMM of each column-parallel linear of a layer, the one the backward's second
    all-gather of its input can run beside (:attr:`ColumnInput.REGATHER`)."""
    return [gemm_time(tokens, k_in, n_out, chip, layout.precision)
            for n_out, k_in in _column_parallel_shapes(model, layout, kind)]


def column_parallel_local_forwards(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                                  kind: LayerKind = LayerKind.DENSE) -> list[float]:
    """The forward GEMM of each column-parallel linear on the rank's own sequence shard (``tokens/tp`` rows): what
    its input's all-gather runs beside when the linear computes that shard first
    (:attr:`Layout.overlap_tp_local_shard`)."""
    rows = max(1, tokens // layout.tp)
    return [gemm_time(rows, n_out, k_in, chip, layout.precision)
            for n_out, k_in in _column_parallel_shapes(model, layout, kind)]


def row_parallel_local_input_grads(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                                   kind: LayerKind = LayerKind.DENSE) -> list[float]:
    """The input-gradient GEMM of each row-parallel linear (the attention's output projection; a dense layer's
    MLP down projection) on the rank's own shard of the output gradient: what that gradient's all-gather runs
    beside under :attr:`Layout.overlap_tp_local_shard`."""
    rows = max(1, tokens // layout.tp)
    shapes = [attention_shapes(model, layout)[-1]]
    if kind is LayerKind.DENSE:
        shapes.append(_dense_mlp_shapes(model, layout)[-1])
    return [gemm_time(rows, k_in, n_out, chip, layout.precision) for n_out, k_in in shapes]


def per_op_recomputed_gemms(model: ModelSpec, layout: Layout, tokens: int) -> list[tuple[int, int, int, int]]:
    """The matmuls torchtitan's per-op checkpointing recomputes (every second one in call order,
    :func:`pipesim.analytic.activations.per_op_kept_width`): wk, wo and w3, or wk, wo and fc2 ungated."""
    h, t = model.hidden, layout.tp
    mlp = (model.ffn_hidden // t, h) if model.gated else (h, model.ffn_hidden // t)
    return [(tokens, model.k_width // t, h, 1), (tokens, h, model.attention_out_width // t, 1), (tokens, *mlp, 1)]


def gemm_group_times(groups: list[tuple[int, int, int, int]], chip: ChipSpec, precision: Precision) -> PassTimes:
    """Forward ``X·W``, input gradient ``dY·Wᵀ`` and weight gradient ``Xᵀ·dY`` of each GEMM, summed."""
    fwd = bwd_in = bwd_w = 0.0
    for rows, n_out, k_in, count in groups:
        fwd += count * gemm_time(rows, n_out, k_in, chip, precision)
        bwd_in += count * gemm_time(rows, k_in, n_out, chip, precision)
        bwd_w += count * gemm_time(k_in, n_out, rows, chip, precision)
    return PassTimes(fwd, bwd_in, bwd_w)


def linear_times(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                 kind: LayerKind = LayerKind.DENSE) -> PassTimes:
    """The layer's weight GEMMs (:func:`layer_gemms`): forward, input gradient, weight gradient."""
    return gemm_group_times(layer_gemms(model, layout, tokens, kind), chip, layout.precision)


def kv_repeat(model: ModelSpec, layout: Layout) -> float:
    """How many times wider the keys and values are as the attention call reads them than as the model computes
    them: ``heads / kv_heads`` where grouped-query attention's K and V are copied out to every query head first
    (:attr:`Layout.kv_repeated`), else 1 (:attr:`ModelSpec.query_heads_per_kv_head`)."""
    return model.query_heads_per_kv_head if layout.kv_repeated else 1.0


def repeat_kv_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes per token and tp rank of copying grouped K and V out to every query head (:func:`kv_repeat`): read
    the kv heads, write the repeated ones (an ``expand`` then ``reshape``: one copy kernel each for K and V). The
    backward sums each repeated head's gradient back into its kv head: the same bytes the other way. 0 without
    it."""
    repeat = kv_repeat(model, layout)
    if repeat == 1.0:
        return 0.0
    return model.dtype_bytes * 2 * model.kv_dim / layout.tp * (1 + repeat)


def cp_merge_bytes(model: ModelSpec, layout: Layout) -> tuple[float, float]:
    """Bytes context-parallel attention moves beside its kernels, per tp rank: (forward, backward); 0 without CP.
    Memory-bound element-wise work the attention kernels' rates do not contain, as the code running it does it
    (:attr:`Layout.cp_kernels`, :attr:`Layout.cp_comm`; ``O``, ``Q``, ``KV``: the rank's output, query and
    key-and-value elements).

    - Transformer Engine's ring (``AttnFuncWithCPAndKVP2P``): each of a rank's ``cp`` steps runs the fused kernel
      on its queries against one visiting K/V block and gives a partial output with its log-sum-exp; every step
      after the first folds it into the running output (its per-step correction): read the running output and
      the step's, write the running output, 3 BF16 accesses per output element. The backward accumulates the
      queries' gradient over the steps the same way, and the visiting block's K and V gradients once per step.
    - Its all-gather (``AttnFuncWithCPAndKVAllGather``): the gathered K and V reordered into sequence order
      (``index_select``: 4 bytes an element of the ``cp·KV`` gathered) and each of the two query chunks' output
      copied into place (6: the zeroed output, the copy); the backward zeroes full-length K and V gradients,
      gathers and reorders again, adds each chunk's gradients into their range (together about the whole
      length) and reorders them back before the reduce-scatter: 16 bytes a gathered element, 4 a query's.
    - Its all-to-alls (``flash_attn_a2a_communicate``): every tensor the all-to-alls carry reordered between
      sequence chunks and heads on arrival or before leaving (a copy, 4 bytes an element): q, k, v and the
      output, and their gradients. Under a2a+p2p those, and the ring's merges over its ``cp/a`` steps.
    - PyTorch's ``context_parallel`` (``_SDPAMerger``, ``_partial_update``): the merge runs in FP32 eager ops,
      each step's output cast (6 bytes), ``out − σ(lse_b − lse)·(out − out_b)`` in three passes (12 + 8 + 12),
      a half-length step (the load-balanced split's) copied back into the whole running output by
      ``torch.cat`` (8); the first step's cast and the final one back to BF16 (12); every step but the last
      concatenates K and V to send (4 a KV element). The busiest rank (the last: its later steps are whole)
      moves ``12·O + 38·(cp−1)·O + 4·(cp−1)·KV``. Its backward keeps FP32 gradients: zeroed (4 a Q and KV
      element) and cast back (6), each step's query gradient added (10: read 4 and 2, write 4; a half-length
      one also concatenated back, 8) and the visiting K and V gradients added (10, or 5 for a half-length
      range and 8 for the concatenation) and concatenated in FP32 to send on (8); K and V concatenated to send
      (4): about ``10·(Q+KV) + (10·Q + 18·KV) + (cp−1)·(max(10·Q + 21·KV, 13·Q + 18·KV) + 4·KV)`` on the
      busiest of the first and last rank."""
    cp = layout.cp
    if cp == 1:
        return 0.0, 0.0
    t, rows = layout.tp, model.micro_batch * model.seq_len / cp
    outputs = rows * model.heads / t * model.value_head_dim
    kv = rows * model.kv_heads * kv_repeat(model, layout) / t * (model.qk_head_dim + model.value_head_dim)
    queries = rows * model.heads / t * model.qk_head_dim
    if layout.cp_kernels is CpKernels.PYTORCH:
        forward = 12 * outputs + 38 * (cp - 1) * outputs + 4 * (cp - 1) * kv
        step = max(10 * queries + 21 * kv, 13 * queries + 18 * kv) + 4 * kv
        backward = 10 * (queries + kv) + 10 * queries + 18 * kv + (cp - 1) * step
        return forward, backward
    if layout.cp_comm is CpComm.ALL_GATHER:
        return 4 * cp * kv + 6 * outputs, 16 * cp * kv + 4 * queries
    reordered = 4 * (queries + kv + outputs) if layout.cp_comm.all_to_all else 0.0
    merges = layout.cp_ring_ranks - 1  # a2a+p2p: the ring between the groups
    accesses = 3 * model.dtype_bytes  # read running, read step, write running
    return merges * accesses * outputs + reordered, merges * accesses * (queries + kv) + reordered


def attention_call_shape(model: ModelSpec, layout: Layout) -> tuple[float, int]:
    """(the sequence one fused-attention call sees, the heads it runs on one tp rank): under context
    parallelism each ring or all-gather step sees ``s/cp`` queries and keys on the rank's heads; Ulysses
    (:attr:`CpComm.A2A`) gives each rank the whole sequence on ``1/cp`` of them, a2a+p2p its group's tokens on
    ``1/a`` of them."""
    heads = model.heads // layout.tp
    if layout.cp > 1 and layout.cp_comm.all_to_all:  # a2a+p2p: a group's s·a/cp tokens on 1/a of the heads
        a = layout.cp_a2a_ranks
        return model.seq_len * a / layout.cp, heads // a
    return model.seq_len / layout.cp, heads


def attention_shape_factors(model: ModelSpec, layout: Layout, chip: ChipSpec) -> tuple[float, float] | None:
    """What the chip's attention shape table scales its two fused-attention efficiencies by at this layer's shape
    (the sequence a call sees, :func:`attention_call_shape`); None where no table applies: unfused attention,
    a chip without one, or a chip whose measured tables time attention at the run's own shape."""
    if not layout.attention.fused or chip.attention_shape_rates is None:
        return None
    if measured_attention_rates(chip.measured, model.seq_len, model.qk_head_dim) is not None:
        return None
    return chip.attention_shape_rates.factors(attention_call_shape(model, layout)[0], model.qk_head_dim)


def _causal_blocks(tokens: int, tile: int | None) -> float:
    """The causal square of one sequence of ``tokens``: its elements (``tile`` None) or the ``tile × tile`` blocks
    a FlashAttention-class kernel computes."""
    if tile is None:
        return tokens * (tokens + 1) / 2
    q = math.ceil(tokens / tile)
    return q * (q + 1) / 2


def local_attention_share(model: ModelSpec, tile: int | None = None) -> float:
    """The model's causal attention work with its local layers (:attr:`ModelSpec.local_attention_layers`) over
    the same without them, averaged over its layers (one per-layer cost serves every layer: exact in sum for a
    stage holding the model's mix of layers, as an even split of alternating ones does). ``tile`` None: the
    masked score matrix's elements, else the ``tile × tile`` blocks a FlashAttention-class kernel computes (the
    partly masked blocks computed whole: its time).

    A sliding window ``w``: ``w·s − w(w − 1)/2`` of ``s(s + 1)/2`` elements; in blocks, a query tile reaches back
    ``⌈(w − 1)/tile⌉`` key tiles beside its own. Chunks of ``c``: each chunk a causal square of its own
    (``⌊s/c⌋`` of ``c`` tokens and the remainder), as when each runs as a sequence of its own (NeMo's Llama 4
    ``chunkify``), so its blocks are counted per chunk."""
    local = model.local_attention_layers
    if not local:
        return 1.0
    s = model.seq_len
    full = _causal_blocks(s, tile)
    if model.attention_chunk:
        c = model.attention_chunk
        band = (s // c) * _causal_blocks(c, tile) + (_causal_blocks(s % c, tile) if s % c else 0.0)
    else:
        w = model.sliding_window
        if tile is None:
            band = w * s - w * (w - 1) / 2
        else:
            q, reach = math.ceil(s / tile), math.ceil((w - 1) / tile) + 1
            band = full if q <= reach else reach * (reach + 1) / 2 + (q - reach) * reach
    return 1 - local / model.layers * (1 - band / full)


def fused_attention_slowdown(model: ModelSpec, layout: Layout, chip: ChipSpec) -> float:
    """How many times longer the run's fused attention kernel takes than a FlashAttention-2-class one (what the
    chip's attention rates and measured tables are): 1 for FlashAttention-2, cuDNN and SDPA; the Triton
    implementation's :data:`TRITON_FLASH_SLOWDOWN`; FlashAttention v1's ratio measured on the chip at the call's
    sequence and head size (:func:`~pipesim.analytic.attention_shapes.flash1_slowdown`)."""
    if layout.attention is AttentionKernel.TRITON:
        return TRITON_FLASH_SLOWDOWN
    if layout.attention is AttentionKernel.FLASH1:
        return flash1_slowdown(attention_call_shape(model, layout)[0], model.qk_head_dim, chip.attention_shape_rates)
    return 1.0


def attention_core_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> PassTimes:
    """``softmax(QKᵀ)·V`` on one tp rank, averaged over the model's layers: fused (Flash, causal half, the blocks
    outside a sliding window skipped too) or unfused (two batched GEMMs, full s², a window's mask applied to all
    of it). A chunked layer's fused attention is the chunks' own calls, each chunk a causal sequence of its own at
    the kernel's rate for that length (:func:`chunked_attention_times`)."""
    if model.attention_chunk and model.local_attention_layers and layout.attention.fused:
        return chunked_attention_times(model, layout, chip)
    b, s, t, cp = model.micro_batch, model.seq_len, layout.tp, layout.cp
    heads = model.heads // t
    # QKᵀ and ·V of this rank's queries against all keys (per head d_qk + d_v; 2·head_dim without MLA)
    full = 2 * b * s * s * heads * (model.qk_head_dim + model.value_head_dim) / cp
    if layout.attention.fused:
        # causal: the kernel skips blocks above the diagonal (and, local, those before the window or chunk)
        executed = full / 2 * local_attention_share(model, FLASH_TILE)
        # the measured tables and the chip's shares are FlashAttention-2-class kernels (SDPA, TE)
        slowdown = fused_attention_slowdown(model, layout, chip)
        if (rates := measured_attention_rates(chip.measured, s, model.qk_head_dim)) is not None:
            # timed at this run's own batch, heads and sequence: the shape effects below are in them already;
            # short runs, at the clock a training run sustains as the GEMM table's (_table_gemm_rate)
            sustained = chip.sustained_clock_ratio
            forward = slowdown * executed / (sustained * rates[0])
            backward = slowdown * 2.5 * executed / (sustained * rates[1])
        else:
            peak = chip.sustained_peak_for(Precision.BF16)  # attention stays BF16 in FP8 recipes (Transformer Engine)
            forward_rate = peak * chip.attention_forward_efficiency
            backward_rate = peak * chip.attention_backward_efficiency
            if (shape := attention_shape_factors(model, layout, chip)) is not None:
                forward_rate, backward_rate = forward_rate * shape[0], backward_rate * shape[1]
            seen, call_heads = attention_call_shape(model, layout)
            grid = cta_imbalance(max(1, math.ceil(seen / FLASH_TILE)), b * call_heads, chip.sm_count)
            forward = grid * slowdown * executed / forward_rate
            backward = grid * slowdown * 2.5 * executed / backward_rate
        merge_forward, merge_backward = cp_merge_bytes(model, layout)
        # PyTorch's merges are eager FP32 chains (casts, the log-sum-exp broadcast over the head dimension):
        # unvectorised (UnvectorisedBytes); Transformer Engine's are its own kernels
        merge_bandwidth = (chip.converting_stream_bandwidth if layout.cp_kernels is CpKernels.PYTORCH
                           else chip.stream_bandwidth)
        return PassTimes(forward + merge_forward / merge_bandwidth, backward + merge_backward / merge_bandwidth, 0.0)
    # Unfused: per (sequence, head) a s×s = (s×d)(d×s) product and a (s×s)(s×d) one; softmax in between.
    sq = s // cp
    # two batched kernels over every (sequence, head): the per-kernel overhead once each, not per head
    one = (gemm_kernel_time(sq, s, model.qk_head_dim, chip, Precision.BF16)
           + gemm_kernel_time(sq, model.value_head_dim, s, chip, Precision.BF16))
    gemms = b * heads * one + 2 * chip.gemm_kernel_overhead
    mask = 1 if model.dropout else 0
    scores = b * heads * sq * s
    softmax_bytes = scores * (2 + 2 + mask * (2 + 2 + 1))  # read scores, write probs; dropout reads, writes, mask
    forward = gemms + softmax_bytes / chip.stream_bandwidth
    return PassTimes(forward, NON_GEMM_BACKWARD * forward, 0.0)


def chunked_attention_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> PassTimes:
    """A chunked model's fused attention per layer: its full-attention layers' calls over the whole sequence, and
    its chunked layers' over ``⌊s/c⌋`` sequences of ``c`` tokens a microbatch sequence plus the remainder, as NeMo's
    Llama 4 reshapes the chunks into the batch (``chunkify``), averaged over the layers (one per-layer cost serves
    every layer, as :func:`local_attention_share`'s)."""
    plain = replace(model, attention_chunk=0, global_attention_every=0)
    b, s, c = model.micro_batch, model.seq_len, model.attention_chunk
    full = attention_core_times(plain, layout, chip)
    chunks = attention_core_times(replace(plain, seq_len=c, micro_batch=b * (s // c)), layout, chip)
    if s % c:
        chunks = chunks + attention_core_times(replace(plain, seq_len=s % c), layout, chip)
    local = model.local_attention_layers / model.layers
    return full.scaled(1 - local) + chunks.scaled(local)


def elementwise_bytes(model: ModelSpec, layout: Layout, tokens: int, kind: LayerKind = LayerKind.DENSE) -> float:
    """Bytes the forward's memory-bound kernels move per tp rank (norms, residual adds, activation, RoPE and, where
    they are repeated, the keys' and values' copy to every query head; in a MoE layer also the permutation of the
    routed tokens before the experts and back after them, each a read and a write of ``k·h`` elements per
    token)."""
    t, d = layout.tp, model.dtype_bytes
    width = _norm_width(model, layout)
    mask = 0.5 if model.dropout else 0.0  # a 1-byte mask per element, written in the forward
    norms = _norm_bytes_per_element(model, layout) * _normed_elements(model, layout)
    residuals = 2 * (3 * width * d + mask * 2 * width)
    f = mlp_width(model, layout, kind)
    permute = 0.0 if kind is LayerKind.DENSE else _permute_bytes(model, layout)
    activation = _activation_bytes_per_element(model, layout) * f / t
    rope = _rope_bytes(model, layout) + repeat_kv_bytes(model, layout)
    if layout.elementwise.eager:
        residuals, transpose = _eager_bytes(model, layout, width, residuals)
        return tokens * (norms + residuals + activation + rope + permute + transpose)
    return tokens * (norms + residuals + activation + rope + permute)


def _permute_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes per token of a MoE layer's permutation of its routed tokens, before the experts and back after them:
    a read and a write of ``k·h`` elements each way (the rank's own share of them under MoE parallel folding)."""
    return (2 * 2 * model.experts_per_token * model.hidden * model.dtype_bytes * layout.moe_imbalance
            * layout.expert_token_share)


def elementwise_backward_bytes(model: ModelSpec, layout: Layout, tokens: int,
                               kind: LayerKind = LayerKind.DENSE) -> float:
    """Bytes the input backward's memory-bound kernels move per tp rank, before the chip's
    ``elementwise_backward_ratio``.

    Fused kernels: the forward's bytes, so the measured ratio is their whole difference (Qi et al. 2024's
    per-pass profile times fused kernels, not their bytes). Eager ops: what autograd's backward formulas move,
    op by op, which is the forward's for RoPE, the residual adds, dropout and the transpose, but not for
    two ops (d: the activations' bytes, 2 in BF16; FP32 intermediates 4):

    - RMSNorm through FP32 (:func:`_eager_bytes`' eight kernels): ``* weight`` gives the input gradient (read
      d, write d) and the weight's (the product, read 2d, write d, then its sum over tokens, read d); the cast
      back to the input's dtype reverses (read d, write 4); ``x·rsqrt(·)`` gives the gradient to ``x``
      (read 4, write 4) and to the per-token scale (the product, read 8, write 4, and its sum, read 4); the
      mean's gradient expands to every element (write 4); ``pow(2)``'s is ``2·x·grad`` (two kernels: read 4,
      write 4; read 8, write 4); the two paths into ``x`` add (read 8, write 4); the cast to FP32 reverses
      (read 4, write d): 68 + 8d bytes an element, against the forward's 28 + 4d.
    - SwiGLU as ``silu(gate) * up``: the product's gradient to each factor (read 2d, write d, twice) and
      SiLU's backward (read the gradient and ``gate``, write d): 9d per inner element, against the forward's 5d.
    """
    forward = elementwise_bytes(model, layout, tokens, kind)
    if not layout.elementwise.eager:
        return forward
    norms = (_norm_backward_bytes_per_element(model, layout) - _norm_bytes_per_element(model, layout)
             ) * _normed_elements(model, layout)
    activation = (_activation_backward_bytes_per_element(model, layout) - _activation_bytes_per_element(model, layout)
                  ) * mlp_width(model, layout, kind) / layout.tp
    return forward + tokens * (norms + activation)


@dataclass(frozen=True)
class UnvectorisedBytes:
    """Bytes per tp rank of the memory-bound kernels that stream below ``memory_efficiency`` because PyTorch
    cannot load their operands vectorised (ATen does so only for contiguous operands of the op's own dtype:
    ``gpu_kernel_impl``, ``aten/src/ATen/native/cuda/CUDALoops.cuh``). They are part of the totals
    :func:`elementwise_bytes` and its kin count, which are charged at the streaming rate;
    :meth:`extra_seconds` adds what they take beyond it. The rates are measured
    (:mod:`pipesim.validation.memory_bound_kernels`)."""

    # a gated activation over the two halves of one fused gate-and-up GEMM's output, eager copies out of views
    strided: float = 0.0
    converting: float = 0.0  # the eager chains through FP32 and back (RMSNorm's, RoPE's, PyTorch's CP merges)

    def extra_seconds(self, chip: ChipSpec) -> float:
        """Seconds these bytes take beyond the streaming rate (``strided_memory_efficiency`` and
        ``converting_memory_efficiency`` against ``memory_efficiency``)."""
        stream = 1 / chip.stream_bandwidth
        return (self.strided * (1 / chip.strided_stream_bandwidth - stream)
                + self.converting * (1 / chip.converting_stream_bandwidth - stream))


def strided_activation(model: ModelSpec, layout: Layout) -> bool:
    """Whether a gated MLP's activation reads the two halves of one GEMM's output (:attr:`MlpUp.FUSED`:
    Megatron-Core's ``linear_fc1``, nanotron's ``gate_up_proj``), each row of each half a stride apart: whether
    the activation is eager PyTorch or compiled, it then streams at ``strided_memory_efficiency`` (Liger's H100
    table: 0.54 and 0.56). Two linears (:attr:`MlpUp.SPLIT`) hand it contiguous operands."""
    return model.gated and layout.mlp_up is MlpUp.FUSED


def runs_unvectorised(model: ModelSpec, layout: Layout) -> tuple[bool, bool]:
    """Whether the layout runs any strided and any converting memory-bound work (:class:`UnvectorisedBytes`, and
    PyTorch's context-parallel merges): (strided, converting)."""
    slow = unvectorised_bytes(model, layout, tokens=1)
    return slow.strided > 0, slow.converting > 0 or (layout.cp > 1 and layout.cp_kernels is CpKernels.PYTORCH)


def _classified(model: ModelSpec, layout: Layout, *, activation: float, rope: float, norms: float,
                copies: float = 0.0) -> UnvectorisedBytes:
    """Which of these memory-bound bytes stream unvectorised: the activation's where it reads a fused GEMM's halves
    (:func:`strided_activation`) and the ``copies`` out of views, strided; RoPE's and the norms' where they run as
    the eager chains through FP32, converting."""
    strided = copies + (activation if strided_activation(model, layout) else 0.0)
    converting = ((rope if layout.elementwise.eager_rope else 0.0)
                  + (norms if model.rms_norm and layout.elementwise.eager_norms else 0.0))
    return UnvectorisedBytes(strided, converting)


def unvectorised_bytes(model: ModelSpec, layout: Layout, tokens: int, kind: LayerKind = LayerKind.DENSE,
                       backward: bool = False) -> UnvectorisedBytes:
    """The part of :func:`elementwise_bytes` (``backward``: of :func:`elementwise_backward_bytes`) that streams
    unvectorised: strided, the gated activation over a fused GEMM's halves (:func:`strided_activation`) and the eager
    modules' copies out of transposed views (:func:`_relayout_copy_bytes`: rows a stride apart as the halves' are,
    classed with them by that, not measured alone) and, eager, the keys and values repeated out of an expanded view
    (:func:`repeat_kv_bytes`); converting, the eager RMSNorm and RoPE chains
    (``--elementwise eager``; RoPE also under ``eager-fused-norm``), which convert to FP32 and back, broadcast the
    norm's scale and the rotation's tables, and read rotated or complex views."""
    copies = _relayout_copy_bytes(model, layout)  # the same bytes each way: a copy's gradient is a copy
    if layout.elementwise.eager:  # keys and values copied out of an expanded view (compiled, Inductor's own kernel)
        copies += repeat_kv_bytes(model, layout)
    activation = (_activation_backward_bytes_per_element if backward else _activation_bytes_per_element)(
        model, layout) * mlp_width(model, layout, kind) / layout.tp
    norms = (_norm_backward_bytes_per_element if backward else _norm_bytes_per_element)(
        model, layout) * _normed_elements(model, layout)
    return _classified(model, layout, activation=tokens * activation, rope=tokens * _rope_bytes(model, layout),
                       norms=tokens * norms, copies=tokens * copies)


def elementwise_time(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                     kind: LayerKind = LayerKind.DENSE, backward: bool = False) -> float:
    """Seconds of the forward's memory-bound kernels per tp rank (``backward``: the input backward's, before the
    chip's ``elementwise_backward_ratio``): their bytes at the streaming rate, the unvectorised ones at theirs."""
    moved = (elementwise_backward_bytes if backward else elementwise_bytes)(model, layout, tokens, kind)
    slow = unvectorised_bytes(model, layout, tokens, kind, backward)
    return moved / chip.stream_bandwidth + slow.extra_seconds(chip)


def activation_time(model: ModelSpec, layout: Layout, chip: ChipSpec, elements: float) -> float:
    """Seconds of the MLP's activation forward over ``elements`` inner elements per tp rank: over a fused GEMM's
    strided halves at ``strided_memory_efficiency`` (:func:`strided_activation`), otherwise at the streaming rate."""
    bandwidth = chip.strided_stream_bandwidth if strided_activation(model, layout) else chip.stream_bandwidth
    return elements * _activation_bytes_per_element(model, layout) / bandwidth


def _norm_width(model: ModelSpec, layout: Layout) -> float:
    """Elements per token a norm or residual add touches on one tp rank: the whole h unless sequence parallelism
    shards it."""
    return model.hidden / (layout.tp if layout.sequence_parallel else 1)


def _rope_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes RoPE moves per token on one tp rank over the queries and keys: read and written once fused; in the
    complex form of eager ops (:func:`_eager_bytes`) 16 + 2d an element. None with learned positions."""
    if model.learned_positions:
        return 0.0
    d = model.dtype_bytes
    per_element = 4 * FP32 + 2 * d if layout.elementwise.eager_rope else 2 * d
    return per_element * (model.q_width + model.k_width) / layout.tp


def _norm_bytes_per_element(model: ModelSpec, layout: Layout) -> float:
    """Bytes a norm's forward moves per element: read and write once fused; through FP32 as eager RMSNorm's
    eight kernels (:func:`_eager_bytes`)."""
    d = model.dtype_bytes
    return 7 * FP32 + 4 * d if model.rms_norm and layout.elementwise.eager_norms else 2 * d


def _norm_backward_bytes_per_element(model: ModelSpec, layout: Layout) -> float:
    """Bytes a norm's input backward moves per element: eager RMSNorm's twelve kernels 68 + 8d
    (:func:`elementwise_backward_bytes`); fused, the forward's."""
    d = model.dtype_bytes
    return 68 + 8 * d if model.rms_norm and layout.elementwise.eager_norms else _norm_bytes_per_element(model, layout)


def _activation_backward_bytes_per_element(model: ModelSpec, layout: Layout) -> float:
    """Bytes the activation's input backward moves per inner element: eager SwiGLU's three kernels 9d
    (:func:`elementwise_backward_bytes`); fused, the forward's."""
    if model.gated and layout.elementwise.eager_activation:
        return 9 * model.dtype_bytes
    return _activation_bytes_per_element(model, layout)


def _activation_bytes_per_element(model: ModelSpec, layout: Layout) -> float:
    """Bytes the MLP's activation moves per inner element: fused, its inputs (two when gated) and output; as
    eager SwiGLU's two kernels (:func:`_eager_bytes`), 5d."""
    d = model.dtype_bytes
    if model.gated and layout.elementwise.eager_activation:
        return 5 * d
    return (3 if model.gated else 2) * d


def mla_up_projections(model: ModelSpec, layout: Layout) -> list[tuple[int, int]]:
    """(output width, input width) per tp rank of latent attention's up projections, what Megatron-Core's
    ``mla_up_proj`` module re-runs: the queries' (from the query latent, or from the hidden state without a
    query bottleneck) and the keys' and values' from their latent (:func:`attention_shapes`' second and fourth,
    or first and third). Empty for standard attention."""
    if not model.mla:
        return []
    shapes = attention_shapes(model, layout)
    return [shapes[1], shapes[3]] if model.q_lora_rank else [shapes[0], shapes[2]]


def selective_recompute_gemms(model: ModelSpec, layout: Layout, tokens: int) -> list[tuple[int, int, int, int]]:
    """The weight GEMMs a selective recomputation re-runs, as :func:`layer_gemms` gives them: latent attention's
    up projections under ``mla_up_proj`` (:func:`mla_up_projections`); none otherwise."""
    if RecomputeModule.MLA_UP_PROJ not in layout.recomputed_modules:
        return []
    return [(tokens, n_out, k_in, 1) for n_out, k_in in mla_up_projections(model, layout)]


def shared_expert_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> PassTimes:
    """A MoE layer's shared experts on one tp rank, per microbatch: their GEMMs (one MLP of their summed width) and
    activation (what ``--moe-shared-expert-overlap`` runs beside the dispatch and combine); 0 without them."""
    if not model.shared_experts:
        return PassTimes(0.0, 0.0, 0.0)
    tokens = model.micro_batch * model.seq_len // layout.cp
    width = model.shared_experts * model.shared_expert_ffn_hidden
    gemms = gemm_group_times([(tokens, n, k, 1) for n, k in _mlp_shapes(model, width, layout.tp)], chip,
                             layout.precision)
    activation = activation_time(model, layout, chip, tokens * width / layout.tp)
    return PassTimes(gemms.forward + activation, gemms.backward_input + activation, gemms.backward_weight)


def recomputed_mlp_width(model: ModelSpec, layout: Layout, kind: LayerKind) -> float:
    """The MLP width (before tp) whose submodule a selective recomputation checkpoints whole: a dense layer's under
    ``mlp``; a MoE layer's routed and shared experts under ``moe``, its shared experts alone under
    ``shared_experts``; 0 otherwise."""
    modules = layout.recomputed_modules
    if kind is LayerKind.DENSE:
        return model.ffn_hidden if RecomputeModule.MLP in modules else 0.0
    if RecomputeModule.MOE in modules:
        return mlp_width(model, layout, kind)
    if RecomputeModule.SHARED_EXPERTS in modules:
        return model.shared_experts * model.shared_expert_ffn_hidden
    return 0.0


def recomputes_moe_block(layout: Layout, kind: LayerKind) -> bool:
    """Whether a MoE layer's whole MLP block, its dispatch and combine included, is recomputed (``moe``)."""
    return kind is LayerKind.MOE and RecomputeModule.MOE in layout.recomputed_modules


def module_recompute_gemms(model: ModelSpec, layout: Layout, tokens: int,
                           kind: LayerKind = LayerKind.DENSE) -> list[tuple[int, int, int, int]]:
    """The weight GEMMs the checkpointed submodules re-run, as :func:`layer_gemms` gives them: a dense layer's MLP
    (``mlp``), a MoE layer's router, shared and routed experts (``moe``) or its shared experts (``shared_experts``)."""
    if not recomputed_mlp_width(model, layout, kind):
        return []
    block = layer_gemms(model, layout, tokens, kind)[len(attention_shapes(model, layout)):]
    if kind is LayerKind.DENSE or recomputes_moe_block(layout, kind):
        return block
    width = model.shared_experts * model.shared_expert_ffn_hidden
    return [(tokens, n, k, 1) for n, k in _mlp_shapes(model, width, layout.tp)]


def selective_recompute_bytes(model: ModelSpec, layout: Layout, tokens: int,
                              kind: LayerKind = LayerKind.DENSE) -> float:
    """Bytes the memory-bound work a selective recomputation re-runs moves per tp rank
    (:attr:`~pipesim.analytic.layout.Layout.recomputed_modules`): the two block norms' forward (``layernorm``), the
    routed experts' activation in a MoE layer (``moe_act``), RoPE on the queries and keys (``mla_up_proj``), the
    activation of a checkpointed MLP (``mlp``, ``shared_experts``) and under ``moe`` the tokens' permutation too; as
    the forward moves them (:func:`elementwise_bytes`)."""
    rope, norms = _selective_recompute_rope_and_norms(model, layout)
    moved = rope + norms + _activation_bytes_per_element(model, layout) * _recomputed_activation_width(
        model, layout, kind) / layout.tp
    if recomputes_moe_block(layout, kind):
        moved += _permute_bytes(model, layout)
    return tokens * moved


def _selective_recompute_rope_and_norms(model: ModelSpec, layout: Layout) -> tuple[float, float]:
    """Bytes per token a selective recomputation's RoPE (``mla_up_proj``) and block norms (``layernorm``) move
    again, as the forward moves them."""
    modules = layout.recomputed_modules
    rope = _rope_bytes(model, layout) if RecomputeModule.MLA_UP_PROJ in modules and model.mla else 0.0
    norms = (_norm_bytes_per_element(model, layout) * 2 * _norm_width(model, layout)
             if RecomputeModule.LAYERNORM in modules else 0.0)
    return rope, norms


def _recomputed_activation_width(model: ModelSpec, layout: Layout, kind: LayerKind) -> float:
    """The MLP inner width (before tp) whose activation a selective recomputation runs again: a checkpointed
    MLP's, and under ``moe_act`` alone the routed experts'."""
    width = recomputed_mlp_width(model, layout, kind)
    if (RecomputeModule.MOE_ACT in layout.recomputed_modules and kind is LayerKind.MOE
            and not recomputes_moe_block(layout, kind)):
        width += routed_width(model, layout)
    return width


def selective_recompute_time(model: ModelSpec, layout: Layout, chip: ChipSpec, tokens: int,
                             kind: LayerKind = LayerKind.DENSE) -> float:
    """Seconds of :func:`selective_recompute_bytes` per tp rank: at the streaming rate, the unvectorised part
    (the activation over a fused GEMM's halves, eager RoPE and norms: :class:`UnvectorisedBytes`) at its own."""
    rope, norms = _selective_recompute_rope_and_norms(model, layout)
    activation = (_activation_bytes_per_element(model, layout) * _recomputed_activation_width(model, layout, kind)
                  / layout.tp)
    slow = _classified(model, layout, activation=tokens * activation, rope=tokens * rope, norms=tokens * norms)
    return selective_recompute_bytes(model, layout, tokens, kind) / chip.stream_bandwidth + slow.extra_seconds(chip)


def _normed_elements(model: ModelSpec, layout: Layout) -> float:
    """Elements per token the layer's norms read on one tp rank: the two before attention and the MLP (four with
    ``sandwich_norm``), and with ``qk_norm`` the queries and keys, each head normalised on its own (the heads split
    over tp)."""
    qk = (model.q_width + model.k_width) / layout.tp if model.qk_norm else 0.0
    return model.block_norms * _norm_width(model, layout) + qk


def mlp_width(model: ModelSpec, layout: Layout, kind: LayerKind) -> float:
    """The MLP's inner width per token, before tp: the dense MLP's, or a MoE layer's routed experts (on the
    most-loaded rank) and shared experts."""
    if kind is LayerKind.DENSE:
        return model.ffn_hidden
    return routed_width(model, layout) + model.shared_experts * model.shared_expert_ffn_hidden


def routed_width(model: ModelSpec, layout: Layout) -> float:
    """The routed experts' inner width one token's share of a MoE layer takes on the most-loaded rank:
    ``k·f_e·imbalance`` (before tp)."""
    return model.experts_per_token * model.expert_ffn_hidden * layout.moe_imbalance


FP32 = 4  # bytes of an FP32 intermediate


def _eager_bytes(model: ModelSpec, layout: Layout, width: float, residuals: float) -> tuple[float, float]:
    """Bytes per token of the same work run as one PyTorch kernel per op (the reference Llama modules, Meta's
    ``llama/model.py`` and Hugging Face's, without torch.compile), against the fused counts of
    :func:`elementwise_bytes` (d: the activations' bytes, 2 in BF16): here the residual adds (``residuals``, the
    fused count, with dropout as its own kernel) and the copies, returned as (residuals, copies); the norms',
    RoPE's and the activation's per-element bytes are :func:`_norm_bytes_per_element`, :func:`_rope_bytes` and
    :func:`_activation_bytes_per_element`'s.

    - RMSNorm: ``x.float()`` (read d, write 4), ``pow(2)`` (4 + 4), ``mean`` (read 4), ``x * rsqrt(...)``
      (4 + 4), ``.type_as(x)`` (4 + d), ``* weight`` (d + d): 28 + 4d bytes per element, where the fused kernel
      reads and writes d each (kept with ``EAGER_FUSED_NORM``). ``F.layer_norm`` is one kernel in eager PyTorch
      too: unchanged.
    - RoPE in the complex form: queries and keys to FP32 (d + 4), the complex product with the cached
      frequencies (4 + 4), back to BF16 (4 + d): 16 + 2d per element, against the fused kernel's 2d.
    - SwiGLU: ``silu(gate)`` (d + d), then ``* up`` (2d + d): 5d per inner element, against 3d.
    - Dropout before a residual add is its own kernel (read d, write d) beside the add.
    - The attention output is transposed back to (tokens, heads·d_v) by a copy (d + d).
    - nanotron's ``CausalSelfAttention`` (:attr:`ElementwiseKernels.relayouts_attention_inputs`) copies the
      queries, keys and values from the projection's (sequence, batch) layout to batch-major
      (``transpose(0, 1).contiguous()``, three copies), concatenates keys and values (``torch.cat``) and permutes
      the pair into the layout flash-attn's rotary kernel takes (``permute(...).contiguous()``): each of its
      widths moved once and the keys' and values' three times, d + d an element.
    The backward of a copy is a copy of its gradient (a strided gradient the next op makes contiguous), so
    :func:`elementwise_backward_bytes` counts the forward's bytes for these."""
    if layout.elementwise.eager_rope and model.dropout:  # (with fused RoPE, dropout is inside the add)
        residuals += 2 * 2 * model.dtype_bytes * width
    return residuals, _relayout_copy_bytes(model, layout)


def _relayout_copy_bytes(model: ModelSpec, layout: Layout) -> float:
    """Bytes per token of the eager modules' copies out of transposed or permuted views (:func:`_eager_bytes`: the
    attention output's, nanotron's queries', keys' and values'), which read rows a stride apart."""
    d = model.dtype_bytes
    ops = layout.elementwise
    copies = 2 * d * model.attention_out_width / layout.tp if ops.copies_attention_output else 0.0
    if ops.relayouts_attention_inputs:
        copies += 2 * d * (model.q_width + 3 * (model.k_width + model.v_width)) / layout.tp
    return copies


FP8_CAST_BYTES = 3  # Transformer Engine's cast: read BF16, write FP8
FP8_TRANSPOSE_BYTES = 1  # and, where FP8 GEMMs take only the TN layout, write its FP8 transpose too
# The NVFP4 cast reads BF16 and writes the row-wise copy and the column-wise one: the scales run along the GEMM's
# inner dimension, which the weight gradient's GEMM takes along the other axis, so the column-wise copy is a
# second quantization with scales of its own on any chip (TE's NVFP4Quantizer makes both where the tensor is
# used both ways; no layout rule spares it, unlike FP8's transpose on Blackwell).
NVFP4_CAST_BYTES = 2 + 2 * Precision.FP4.element_bytes
# Per-tensor current scaling (FP8's "tensorwise" recipe; NVFP4's per-tensor FP32 scale, which its block scales are
# relative to) needs the tensor's amax before the cast: Transformer Engine reads the BF16 tensor once more first
# (nvte_compute_amax), 2 bytes an element. Delayed scaling takes the scale from earlier steps' amax and records
# this one's inside the cast.
AMAX_PASS_BYTES = 2
# torchao's Float8Linear casts its BF16 weight with dynamic (current) scaling wherever a GEMM reads it
# (``matmul_with_hp_or_float8_args``: ``hp_tensor_to_float8_dynamic`` on ``weight_hp_t`` in the forward and again
# for ``grad_input``; its note: "to reuse max(abs(weight)) from the forward ... without reading the entire tensor"
# is not possible yet): the amax pass and the cast, each time.
TORCHAO_WEIGHT_CAST_BYTES = AMAX_PASS_BYTES + FP8_CAST_BYTES
# Under its FSDP float8 all-gather (Layout.fp8_all_gather) torchao casts each rank's FP32 shard of a weight to FP8
# before the gather instead (WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather, with the scale computed once a
# step: read 4, write 1), and no GEMM casts a weight.
FSDP_SHARD_CAST_BYTES = 4 + 1


def quantization_cast_bytes(model: ModelSpec, layout: Layout, tokens: int,
                            kind: LayerKind = LayerKind.DENSE, transposed: bool = True) -> tuple[float, float]:
    """Bytes Transformer Engine's FP8 (or NVFP4) casts move per tp rank: (forward, input backward); 0 in BF16.

    Hopper's FP8 tensor cores take only the "TN" layout (cuBLASLt's FP8 requirement), so every tensor a GEMM
    uses both ways is cast with its transpose in one kernel (TE's ``cast_transpose``): each GEMM input in the
    forward (kept for the weight gradient as ``Xᵀ``) and each GEMM's output gradient in the backward
    (``dY`` for the input gradient, ``dYᵀ`` for the weight gradient) — read BF16, write FP8 twice. Blackwell's
    take any layout, and Transformer Engine then makes no transpose (its quantizers create the column-wise copy
    only when ``!non_tn_fp8_gemm_supported()``, compute capability below 10.0): ``transposed`` False (the chip's
    ``fp8_weight_transpose``), read BF16 and write FP8 once. The forward's widths are the GEMMs' inputs, the
    backward's their outputs; Transformer Engine's weight casts run once per step (cached across microbatches:
    :func:`weight_cast_time`), where torchao's linears (:class:`~pipesim.analytic.layout.Fp8Linears`) cast the BF16
    weight at every GEMM that reads it, once in the forward and once more for the input gradient (dynamic scaling:
    an amax pass and the cast, :data:`TORCHAO_WEIGHT_CAST_BYTES` an element each time), unless FSDP gathers them in
    FP8 (:attr:`~pipesim.analytic.layout.Layout.fp8_all_gather`: each rank's shard cast before every gather,
    :data:`FSDP_SHARD_CAST_BYTES`, once a step under pipelining, where the gather is, and left out). NVFP4 casts write a
    row-wise and a column-wise copy on every chip (:data:`NVFP4_CAST_BYTES`).
    Per-tensor current scaling (FP8's ``tensorwise`` recipe; NVFP4 always, for its per-tensor scale) reads each
    tensor once more for its amax first (:data:`AMAX_PASS_BYTES`). Not counted: NVFP4's optional random Hadamard
    transform of the weight gradient's inputs.
    """
    if not layout.precision.quantized:
        return 0.0, 0.0
    groups = layer_gemms(model, layout, tokens, kind)
    if layout.precision is Precision.FP4:
        per_element = NVFP4_CAST_BYTES + AMAX_PASS_BYTES
    else:
        per_element = FP8_CAST_BYTES + (FP8_TRANSPOSE_BYTES if transposed else 0)
        if layout.fp8_recipe is Fp8Recipe.TENSORWISE:
            per_element += AMAX_PASS_BYTES
    forward = sum(rows * count * k_in for rows, _, k_in, count in groups) * per_element
    backward = sum(rows * count * n_out for rows, n_out, _, count in groups) * per_element
    weights = sum(count * k_in * n_out for _, n_out, k_in, count in groups)
    if layout.fp8_all_gather:  # torchao's FSDP float8 all-gather: each rank casts its shard before every gather
        shard = weights / layout.shards * FSDP_SHARD_CAST_BYTES if layout.gathers_per_layer else 0.0
        return forward + shard, backward + (shard if layout.regathers_for_backward else 0.0)
    if not layout.keeps_quantized_copies:  # torchao: each GEMM casts its weight, forward and input backward
        cast = weights * TORCHAO_WEIGHT_CAST_BYTES
        forward, backward = forward + cast, backward + cast
    return forward, backward


# FSDP2's copy-out of a per-layer gather (Layout.fsdp2): the gathered bytes read from the all-gather buffer and
# written into the parameters, on the compute stream (foreach_all_gather_copy_out waits for the gather there)
FSDP2_COPY_OUT_PASSES = 2


def fsdp2_copy_out_bytes(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> tuple[float, float]:
    """Bytes FSDP2's copy-out moves per layer and microbatch on the compute stream, (forward, backward): each
    per-layer gather of the layer's weights (:attr:`~pipesim.analytic.layout.Layout.gathered_weight_bytes` a
    weight) read and written once, before the forward and, where the layer gathers again, before the backward.
    Nothing without per-layer gathers (under pipelining the stage gathers once a step) or under FSDP1."""
    if not (layout.fsdp2 and layout.gathers_per_layer):
        return 0.0, 0.0
    gathered = layer_params(model, kind) / layout.tp * layout.gathered_weight_bytes * FSDP2_COPY_OUT_PASSES
    return gathered, gathered if layout.regathers_for_backward else 0.0


def layer_times(model: ModelSpec, layout: Layout, chip: ChipSpec, kind: LayerKind = LayerKind.DENSE) -> PassTimes:
    """One transformer layer on one tp rank, per microbatch (TP communication and MoE all-to-all not included)."""
    tokens = model.micro_batch * model.seq_len // layout.cp
    linear = linear_times(model, layout, chip, tokens, kind)
    core = attention_core_times(model, layout, chip)
    elementwise = elementwise_time(model, layout, chip, tokens, kind)
    elementwise_backward = elementwise_time(model, layout, chip, tokens, kind, backward=True)
    casts = quantization_cast_bytes(model, layout, tokens, kind, chip.fp8_weight_transpose)
    cast_forward, cast_backward = (b / chip.stream_bandwidth for b in casts)
    forward = linear.forward + core.forward + elementwise + cast_forward
    backward_input = (linear.backward_input + core.backward_input
                      + chip.elementwise_backward_ratio * elementwise_backward + cast_backward)
    if layout.recompute is Recompute.PER_OP:  # the unsaved matmuls and all the element-wise work, not attention
        recompute = (gemm_group_times(per_op_recomputed_gemms(model, layout, tokens), chip, layout.precision).forward
                     + elementwise + cast_forward)
    elif layout.recompute is Recompute.SELECTIVE:  # the modules it re-runs (Megatron-Core's core_attn alone unasked)
        recompute = ((core.forward if layout.recomputes_attention_core else 0.0)
                     + gemm_group_times(selective_recompute_gemms(model, layout, tokens)
                                        + module_recompute_gemms(model, layout, tokens, kind), chip,
                                        layout.precision).forward
                     + selective_recompute_time(model, layout, chip, tokens, kind))
    else:
        recompute = {Recompute.NONE: 0.0, Recompute.FULL: forward}[layout.recompute]
    # FSDP2's copy-outs run with the passes' kernels (a recomputed forward finds its layer gathered already)
    copy_forward, copy_backward = (b / chip.stream_bandwidth for b in fsdp2_copy_out_bytes(model, layout, kind))
    return PassTimes(forward + copy_forward, backward_input + copy_backward, linear.backward_weight, recompute)


def cp_attention_kernels(layout: Layout) -> tuple[int, int]:
    """Kernels of one fused attention (forward, input backward) as the context-parallel code issues them, from
    the structure :func:`cp_merge_bytes` reads (FlashAttention's backward three kernels a call). Without CP:
    one and three. Transformer Engine's ring: a kernel and, after the first, a correction per step. Its
    all-gather: the reorders, two query chunks and their copies into place. Its all-to-alls: one call and the
    reorders of the four tensors they carry. PyTorch's: a call per step, about ten eager ops merging each
    step after the first and the casts; in the backward about seven kernels a step and the zeroing."""
    cp = layout.cp
    if layout.cp_kernels is CpKernels.PYTORCH and cp > 1:
        return cp + 10 * (cp - 1) + 4, 7 * cp + 5
    if cp > 1 and layout.cp_comm is CpComm.ALL_GATHER:
        return 7, 16
    n, reorders = layout.cp_ring_ranks, 4 if cp > 1 and layout.cp_comm.all_to_all else 0
    return 2 * n - 1 + reorders, 4 * n - 1 + reorders


@dataclass(frozen=True)
class PassKernels:
    """Kernels the host issues for one block per microbatch, by pass (:func:`layer_kernel_counts`)."""

    forward: int
    backward_input: int
    backward_weight: int
    recompute: int = 0

    def __add__(self, other: PassKernels) -> PassKernels:
        return PassKernels(self.forward + other.forward, self.backward_input + other.backward_input,
                           self.backward_weight + other.backward_weight, self.recompute + other.recompute)

    def scaled(self, n: int) -> PassKernels:
        return PassKernels(n * self.forward, n * self.backward_input, n * self.backward_weight, n * self.recompute)


def layer_kernel_counts(model: ModelSpec, layout: Layout, kind: LayerKind = LayerKind.DENSE) -> PassKernels:
    """Kernels one layer launches per microbatch on one rank, the way Megatron-Core with Transformer Engine runs
    it: each launch costs the host :attr:`ChipSpec.host_kernel_overhead` whatever its size.

    Forward: two norms (four with ``sandwich_norm``); one launch per weight GEMM (a routed expert's GEMM is one
    per local expert: TE's grouped linear loops over them); fused RoPE on the queries and on the keys; the
    attention kernel (one per ring step under context parallelism, with the step's transfer; unfused: two batched
    GEMMs and a softmax);
    two fused bias-dropout-adds; the activation; the tensor-parallel collectives (an all-gather and a
    reduce-scatter per block with sequence parallelism, an all-reduce without); in a MoE layer the router's
    softmax and top-k, the permutation and its inverse, and the dispatch and combine all-to-alls; in FP8, a
    cast-transpose per GEMM input. The input backward mirrors it, with FlashAttention's backward as three
    kernels (the dO·O preprocessing, the main kernel, the dQ conversion) and, with eager ops, an FP32 RMSNorm's
    backward as twelve and SwiGLU's as three (autograd's formulas); K and V repeated to the query heads, a copy
    each way for each (:func:`repeat_kv_bytes`); the weight backward is one GEMM
    per weight. Counted from the modules' structure, not from a trace: a few kernels either way."""
    gemms = sum(count for *_, count in layer_gemms(model, layout, 1, kind))
    rope = 0 if model.learned_positions else 2
    if layout.attention.fused:
        attention_fwd, attention_bwd = cp_attention_kernels(layout)
    else:
        attention_fwd, attention_bwd = 3 + (1 if model.dropout else 0), 5
    tp_comm = (4 if layout.sequence_parallel else 2) if layout.tp > 1 else 0
    moe = 0
    if kind is LayerKind.MOE:
        moe = 4 + (2 if layout.ep > 1 else 0)
    casts = gemms if layout.precision.quantized else 0
    norms, activation, residuals, transpose = model.block_norms, 1, 2, 0
    norms_backward, activation_backward = norms, activation
    ops = layout.elementwise
    if model.rms_norm and ops.eager_norms:  # the ops of _eager_bytes, one kernel each
        # to FP32, pow, mean, + ε, rsqrt, mul, to BF16, × weight; the backward's twelve are
        # elementwise_backward_bytes' (× weight's two products and the weight's sum, the cast, × rsqrt's gradient,
        # the scale's product and sum, the mean's expansion, pow's two, the paths' sum, the cast)
        norms, norms_backward = model.block_norms * 8, model.block_norms * 12
    if model.gated and ops.eager_activation:  # silu(gate) · up; its backward: the product's two gradients and SiLU's
        activation, activation_backward = 2, 3
    if ops.eager_rope:
        rope = 0 if model.learned_positions else 2 * 3
        residuals = 2 * (2 if model.dropout else 1)
    if ops.copies_attention_output:
        transpose = 1
    if ops.relayouts_attention_inputs:  # three transposing copies, the concatenation, the permuting copy
        transpose += 5
    if kv_repeat(model, layout) != 1.0:  # K's and V's copy to every query head; backward, their sums back
        transpose += 2
    elementwise = norms + rope + residuals + activation + transpose
    elementwise_backward = elementwise - norms - activation + norms_backward + activation_backward
    per_op_gemms = len(per_op_recomputed_gemms(model, layout, 1))  # each with its cast-transpose in FP8
    forward = gemms + attention_fwd + elementwise + tp_comm + moe + casts
    backward_input = gemms + attention_bwd + elementwise_backward + tp_comm + moe + casts
    modules = layout.recomputed_modules
    up_projections = len(selective_recompute_gemms(model, layout, 1))  # each with its cast in FP8; then RoPE's
    checkpointed = sum(count for *_, count in module_recompute_gemms(model, layout, 1, kind))  # and an activation
    selective = ((attention_fwd if layout.recomputes_attention_core else 0)
                 + (up_projections + checkpointed) * (2 if layout.precision.quantized else 1)
                 + (rope if up_projections else 0) + (1 if checkpointed else 0)
                 + (moe if recomputes_moe_block(layout, kind) else 0)
                 + (norms if RecomputeModule.LAYERNORM in modules else 0)
                 + (activation if RecomputeModule.MOE_ACT in modules and kind is LayerKind.MOE
                    and not recomputes_moe_block(layout, kind) else 0))
    recompute = {Recompute.NONE: 0, Recompute.SELECTIVE: selective, Recompute.FULL: forward,
                 Recompute.PER_OP: per_op_gemms * (2 if layout.precision.quantized else 1) + elementwise,
                 }[layout.recompute]
    return PassKernels(forward, backward_input, gemms, recompute)


# The LM head (final norm, projection, Megatron-LM's unfused vocabulary-parallel cross-entropy: the cast, the
# max and its all-reduce, the subtraction, exp, the sum and its all-reduce, the division, the target gather)
# and the embedding (lookup and, under tp, its all-reduce; backward a scatter-add).
HEAD_KERNELS = PassKernels(forward=1 + 1 + 9, backward_input=1 + 1 + 3, backward_weight=1)
EMBEDDING_KERNELS = PassKernels(forward=2, backward_input=2, backward_weight=0)
# Of those, the norm and the projection's; the cast's (one each way); the loss's after the cast
PROJECTION_KERNELS = PassKernels(forward=2, backward_input=2, backward_weight=1)
CAST_KERNELS = PassKernels(forward=1, backward_input=1, backward_weight=0)
LOSS_KERNELS = PassKernels(forward=8, backward_input=2, backward_weight=0)


def head_kernels(parts: HeadParts) -> PassKernels:
    """The kernels a stage issues for the ``parts`` of the model's end it runs (:data:`HEAD_KERNELS` for all)."""
    return sum(parts.pick(PROJECTION_KERNELS, CAST_KERNELS, LOSS_KERNELS), PassKernels(0, 0, 0))


# Bytes per logit of the vocabulary-parallel cross-entropy as Megatron-LM runs it by default (unfused, eager
# PyTorch ops; megatron/core/tensor_parallel/cross_entropy.py). Forward: the cast of the BF16 logits to FP32
# (read 2, write 4), the max over the vocabulary (read 4), the in-place subtraction of the max (read 4, write 4),
# exp in place (4 + 4), the sum (4), the in-place division into the softmax kept for the backward (4 + 4): 38.
# Backward: the in-place multiplication by the loss gradient (4 + 4) and the cast's gradient back to BF16
# (read 4, write 2): 14 (the one-hot subtraction touches one logit per token). PyTorch's own
# F.cross_entropy on FP32 logits moves fewer in the forward and more in the backward (below).
# PyTorch's F.cross_entropy on ``logits.float()`` (``--loss pytorch``): forward the cast (read 2, write 4) and
# log-softmax (a max and a sum pass over its input, then the output: read 4 × 3, write 4); backward the NLL's
# gradient (a zero fill and a scatter: write 4), log-softmax's backward (read the output and the gradient,
# write the input gradient: 12) and the cast's gradient (read 4, write 2).
# The gathered loss is PyTorch's over the whole vocabulary on every tp rank. nanotron's moves Megatron's bytes (its
# subtraction reads 4 and writes 4 into a new tensor rather than in place; exp and the division then run in place).
# A fused kernel on FP32 logits (flash-attn's Triton cross_entropy_loss, which OLMo-core's fused_loss runs): the
# cast (read 2, write 4) and one read (4) forward; backward one read (4), the FP32 gradient written (4) and the
# cast's gradient (read 4, write 2). Compiled (Inductor, the cast in the graph): the BF16 logits read for the max
# and again for the sum (2 + 2), and once backward (2), the BF16 gradient written (2).
# Megatron's fused pieces (--loss megatron-fused, each compiled): the cast with the max (read 2, write 4), the
# subtraction, exp and the sum in place (4 + 4), the division in place (4 + 4); backward, the scaling written back
# in place and its BF16 cast (read 4, write 4 + 2). Transformer Engine's (--loss te): two reads of the BF16 logits
# and the gradient written into them (2 + 2 + 2); backward, the scaling in place (2 + 2).
CROSS_ENTROPY_BYTES = {LossKernel.MEGATRON: (38, 14), LossKernel.PYTORCH: (22, 22),
                       LossKernel.GATHERED: (22, 22), LossKernel.NANOTRON: (38, 14),
                       LossKernel.FUSED: (10, 14), LossKernel.COMPILED: (4, 4),
                       LossKernel.MEGATRON_FUSED: (22, 10), LossKernel.TE: (6, 4)}  # (forward, backward)
# The z-loss's bytes per logit beside each loss. Eager (OLMo-core's cross_entropy_loss: ``logits.logsumexp(-1)``):
# ATen's logsumexp is composite, the max (read 4), the max subtracted into a new tensor (4 + 4), exp in place
# (4 + 4), the sum (4): 24; its backward ``grad · exp(self − result)`` three ops of 4 + 4 each: 24, and autograd
# sums that gradient with the cross-entropy's into the logits' (read 4 + 4, write 4): 36. nanotron's
# (``_ShardedCrossEntropyWithZLoss``) reuses the forward's log-sum-exp; its backward clones the softmax (4 + 4),
# scales a copy of it by the z-loss's gradient (4 + 4) and adds the two (4 + 4 + 4): 28. A fused or compiled loss
# computes it in the same kernels: nothing more.
Z_LOSS_BYTES = {LossKernel.PYTORCH: (24, 36), LossKernel.GATHERED: (24, 36), LossKernel.NANOTRON: (0, 28),
                LossKernel.FUSED: (0, 0), LossKernel.COMPILED: (0, 0)}  # Megatron's losses have none (refused)
# The logits copied before the loss (Layout.loss_input_copy), per byte of the loss's input (FP32, or BF16 into a
# compiled loss): the copy reads and writes it; backward, the slice's gradient, a zero-filled tensor of the
# logits' size, is written and the copy's gradient read and written into it.
LOSS_INPUT_COPY_PASSES = (2, 3)


# PyTorch's cross-entropy over logits sharded along the vocabulary (Layout.torch_loss_parallel: torch's
# loss_parallel, torch/distributed/tensor/parallel/loss.py, _log_softmax and _nll_loss_and_log_softmax_backward;
# torchtitan's _LossParallelCrossEntropy, the same ops). Forward: the cast (read 2, write 4), the max (read 4), the
# max subtracted into a new tensor (4 + 4), exp into another (4 + 4), its sum (4), the log-sum-exp subtracted into
# the log-probabilities it keeps (4 + 4): 38. Backward, the NLL's and the log-softmax's in one: a zero tensor
# (write 4), exp of the log-probabilities (4 + 4), the two added (4 + 4 + 4), scaled by the loss gradient (4 + 4),
# cast back to BF16 (read 4, write 2): 38. ATen's fused log-softmax (--loss pytorch at tp 1) moves 22 each way.
LOSS_PARALLEL_BYTES = (38, 38)


def cross_entropy_bytes(layout: Layout) -> tuple[float, float]:
    """Bytes the loss moves per logit of the rank's shard, (forward, backward): the cross-entropy as its code
    runs it, with the z-loss and the input copy where the layout has them."""
    forward, backward = LOSS_PARALLEL_BYTES if layout.torch_loss_parallel else CROSS_ENTROPY_BYTES[layout.loss]
    if layout.z_loss:
        forward, backward = forward + Z_LOSS_BYTES[layout.loss][0], backward + Z_LOSS_BYTES[layout.loss][1]
    if layout.loss_input_copy:
        size = layout.loss.logit_bytes
        forward, backward = forward + LOSS_INPUT_COPY_PASSES[0] * size, backward + LOSS_INPUT_COPY_PASSES[1] * size
    return forward, backward


def head_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> PassTimes:
    """Final norm, the vocabulary projection (vocabulary-parallel over tp) and the FP32 cross-entropy: over the
    rank's shard of the vocabulary, or over all of it where the logits are gathered first (``--loss gathered``:
    every tp rank computes the same loss; the gather is :func:`pipesim.analytic.comm.logits_gather_time`'s).

    The projection stays BF16 in FP8 runs: Megatron-LM's (and NeMo's) output layer is its own
    ``ColumnParallelLinear``, not a Transformer Engine module, so TE's FP8 autocast does not reach it."""
    return head_part_times(model, layout, chip).whole


# The logits' cast to FP32 as a block of its own (nanotron's ``cast_to_fp32``, which its cost balance can leave on a
# stage of its own: Layout.stages_after_head): read 2, write 4; backward, its gradient cast back to BF16, read 4,
# write 2. Every loss on FP32 logits counts these bytes among its own (CROSS_ENTROPY_BYTES); a loss on the BF16
# logits (compiled, Transformer Engine's) has no cast.
LOGIT_CAST_BYTES = (6, 6)


@dataclass(frozen=True)
class HeadTimes:
    """The model's end per microbatch, in the parts a pipeline can put on different stages
    (:class:`~pipesim.analytic.layout.HeadParts`): the final norm and the projection, the logits' FP32 cast, the
    loss after the cast; and the three together, computed as one sum."""

    projection: PassTimes
    cast: PassTimes
    loss: PassTimes
    whole: PassTimes

    def of(self, parts: HeadParts) -> PassTimes:
        """The seconds of the ``parts`` one stage runs."""
        if parts.projection and parts.cast and parts.loss:
            return self.whole
        return sum(parts.pick(self.projection, self.cast, self.loss), PassTimes(0.0, 0.0, 0.0))


def head_part_times(model: ModelSpec, layout: Layout, chip: ChipSpec) -> HeadTimes:
    """:func:`head_times`, by the parts a pipeline can split (:class:`HeadTimes`)."""
    tokens = model.micro_batch * model.seq_len // layout.cp
    v, h = model.vocab // layout.tp, model.hidden
    p = Precision.BF16
    logits = tokens * model.vocab // layout.loss_shards
    norm_bytes = tokens * h * 2 * 2
    stream = chip.stream_bandwidth
    loss_forward, loss_backward = cross_entropy_bytes(layout)
    gemms = (gemm_time(tokens, v, h, chip, p), gemm_time(tokens, h, v, chip, p), gemm_time(h, v, tokens, chip, p))
    forward = gemms[0] + (loss_forward * logits + norm_bytes) / stream
    backward_input = gemms[1] + (loss_backward * logits + 2 * norm_bytes) / stream
    cast_forward, cast_backward = LOGIT_CAST_BYTES if layout.loss.logit_bytes == 4 else (0, 0)
    return HeadTimes(
        projection=PassTimes(gemms[0] + norm_bytes / stream, gemms[1] + 2 * norm_bytes / stream, gemms[2]),
        cast=PassTimes(cast_forward * logits / stream, cast_backward * logits / stream, 0.0),
        loss=PassTimes((loss_forward - cast_forward) * logits / stream,
                       (loss_backward - cast_backward) * logits / stream, 0.0),
        whole=PassTimes(forward, backward_input, gemms[2]),
    )


def weight_cast_time(linear_params: float, layout: Layout, chip: ChipSpec) -> float:
    """Seconds per microbatch of Transformer Engine's weight casts for ``linear_params`` parameters of quantized
    linears (per tp rank). Its FP8 and NVFP4 linears cast their BF16 weights on a step's first microbatch and keep
    the copy for the others (``is_first_microbatch``, which Megatron-Core passes: TE's weight caching), the same
    cast as an input's (:func:`quantization_cast_bytes`: on Hopper with its transpose, for the input gradient's
    GEMM; with per-tensor current scaling, an amax pass first); taken as the per-microbatch mean over the step, so
    the step's total is exact, as :func:`grad_accumulation_time` is. Nothing in BF16, where the optimizer keeps
    the weights in FP8 itself (``fp8_params``: it writes them after the step, counted in the optimizer's bytes),
    for torchao's linears, which cast at every GEMM or, under their FSDP float8 all-gather, each shard before its
    gather (both counted with the inputs'), or under ZeRO-3's per-layer gathers, where no copy outlives a
    microbatch and the cast is the FSDP code's own."""
    if not layout.keeps_quantized_copies or layout.fp8_params is not Fp8Params.OFF or layout.gathers_per_layer:
        return 0.0
    if layout.precision is Precision.FP4:
        per_element = NVFP4_CAST_BYTES + AMAX_PASS_BYTES
    else:
        per_element = FP8_CAST_BYTES + (FP8_TRANSPOSE_BYTES if chip.fp8_weight_transpose else 0)
        if layout.fp8_recipe is Fp8Recipe.TENSORWISE:
            per_element += AMAX_PASS_BYTES
    per_step = max(1, layout.microbatches // layout.model_copies)  # DualPipe: each copy's stages see half
    return linear_params * per_element / chip.stream_bandwidth / per_step


def grad_buffer_zeroing_time(params: float, layout: Layout, chip: ChipSpec) -> float:
    """Seconds a step spends zeroing the gradient buffer of a rank holding ``params`` parameters.

    Fused accumulation (:attr:`GradAccumulation.FUSED`) adds every microbatch's weight gradients into a buffer that
    persists from step to step, so each step clears it first: Megatron-Core's ``train_step`` calls each model
    chunk's ``zero_grad_buffer`` (``grad_data.zero_()``, the whole buffer, which the distributed optimizer
    reduce-scatters in place and does not shard). One write of ``grad bytes`` a parameter over the stream rate.
    Autograd's ``.grad`` is freed instead (``zero_grad(set_to_none=True)``, PyTorch's default since 2.0): nothing
    to clear. Gradients reduce-scattered as they are made (ZeRO-2, ZeRO-3 without pipelining) leave a 1/(dp·cp)
    shard."""
    if layout.grad_accumulation is not GradAccumulation.FUSED:
        return 0.0
    held = held_gradients(params, layout)
    return layout.param_bytes.grads * held / chip.stream_bandwidth


def fp32_all_reduce_passes_time(params: float, layout: Layout, chip: ChipSpec) -> float:
    """Seconds a step spends on the memory-bound passes around an FP32 gradient all-reduce
    (:attr:`ZeroCollectives.ALL_REDUCE_FP32`, Aleph Alpha's scaling framework) for a rank holding ``params``
    parameters, after its last backward and before its optimizer step, on the compute stream.

    Its code (``core/optimizer/allreduce.py``, ``allreduce_bucket`` and ``allreduce_and_copy``; ``core/optimizer/
    parameter_group.py``, ``scale_grads_and_get_grad_norm_squared``), per bucket of the whole gradient: flatten
    the bucket's 16-bit gradients into one buffer (read and write ``g`` bytes a parameter), divide it by the
    data-parallel size in place (``g`` + ``g``), cast it to FP32 for the wire (``g`` + 4), copy the reduced
    FP32 buffer back into the 16-bit one (4 + ``g``) and that into each gradient (``g`` + ``g``); then, per
    tensor, unscale by the loss scale in place (``g`` + ``g``, run at scale 1 too) and read it for the norm
    (``g``): ``11·g + 8`` bytes a parameter, 30 for BF16 gradients. Every step, over every gradient the rank
    holds (the all-reduce shards none); nothing under other collectives."""
    if layout.zero_collectives is not ZeroCollectives.ALL_REDUCE_FP32:
        return 0.0
    g = layout.param_bytes.grads
    return (11 * g + 2 * FP32) * params / chip.stream_bandwidth


def step_end_passes_time(params: float, layout: Layout, chip: ChipSpec) -> float:
    """The memory-bound passes a rank holding ``params`` parameters makes over its gradients between its last
    backward and its optimizer step, outside the optimizer's own kernels: the gradient buffer cleared
    (:func:`grad_buffer_zeroing_time`) and an FP32 all-reduce's casts and copies
    (:func:`fp32_all_reduce_passes_time`)."""
    return grad_buffer_zeroing_time(params, layout, chip) + fp32_all_reduce_passes_time(params, layout, chip)


def held_gradients(params: float, layout: Layout) -> float:
    """The gradients of ``params`` parameters a rank holds between microbatches: all of them, or its 1/(dp·cp)
    shard where ZeRO reduce-scatters each microbatch's gradients as they are made (ZeRO-2, ZeRO-3 without
    pipelining)."""
    if layout.sharding >= ZeroStage.GRADIENTS and layout.pp == 1:
        return params / layout.shards
    return params


def grad_accumulation_time(params: float, layout: Layout, chip: ChipSpec) -> float:
    """Seconds per microbatch that summing the weight gradients of ``params`` parameters takes outside the GEMMs.

    Fused (Megatron-LM's ``gradient_accumulation_fusion``): 0, the weight-gradient GEMM accumulates into the
    buffer. Autograd (PyTorch's ``AccumulateGrad``): every microbatch after the first adds its gradient into
    ``.grad`` in place, a memory-bound pass that reads both and writes one: ``3 · grad bytes`` per parameter
    over the stream rate, on (m − 1) of the m microbatches a stage runs (taken as the per-microbatch mean, so
    the step's total is exact). A ZeRO stage that reduce-scatters every microbatch's gradients (ZeRO-2, ZeRO-3
    without pipelining) accumulates only the rank's 1/(dp·cp) shard."""
    if layout.grad_accumulation is GradAccumulation.FUSED:
        return 0.0
    per_copy = layout.microbatches // layout.model_copies  # DualPipe: each copy's stages see half
    if per_copy <= 1:
        return 0.0
    held = held_gradients(params, layout)
    return 3 * layout.param_bytes.grads * held / chip.stream_bandwidth * (per_copy - 1) / per_copy
