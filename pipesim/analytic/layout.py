"""How the model is split and trained: parallel degrees and the memory-saving choices (Layout).

Rank order is Megatron-LM's (tp fastest, then cp, then dp, then pp), which decides which link each group
uses: a tp group is ``tp`` consecutive ranks, a cp group spans ``tp·cp``, a dp group ``tp·cp·dp`` consecutive
ranks, and pipeline neighbours are ``tp·cp·dp`` ranks apart.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

from pipesim.errors import PipesimError, parse_choice
from pipesim.hash_once import fields_only_state, hash_once


class Recompute(enum.Enum):
    """Activation recomputation (Korthikanti et al. 2023, §5)."""

    NONE = "none"
    SELECTIVE = "selective"  # recompute only the attention core (QKᵀ, softmax, dropout, ·V)
    FULL = "full"  # store only each layer's input; recompute the whole layer forward in backward
    # torchtitan's per-op selective checkpointing (its ``_save_list`` policy): keep the attention kernel's
    # output and every other matmul's output, in the layer's call order; recompute everything else
    PER_OP = "per-op"


class RecomputeModule(enum.Enum):
    """What a selective recomputation re-runs in the backward, Megatron-Core's ``--recompute-modules``
    (``TransformerConfig.recompute_modules``; its default, ``core_attn`` alone, is Korthikanti et al.'s
    selective recomputation). Those modelled drop what their module would keep and re-run its forward:"""

    CORE_ATTN = "core_attn"  # the attention core (QKᵀ, softmax, dropout, ·V): its scores, or the fused kernel's
    # the block's two norms (input_layernorm, pre_mlp_layernorm), their outputs discarded once the linears after
    # them have read them (output-discarding checkpointing) and made again from their kept inputs
    LAYERNORM = "layernorm"
    MOE_ACT = "moe_act"  # the routed experts' activation, its output (their down projection's input) likewise
    # latent attention's up projections and RoPE (MultiLatentAttention.qkv_up_proj_and_rope_apply): the queries,
    # keys and values the attention kernel saved, discarded and made again from the kept latents (the query's
    # projection from the hidden state where there is no query bottleneck): their GEMMs re-run, no collective
    MLA_UP_PROJ = "mla_up_proj"
    # Normal checkpointing of a submodule: its input kept, everything inside dropped and the forward re-run, its
    # GEMMs and the tensor-parallel collectives around them (the MoE layer's dispatch and combine too)
    MLP = "mlp"  # a dense layer's MLP
    MOE = "moe"  # a MoE layer's whole MLP block: router, dispatch, routed and shared experts, combine
    SHARED_EXPERTS = "shared_experts"  # a MoE layer's shared experts (no collective of their own)


DEFAULT_RECOMPUTE_MODULES = (RecomputeModule.CORE_ATTN,)


# What plan searches by default: Megatron's three settings. torchtitan's per-op checkpointing is a property of
# that framework's code, searched only when asked for (``--recompute per-op``).
SEARCHED_RECOMPUTE = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)


class ZeroStage(enum.IntEnum):
    """What data parallelism shards (Rajbhandari et al. 2020, "ZeRO", §5: P_os, P_os+g, P_os+g+p)."""

    NONE = 0  # plain data parallel: every replica holds everything, gradients all-reduced
    OPTIMIZER = 1  # ZeRO-1 / Megatron's distributed optimizer: optimizer state / dp
    GRADIENTS = 2  # ZeRO-2: optimizer state and gradients / dp
    PARAMETERS = 3  # ZeRO-3 / FSDP: weights too; each layer all-gathered when it runs

    @property
    def gathers_after_step(self) -> bool:
        """The optimizer state sharded and the weights whole (ZeRO 1–2, Megatron's distributed optimizer): each
        replica updates its shard and the updated weights are all-gathered after the step, the gather Megatron's
        ``--overlap-param-gather`` moves beside the next forward and ``--fp8-param-gather`` runs in FP8."""
        return ZeroStage.OPTIMIZER <= self <= ZeroStage.GRADIENTS


class ZeroCollectives(enum.Enum):
    """How a sharded data-parallel group moves its gradients and weights: for ZeRO-1 and ZeRO-2, in buckets or
    layer by layer; for ZeRO-3 without pipelining, layer by layer (PyTorch FSDP, today's DeepSpeed) or tensor by
    tensor (DeepSpeed's first ZeRO-3)."""

    # DeepSpeed's ZeRO-1/2 and Megatron's distributed optimizer: the stage's gradients reduce-scattered in large
    # buckets after the backward, the updated weights all-gathered after the optimizer step.
    BUCKETED = "bucketed"
    # PyTorch FSDP (Zhao et al. 2023, "PyTorch FSDP", §3.2), whose SHARD_GRAD_OP is ZeRO-2: every wrapped block
    # gathers its weights before its forward and reduce-scatters its gradients after its backward, in every
    # microbatch, so each block pays a collective's latency per microbatch, as ZeRO-3 does.
    PER_LAYER = "per-layer"
    # DeepSpeed's ZeRO-3 from its release (v0.3.13, March 2021) to v0.5.5 (November 2021), which Narayanan et al.'s
    # April 2021 comparison must have run (partition_parameters.py, ``_allgather_param`` and
    # ``_reduce_scatter_gradient``): one collective per parameter tensor. Each all-gather is preceded by
    # ``torch.cuda.synchronize()`` and passes PyTorch a list of N views of one buffer (N = ranks), which
    # ProcessGroupNCCL flattens and copies back view by view; each reduce-scatter builds and copies N views
    # likewise. So every tensor's collective costs the host N tensor operations while the device, just synchronised,
    # has nothing queued. Tensors under 10⁵ elements (biases, norms: ``param_persistence_threshold``) stay gathered;
    # their gradients are still reduce-scattered one by one. A layer recomputed in full is gathered a third time for
    # its recomputed forward (the module's forward hooks fetch it and release it again before its backward fetches
    # it).
    PER_TENSOR = "per-tensor"
    # Aleph Alpha's scaling framework (Hagemann et al. 2023; ``core/optimizer/allreduce.py``): ZeRO-1 that
    # all-reduces every gradient whole, cast to FP32 for the wire (``allreduce_tensor_in_float32``), after the
    # backward; each rank then updates its shard and the BF16 parameters are all-gathered. 4 + 4 + 2 bytes a
    # parameter on the wire (the all-reduce's two halves and the gather) where a reduce-scatter of 16-bit
    # gradients and the gather move 2 + 2.
    ALL_REDUCE_FP32 = "all-reduce-fp32"
    # Megatron-LM's distributed optimizer in instances (``--num-distributed-optimizer-instances N``,
    # ``param_and_grad_buffer.py``, ``start_grad_sync``): ZeRO-1 over a shard group of dp·cp/N consecutive ranks
    # (``INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP``, parallel_state.py) that reduce-scatters each bucket within the
    # group, all-reduces the reduced shard across the N instances, and gathers the updated weights within the group:
    # the gradients cross the instances at 1/group of their size, where hybrid ZeRO-1's all-reduce over every rank
    # moves them whole.
    HIERARCHICAL = "hierarchical"

    def applies_to(self, zero: ZeroStage, pp: int) -> bool:
        """Whether this way of communicating exists for a ZeRO stage and pipeline depth: bucketed always; per
        layer for ZeRO-2 without pipelining (ZeRO-3 without pipelining is per layer already); per tensor for
        ZeRO-3 without pipelining (DeepSpeed's ZeRO-3 has no pipeline engine); the FP32 all-reduce for ZeRO-1
        (it reduces gradients whole, so it shards none of them) and the hierarchical reduce for ZeRO-1 (Megatron-LM's
        instances of the distributed optimizer)."""
        if self is ZeroCollectives.BUCKETED:
            return True
        if self in (ZeroCollectives.ALL_REDUCE_FP32, ZeroCollectives.HIERARCHICAL):
            return zero is ZeroStage.OPTIMIZER
        wanted = ZeroStage.GRADIENTS if self is ZeroCollectives.PER_LAYER else ZeroStage.PARAMETERS
        return zero is wanted and pp == 1


class Precision(enum.Enum):
    """The GEMMs' input type: BF16, FP8 (Micikevicius et al. 2022, "FP8 Formats for Deep Learning") or NVFP4
    (Transformer Engine's ``NVFP4BlockScaling``: 4-bit E2M1 values with an FP8 E4M3 scale per 16 elements, on
    Blackwell's block-scaled tensor cores; NVIDIA 2025, "Pretraining Large Language Models with NVFP4").
    Transformer Engine keeps master weights, optimizer state and non-GEMM work in higher precision."""

    BF16 = "bf16"
    FP8 = "fp8"
    FP4 = "fp4"

    @property
    def quantized(self) -> bool:
        """Whether the linears run on quantized inputs (Transformer Engine's casts, its cached weight copies)."""
        return self is not Precision.BF16

    @property
    def element_bytes(self) -> float:
        """Bytes a quantized GEMM operand takes per element, its scales included: FP8 one; NVFP4 two 4-bit values a
        byte and one FP8 E4M3 scale per 16 elements (the per-tensor FP32 scale is negligible). BF16: two."""
        return {Precision.BF16: 2.0, Precision.FP8: 1.0, Precision.FP4: 0.5 + 1 / 16}[self]


class RankOrder(enum.Enum):
    """How ranks are numbered over the parallel dimensions, fastest first (Megatron-Core's ``order``), which decides
    which groups share a node: the data-parallel group's and the pipeline neighbours' distances in ranks."""

    # Megatron-Core's default: tp, cp, (ep), dp, pp; pipeline neighbours tp·cp·dp ranks apart
    TP_CP_DP_PP = "tp-cp-dp-pp"
    # ``--use-tp-pp-dp-mapping``: tp, cp, (ep), pp, dp; pipeline neighbours tp·cp apart, so a model replica's
    # tp·cp·pp ranks sit together (on GB200 NVL72, inside one rack) and data parallelism crosses nodes
    TP_CP_PP_DP = "tp-cp-pp-dp"


class Fp8Recipe(enum.Enum):
    """How an FP8 run scales its casts (Megatron-LM's ``--fp8-recipe``, NeMo's ``fp8_recipe``).

    ``DELAYED`` (Megatron-LM's default): each tensor's scale comes from the amax history of earlier steps, and the
    cast kernel records this step's amax as it goes: one pass. ``TENSORWISE`` (per-tensor current scaling,
    Transformer Engine's ``Float8CurrentScaling``): the scale is this tensor's own amax, which must be known
    before the cast, so Transformer Engine runs ``nvte_compute_amax`` over the input first (its quantizers:
    "For current scaling mode, we need to compute amax and scale before quantization"): one more read of the
    BF16 tensor before every cast."""

    DELAYED = "delayed"
    TENSORWISE = "tensorwise"


class Fp8Params(enum.Enum):
    """How an FP8 run keeps its FP8 linears' weights (Transformer Engine, Megatron-Core).

    ``OFF``: BF16 weights, and an FP8 copy made for the GEMMs. With FP8 parameters (Megatron-LM's
    ``--fp8-param-gather``: "Keep the compute param in fp8 (do not use any other intermediate dtype) and
    perform the param all-gather in fp8"; NeMo's ``fp8_params``) there is no BF16 weight, and the FP8
    parameter holds its data and, on Hopper, maybe its transpose for the backward's GEMMs. ``BOTH``: both, 2
    bytes per parameter — what Transformer Engine 2.x does while training (v2.5: ``module/linear.py`` asks the
    weight for row- and column-wise usage whenever gradients are enabled, and ``module/base.py``'s
    ``get_weight_workspace`` "do[es] not destroy unnecessary usages"), and TE 1.x when its FP8 parameters were
    created with gradients enabled (release_v1.14, ``module/base.py``: ``with_transpose_cache=
    torch.is_grad_enabled()``, a transpose cache the optimizer only invalidates). ``ROWWISE``: the data alone,
    1 byte, the transpose made in the backward and dropped (TE 1.x's parameters created without a transpose
    cache: ``tensor/float8_tensor.py``'s ``transpose_2d`` then allocates a fresh one each time)."""

    OFF = "off"
    BOTH = "both"
    ROWWISE = "rowwise"

    @property
    def weight_bytes(self) -> float:
        """Bytes an FP8 linear's parameter keeps (OFF: not an FP8 parameter, see :func:`static_bytes`)."""
        return 1.0 if self is Fp8Params.ROWWISE else 2.0


class Fp8Linears(enum.Enum):
    """Whose FP8 linear layers an FP8 run trains with: what they keep between the forward and the backward.

    ``TRANSFORMER_ENGINE`` (Megatron-LM, NeMo): the weights' FP8 copy cast on a step's first microbatch and kept for
    the rest (+1 byte a parameter of its linears, :func:`~pipesim.analytic.memory_gib.static_bytes`), and each
    linear's input saved in FP8 for its weight gradient (:func:`~pipesim.analytic.activations.
    linear_input_element_bytes`). ``TORCHAO`` (torchao's ``Float8Linear``, torchtitan's float8): the autograd
    function saves its high-precision input and weight (``matmul_with_hp_or_float8_args``:
    ``ctx.save_for_backward(input_hp, weight_hp_t)``) and casts both again where each GEMM needs them, so no FP8
    copy outlives a GEMM and the saved inputs stay BF16. NVFP4 runs are Transformer Engine's either way."""

    TRANSFORMER_ENGINE = "transformer-engine"
    TORCHAO = "torchao"


class AttentionKernel(enum.Enum):
    """Whether the s×s attention scores are materialized (Korthikanti's 5as²b term) or not, and for fused
    kernels which implementation runs (their rates differ; memory is the same)."""

    UNFUSED = "unfused"  # softmax(QKᵀ) and its dropout stored: Korthikanti et al. Table 2 as printed
    FUSED = "fused"  # FlashAttention-2 (Dao 2023) and its kin: scores recomputed block-wise, never stored
    TRITON = "triton"  # FlashAttention in OpenAI Triton (llm-foundry's attn_impl: triton): fused, slower
    FLASH1 = "flash1"  # FlashAttention v1 (flash-attn 1.x, flash_attn_unpadded_func; 2022 to mid-2023): fused, slower

    @property
    def fused(self) -> bool:
        return self is not AttentionKernel.UNFUSED


class ElementwiseKernels(enum.Enum):
    """How the memory-bound work around the GEMMs runs (norms, RoPE, activations, residual adds)."""

    FUSED = "fused"  # one kernel per norm, RoPE, activation, residual (Megatron-LM / TE fused kernels, torch.compile)
    EAGER = "eager"  # one kernel per PyTorch op (the reference Llama modules without torch.compile)
    # eager PyTorch ops around a fused norm kernel (flash-attn's ops.rms_norm, Apex's FusedRMSNorm): Aleph Alpha's
    # scaling framework with its "RMS kernel" (Hagemann et al. 2023), whose RoPE, SwiGLU and adds stay eager
    EAGER_FUSED_NORM = "eager-fused-norm"
    # fused norms and RoPE, the gated MLP's activation as its PyTorch ops (``act(gate) * up``, two kernels), and
    # the attention's inputs and output moved between layouts by copies: nanotron's Llama (TritonRMSNorm,
    # flash-attn's rotary kernel, GLUActivation, CausalSelfAttention's transposes), whose residual adds are plain
    EAGER_ACTIVATION = "eager-activation"

    @property
    def eager(self) -> bool:
        """Whether any of the ops around the GEMMs runs as PyTorch ops (which: the properties below)."""
        return self is not ElementwiseKernels.FUSED

    @property
    def eager_norms(self) -> bool:
        """Whether the norms too run as PyTorch ops (an RMSNorm as eight kernels through FP32)."""
        return self is ElementwiseKernels.EAGER

    @property
    def eager_activation(self) -> bool:
        """Whether a gated MLP's activation runs as its two PyTorch ops (``silu(gate)``, then ``* up``)."""
        return self is not ElementwiseKernels.FUSED

    @property
    def eager_rope(self) -> bool:
        """Whether RoPE and dropout run as PyTorch ops (reference Llama code, Aleph Alpha's scaling), not fused
        kernels."""
        return self in (ElementwiseKernels.EAGER, ElementwiseKernels.EAGER_FUSED_NORM)

    @property
    def copies_attention_output(self) -> bool:
        """Whether the attention output is transposed back to (tokens, heads·d_v) by a copy, which the output
        projection keeps, not a view (every eager module: reference Llama code, Aleph Alpha's, nanotron's)."""
        return self.eager

    @property
    def relayouts_attention_inputs(self) -> bool:
        """Whether the queries, keys and values are copied out of the projection's (sequence, batch) layout to
        batch-major, and the keys and values then concatenated and permuted into one tensor for flash-attn's
        rotary kernel: five copies a layer (nanotron's ``CausalSelfAttention``)."""
        return self is ElementwiseKernels.EAGER_ACTIVATION


class BoundaryTensor(enum.Enum):
    """What each tp rank of a stage sends across a pipeline boundary when the boundary tensor is not already split
    over tp (no sequence parallelism)."""

    # Megatron-LM's scatter/gather optimization (Narayanan et al. 2021, §4.1; ``--scatter-gather-tensors-in-
    # pipeline``, on by default in its 2021–2022 ``p2p_communication.py``) and DeepSpeed's pipeline engine
    # (``is_pipe_partitioned``: the boundary activations sent as a PartitionedTensor): each rank sends 1/tp of it
    # and the receivers all-gather the rest over the node's fast link.
    SPLIT = "split"
    # Each tp rank sends the whole tensor: Megatron-Core (``get_tensor_shapes`` divides the sequence by tp only
    # under sequence parallelism; the scatter/gather flag is gone), nanotron's pipeline blocks, Aleph Alpha's
    # scaling (``PipeCommunicator.send_data``).
    WHOLE = "whole"


class MlpUp(enum.Enum):
    """How a gated MLP's two up projections (gate and up, on the same input) are built."""

    # One GEMM of twice the width (Megatron-Core's linear_fc1, nanotron's gate_up_proj): one column-parallel
    # linear, one input-gradient collective without sequence parallelism.
    FUSED = "fused"
    # Two linears (Aleph Alpha's ParallelSwiGLUMLP: dense_in and siglu_weight, each a ColumnParallelLinear;
    # torchtitan's and Hugging Face's w1/w3, gate_proj/up_proj): two GEMMs, and without sequence parallelism each
    # column-parallel linear all-reduces its own input gradient in the backward (its _CopyToModelParallelRegion),
    # one collective more a layer. Under sequence parallelism the two share their input's gather (and its
    # reduce-scatter back): no collective more.
    SPLIT = "split"


class GradBuckets(enum.Enum):
    """How the data-parallel gradient reduce that overlaps the backward cuts a stage's gradients into buckets
    (:mod:`pipesim.analytic.grad_buckets`): the bucket the backward fills last is reduced with nothing left to hide
    it, and a sharded optimizer gathers it first, before the next forward can start."""

    # Megatron-Core's DDP: buckets of max(40M, 1M·dp) parameters on the first pipeline stage's first model chunk,
    # one bucket on every other stage and chunk
    MEGATRON = "megatron"
    # PyTorch's DistributedDataParallel (nanotron): buckets of 25 MiB of gradients on every stage
    TORCH_DDP = "torch-ddp"
    # A unit per module, each reduced once its backward ends: torchtitan's replicate (FSDP2's machinery with a
    # replicated mesh, since March 2026) wraps the embedding, each transformer block and the final norm with the
    # output projection as units of their own, so the last is the embedding on the first stage and the stage's
    # first layer on the others
    PER_MODULE = "per-module"


class P2pCalls(enum.Enum):
    """How a blocking pipeline engine issues a pass's send and the receive it pairs with (the neighbour's tensor
    coming the other way over the same boundary)."""

    # Megatron-LM's ``send_forward_recv_backward`` and its siblings: both in one batched isend/irecv, the two
    # directions of the link at once, so a pass waits out one transfer.
    BATCHED = "batched"
    # DeepSpeed's pipeline engine (``TrainSchedule``: SendActivation, then RecvGrad, each a blocking call), Aleph
    # Alpha's scaling (``PipelineScheduleTrain``, the same order) and nanotron (``PipelineTrainBatchState.
    # run_communication``: "send activation, recv activation, send grad, recv grad ... one communication at a
    # time", each waited for): one after the other, and NCCL moves a send's data only once its receive is
    # posted, so a pass waits out both transfers.
    SEQUENTIAL = "sequential"

    @property
    def transfers_per_pass(self) -> int:
        """Transfers a pass waits out when its sends block."""
        return 2 if self is P2pCalls.SEQUENTIAL else 1


class MoeDispatcher(enum.Enum):
    """How a MoE layer's tokens reach their experts' ranks and come back (dispatch and combine)."""

    # One NCCL all-to-all each way (Megatron-Core's ``--moe-token-dispatcher-type alltoall``): the permuted tokens,
    # one copy per routed expert, each sent straight to its expert's rank over NVLink or the network.
    ALLTOALL = "alltoall"
    # DeepEP's normal (high-throughput) kernels (DeepSeek-V3 §3.2.2; Megatron-Core's ``--moe-token-dispatcher-type
    # flex`` with its deepep backend): a token crosses the network at most once per destination node, to the
    # rank with its own local index there, which forwards it over NVLink to the node's ranks holding its experts
    # (one copy per rank, however many of its experts that rank holds); the combine reverses it, summing within
    # the node before the network. Node-limited routing (``ModelSpec.expert_groups``) bounds the nodes.
    DEEPEP = "deepep"


class PipelineBuffers(enum.Enum):
    """What a pipeline runtime keeps of the tensors that cross stage boundaries, beyond the layers' saved
    activations of the microbatches in flight (read from each runtime's code; :mod:`.pipeline_buffers` counts
    the bytes)."""

    # Megatron-LM and Megatron-Core, nanotron, DeepSpeed: a receive buffer allocated for its transfer and dropped
    # once read, a stage's output freed as soon as it is sent (Megatron-Core's ``deallocate_output_tensor`` keeps
    # only its autograd node): nothing beyond the activations.
    FREED = "freed"
    # torch.distributed.pipelining's single-stage schedules (Schedule1F1B, ScheduleGPipe: torchtitan's 1F1B and
    # GPipe): every stage allocates, once, a receive buffer per microbatch for its input and one for its output's
    # gradient (``_setup_forward_recv_info``, ``_create_grad_recv_info``: kept across steps), and keeps each
    # microbatch's output whole until its backward (``fwd_cache``), a split backward's I the whole graph for its W
    # (``retain_graph=True``); each batch of sends is waited for where the next exchange is.
    TORCH = "torch"
    # Its multi-stage runtime (``_PipelineScheduleRuntime``: interleaved, looped BFS, the zero-bubble schedules,
    # DualPipe-V, any order loaded from a file): the same, and it waits for its sends only when the step ends
    # (``send_ops``), so every output and input gradient it sent stays allocated until then.
    TORCH_RUNTIME = "torch-runtime"

    @property
    def preallocates(self) -> bool:
        """Whether the runtime keeps a receive buffer per microbatch and each output until its backward."""
        return self is not PipelineBuffers.FREED

    @property
    def holds_sends(self) -> bool:
        """Whether what a stage sent stays allocated until the step ends."""
        return self is PipelineBuffers.TORCH_RUNTIME


class CpComm(enum.Enum):
    """How the context-parallel ranks get the keys and values of each other's tokens (Megatron-LM's
    ``--cp-comm-type``; its help: p2p "is async and can be overlapped with attention compute", the all-gather "is
    not async, and cannot be overlapped", a2a "like DeepSpeed Ulysses, scatter attention heads across the CP
    group, and gather to get full sequence of QKV")."""

    # A ring: each step's K/V block sent on to the next rank beside the step's attention (Liu et al. 2023).
    P2P = "p2p"
    # The whole sequence's K and V all-gathered before the attention, their gradients reduce-scattered after
    # (Llama 3, §3.3.2; PyTorch's ``context_parallel`` with its default all-gather rotation).
    ALL_GATHER = "allgather"
    # Ulysses (Jacobs et al. 2023): all-to-alls trade the sequence split for a head split, q, k and v before the
    # attention and its output after it (and their gradients back); the attention sees the whole sequence.
    A2A = "a2a"
    # Hierarchical: Ulysses' all-to-alls inside groups of adjacent cp ranks (Layout.cp_a2a_size, Megatron-LM's first
    # --hierarchical-context-parallel-sizes), then a ring between the groups (Transformer Engine's
    # AttnFuncWithCPAndKVP2P given the two groups)
    A2A_P2P = "a2a+p2p"

    @classmethod
    def _missing_(cls, value: object) -> CpComm | None:
        """Transformer Engine's spelling of the all-gather, ``all_gather``, beside Megatron-LM's ``allgather``."""
        return cls.ALL_GATHER if value == "all_gather" else None

    @property
    def all_to_all(self) -> bool:
        """Whether Ulysses' all-to-alls split the heads (a2a, or its inner level in a2a+p2p)."""
        return self in (CpComm.A2A, CpComm.A2A_P2P)

    @property
    def ring(self) -> bool:
        """Whether keys and values travel a ring (p2p, or the outer level in a2a+p2p)."""
        return self in (CpComm.P2P, CpComm.A2A_P2P)


class CpKernels(enum.Enum):
    """The code that runs context-parallel attention: what its steps cost beside the attention kernels, and what
    of its communication they hide (:func:`pipesim.analytic.comm.cp_exposed`, :func:`pipesim.analytic.kernels.
    cp_merge_bytes`)."""

    # Transformer Engine (Megatron-Core, NeMo): the ring's per-step output correction fused, in BF16; its
    # all-gather exposed before the attention, its all-to-alls waited for.
    TRANSFORMER_ENGINE = "transformer-engine"
    # PyTorch's ``context_parallel`` (torchtitan): one SDPA call per step, merged into an FP32 running output by
    # eager ops; the all-gather waited for at the second step, the K/V gradients sent on in FP32 after each.
    PYTORCH = "pytorch"


def context_parallel_summary(comm: CpComm, kernels: CpKernels) -> str:
    """How a report names context parallelism's exchange and the code running it."""
    how = {CpComm.P2P: "ring", CpComm.ALL_GATHER: "all-gathered K/V", CpComm.A2A: "Ulysses all-to-alls",
           CpComm.A2A_P2P: "Ulysses all-to-alls inside groups, a ring between them"}[comm]
    code = "Transformer Engine" if kernels is CpKernels.TRANSFORMER_ENGINE else "PyTorch"
    return f"context parallel {how} ({code})"


def check_cp_pairing(kernels: CpKernels, comm: CpComm) -> None:
    """Refuse an exchange the context-parallel code does not run: PyTorch's rotates K/V, it has no Ulysses."""
    if kernels is CpKernels.PYTORCH and comm.all_to_all:
        raise PipesimError(f"--cp-comm-type {comm.value} (Ulysses) is not one of PyTorch's context_parallel rotations: "
                           "with --cp-kernels pytorch use allgather or p2p (its alltoall rotation, a ring)")


class GradAccumulation(enum.Enum):
    """How a microbatch's weight gradients are added to the step's gradient buffer."""

    # Megatron-LM's gradient_accumulation_fusion (on by default with TE/Apex): the weight-gradient GEMM writes
    # into the FP32 main_grad buffer with beta = 1, so the accumulation costs no pass of its own.
    FUSED = "fused"
    # PyTorch autograd's AccumulateGrad: the first microbatch's gradient becomes .grad, each later one is added in
    # place (reads both, writes one). The executor, plain DDP and reference training loops run this way.
    AUTOGRAD = "autograd"


class LossKernel(enum.Enum):
    """How the cross-entropy over the vocabulary runs: what it moves and what it holds at its peak."""

    MEGATRON = "megatron"  # Megatron-LM's vocabulary-parallel cross-entropy: FP32 softmax computed in place
    PYTORCH = "pytorch"  # F.cross_entropy on the logits cast to FP32 (torchtitan, reference training loops)
    # the output layer's logits all-gathered over tp (a column-parallel linear with parallel_output off) and
    # F.cross_entropy on the whole vocabulary's FP32 logits, the same on every tp rank (Aleph Alpha's scaling)
    GATHERED = "gathered"
    # nanotron's vocabulary-parallel cross-entropy (``sharded_cross_entropy``, ``_ShardedCrossEntropy``): Megatron's
    # ops and bytes, but the max subtracted into a new FP32 tensor while the FP32 cast it came from is still held
    NANOTRON = "nanotron"
    # One fused kernel a pass on the logits cast to FP32 (flash-attn's Triton ``cross_entropy_loss``, OLMo-core's
    # ``fused_loss``): the forward reads them once (an online max and sum, the log-sum-exp and any z-loss in the
    # same kernel), the backward reads them once and writes their gradient
    FUSED = "fused"
    # PyTorch's F.cross_entropy on ``logits.float()`` under torch.compile, the cast inside the graph (OLMo-core's
    # ``compile_loss``, torchtitan's ``compile.components`` with "loss"): Inductor reads the BF16 logits for the
    # max and again for the sum of exponentials, and once in the backward, where it writes the BF16 gradient; it
    # saves the BF16 logits for the backward, not an FP32 copy
    COMPILED = "compiled"
    # Megatron-Core's --cross-entropy-loss-fusion with its default --cross-entropy-fusion-impl native
    # (core/fusions/fused_cross_entropy.py): Megatron's ops in four torch.compile'd pieces (jit_fuser is
    # torch.compile from torch 2.2), the cast fused with the max, the subtraction with exp and the sum, the
    # gradient's scaling with its cast back to BF16
    MEGATRON_FUSED = "megatron-fused"
    # --cross-entropy-fusion-impl te: Transformer Engine's parallel_cross_entropy (Triton, February 2025 to TE
    # 2.17): an online-softmax pass over the BF16 logits, then a pass writing the gradient into them in place, in
    # the forward; the backward scales it in place
    TE = "te"

    @property
    def vocab_parallel(self) -> bool:
        """Whether each tp rank computes the loss over its own shard of the vocabulary only."""
        return self is not LossKernel.GATHERED

    @property
    def logit_bytes(self) -> int:
        """Bytes per logit of the tensor the loss takes and keeps for its backward: the logits cast to FP32
        before it (or the softmax made of them in place), or the BF16 logits a compiled loss casts inside."""
        return 2 if self in (LossKernel.COMPILED, LossKernel.TE) else 4


def check_z_loss(loss: LossKernel, z_loss: bool) -> None:
    """A one-line refusal of a z-loss beside a loss whose code has none."""
    if z_loss and loss in (LossKernel.MEGATRON, LossKernel.MEGATRON_FUSED, LossKernel.TE):
        raise PipesimError(f"--z-loss: Megatron-LM's cross-entropy (--loss {loss.value}) has no z-loss; name the "
                           "loss that computes one (--loss pytorch, gathered, nanotron, fused or compiled) or drop "
                           "--z-loss")


class ColumnInput(enum.Enum):
    """Under sequence parallelism, where a column-parallel linear's weight gradient gets the all-gathered input
    it needs (the attention's input projection, the MLP's up projection; without sequence parallelism that
    input is whole on every tp rank already, and this changes nothing)."""

    # Kept sharded; the backward all-gathers it again while the input-gradient GEMM runs: Megatron-LM's
    # LinearWithGradAccumulationAndAsyncCommunication (``async_op=True``, then ``grad_output.matmul(weight)``,
    # then the wait) and Transformer Engine's LayerNormLinear (``ub_bulk_dgrad`` under TP comm overlap).
    REGATHER = "regather"
    # Kept sharded; the backward all-gathers it again and waits before any GEMM: nanotron's
    # ``tp_recompute_allgather`` (its default), ``_ColumnLinearAsyncCommunication.backward``.
    REGATHER_BLOCKING = "regather-blocking"
    # The forward's all-gathered input kept for the backward, tp times the bytes, no second gather: PyTorch
    # DTensor's ColwiseParallel behind PrepareModuleInput(Replicate) (torchtitan), nanotron with
    # ``tp_recompute_allgather: false``. A checkpointing policy that recomputes collectives (torchtitan's
    # per-op one saves matmuls and reduce-scatters, not all-gathers) gathers it again in the backward, waited for.
    SAVED = "saved"

    @property
    def summary(self) -> str:
        """How a report names this choice."""
        return {ColumnInput.REGATHER: "TP inputs gathered again beside the input gradient",
                ColumnInput.REGATHER_BLOCKING: "TP inputs gathered again, blocking",
                ColumnInput.SAVED: "gathered TP inputs kept"}[self]


@dataclass(frozen=True)
class HeadParts:
    """What of the model's end one pipeline stage runs: the final norm and the vocabulary projection (the LM
    head), the cast of its logits to FP32, the loss. Every framework but nanotron runs all three on the last
    stage (:meth:`Layout.head_parts`)."""

    projection: bool = False
    cast: bool = False
    loss: bool = False

    def pick(self, projection, cast, loss) -> list:
        """Of one value per part (the projection's, the cast's, the loss's), those of the parts this stage runs."""
        return [value for value, held in ((projection, self.projection), (cast, self.cast), (loss, self.loss))
                if held]


@dataclass(frozen=True)
class OptimizerBytes:
    """Bytes per parameter of mixed-precision Adam; only ``optimizer`` is sharded by a distributed optimizer.

    Default 2 + 4 + 12 = 18, Megatron-LM's accounting (its ``theoretical_memory_usage.py``): BF16 weights,
    an FP32 gradient buffer (``main_grad``: gradients accumulate over many microbatches in FP32, which every
    pipeline-parallel recipe uses), and FP32 master weights + Adam m + v. The ZeRO paper (Rajbhandari et al.
    2020, §3.1) counts 2 + 2 + 12 = 16 because it keeps FP16 gradients; use ``OptimizerBytes(grads=2)``
    (``--param-bytes 16``) to reproduce it.
    """

    weights: float = 2.0
    grads: float = 4.0
    optimizer: float = 12.0

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer

    @property
    def text(self) -> str:
        """How ``--param-bytes`` spells it: ``18`` and ``16`` for Megatron-LM's and the ZeRO paper's accounts,
        ``W+G+O`` otherwise (a precision-aware optimizer's, ``2+4+6``)."""
        for name, named in NAMED_OPTIMIZER_BYTES.items():
            if self == named:
                return name
        return "+".join(f"{part:g}" for part in (self.weights, self.grads, self.optimizer))

    @classmethod
    def parse(cls, text: object, name: str = "--param-bytes") -> OptimizerBytes:
        """``18`` (Megatron-LM's: FP32 gradients), ``16`` (16-bit gradients) or ``W+G+O``: bytes of the weights,
        the gradients and the optimizer state per parameter (``2+4+6``: FP32 gradients, a 16-bit master remainder
        and BF16 moments); one line naming ``name`` otherwise."""
        spelled = str(text).strip()
        if spelled in NAMED_OPTIMIZER_BYTES:
            return NAMED_OPTIMIZER_BYTES[spelled]
        parts = spelled.split("+")
        try:
            values = [float(part) for part in parts]
        except ValueError:
            values = []
        if (len(values) != 3 or not all(math.isfinite(v) for v in values) or values[0] <= 0 or values[1] <= 0
                or values[2] < 0):
            raise PipesimError(f"{name} {spelled!r}: give 18 (FP32 gradients), 16 (16-bit gradients) or W+G+O, the "
                               "weights', gradients' and optimizer state's bytes per parameter (e.g. 2+4+6)")
        return cls(*values)


# --param-bytes's named accounts: Megatron-LM's 18 and the ZeRO paper's 16
NAMED_OPTIMIZER_BYTES = {"18": OptimizerBytes(), "16": OptimizerBytes(grads=2.0)}
# an Adam moment's bytes in each type Megatron-LM's precision-aware optimizer keeps it in (--exp-avg-dtype,
# --exp-avg-sq-dtype); BF16 before FP16, the spelling a launch line is written back with
MOMENT_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def precision_aware_bytes(base: OptimizerBytes, *, main_grads: str = "fp32", main_params: str = "fp32",
                          exp_avg: str = "fp32", exp_avg_sq: str = "fp32",
                          master_remainder: bool = True) -> OptimizerBytes:
    """``base`` under Megatron-LM's precision-aware optimizer (``megatron/core/optimizer/optimizer_config.py``): the
    gradients in ``main_grads`` (BF16 leaves its buffer 16-bit), the master weights in ``main_params`` (FP32's kept
    as the 16-bit remainder beside 16-bit weights, Transformer Engine's ``store_param_remainders``, where
    ``master_remainder``: Megatron-Core's default, not under FP16 weights nor FP8 with a recipe other than delayed
    scaling, ``use_precision_aware_optimizer_no_fp8_or_ds_fp8``), the moments in ``exp_avg`` and ``exp_avg_sq``."""
    grads = 2.0 if main_grads == "bf16" else base.grads
    master = 2.0 if main_params == "fp16" or (main_params == "fp32" and master_remainder) else 4.0
    return replace(base, grads=grads, optimizer=master + MOMENT_BYTES[exp_avg] + MOMENT_BYTES[exp_avg_sq])


def precision_aware_moments(param_bytes: OptimizerBytes) -> tuple[str, str] | None:
    """The inverse of :func:`precision_aware_bytes` with a 16-bit master remainder: the two moments' types that
    give ``param_bytes``'s optimizer state, the larger first, or None where no pair does."""
    moments = param_bytes.optimizer - 2.0
    pairs = [(m, v) for m in MOMENT_BYTES for v in MOMENT_BYTES
             if MOMENT_BYTES[m] >= MOMENT_BYTES[v] and MOMENT_BYTES[m] + MOMENT_BYTES[v] == moments]
    return pairs[0] if pairs else None


@dataclass(frozen=True)
class Layout:
    """Parallel degrees, microbatches and the activation/optimizer memory choices of one training setup."""

    # the planner's caches hash a layout hundreds of thousands of times: once per instance, kept out of pickles
    __hash__ = hash_once
    __getstate__ = fields_only_state

    tp: int = 1
    dp: int = 1
    pp: int = 1
    chunks: int = 1  # v, model chunks per pipeline rank
    microbatches: int = 1  # per pipeline per step (m)
    recompute: Recompute = Recompute.NONE
    # What a selective recomputation re-runs (RecomputeModule; read only under Recompute.SELECTIVE, so a layout
    # replaced to another recomputation keeps it inert: recomputed_modules)
    recompute_modules: tuple[RecomputeModule, ...] = DEFAULT_RECOMPUTE_MODULES
    # Under full recomputation, how many layers of each model chunk are recomputed, the first ones (Megatron-Core's
    # recompute_method "block": "recompute the input activations for only a set number of transformer layers per
    # pipeline stage. The rest of the layers in the pipeline stage will not have any activations recomputed",
    # TransformerConfig; per TransformerBlock, so per virtual stage under interleaving). None: every layer.
    recompute_layers: int | None = None
    # Under full recomputation without sequence parallelism, each recomputed layer's stored input split over the
    # tp ranks and all-gathered, waited for, before its recomputed forward (Megatron-LM's
    # --distribute-saved-activations, --distribute-checkpointed-activations until 2022; metaseq's
    # --distribute-checkpointed-activations, which trained OPT-175B; CheckpointFunction with
    # split_tensor_into_1d_equal_chunks / gather_split_1d_tensor): 1/tp of the stored bytes for one TP all-gather
    # of b·s·h per layer and microbatch.
    distribute_saved_activations: bool = False
    sequence_parallel: bool = False  # Korthikanti et al. 2023 §4.2.2: norms/dropout sharded along sequence
    distributed_optimizer: bool = False  # ZeRO-1 / Megatron distributed optimizer: optimizer state / (dp·cp)
    attention: AttentionKernel = AttentionKernel.FUSED
    # Grouped-query attention's keys and values copied out to every query head before the attention call, which
    # then saves them for its backward and, under context parallelism, exchanges them at the query heads' width:
    # torchtitan's Llama until January 2026 (``repeat_kv`` before ``F.scaled_dot_product_attention``; "GQA without
    # kv repeats", pytorch/torchtitan #2259), Hugging Face transformers' eager and SDPA paths. Off: the kernel reads
    # the kv heads as they are (FlashAttention, Transformer Engine, SDPA's ``enable_gqa``).
    kv_repeated: bool = False
    # Causal masking skips half of QKᵀ and ·V in FlashAttention kernels; Narayanan et al. 2021 and the MFU
    # convention of Chowdhery et al. 2022 (PaLM, App. B) count the full s² work. Off by default so FLOPs,
    # step time and MFU are comparable with those published numbers.
    halve_causal_attention: bool = False
    param_bytes: OptimizerBytes = OptimizerBytes()
    # Layers per stage, stage 0 first (see :mod:`.stage_split`); None: an even split, which must divide.
    stage_layers: tuple[int, ...] | None = None
    # Stages after the LM head's that hold no layer, only the logits' FP32 cast and the loss, the logits crossing
    # the boundaries between: nanotron's cost balance (models/base.py, build_model) gives each rank its blocks
    # until their summed cost passes the rank's share, so a heavy head can close the second-last share (1: the
    # cast and the loss on the last stage) or the third-last (2: the cast on the stage before the last, the loss
    # on the last). 0: the head, the cast and the loss on the last stage, as every other framework runs them.
    stages_after_head: int = 0
    # The model slice holding a multi-token-prediction model's modules (their layers, projections and norms, and the
    # embedding's copy they look tokens up in; the head's second pass stays with the loss): None, the loss's slice,
    # Megatron-Core's default; its --pipeline-model-parallel-layout may put them on an earlier one ("m").
    mtp_stage: int | None = None
    zero: ZeroStage = ZeroStage.NONE  # distributed_optimizer=True means at least ZeroStage.OPTIMIZER
    # How ZeRO-2 communicates: DeepSpeed's buckets, or PyTorch FSDP's per-layer collectives (SHARD_GRAD_OP)
    zero_collectives: ZeroCollectives = ZeroCollectives.BUCKETED
    # The ZeRO state sharded over groups of this many consecutive data-parallel ranks instead of all dp·cp, the
    # groups replicas (hybrid sharding; N = 8 keeps a node's shards in the node). ZeRO-1: each group holds the
    # optimizer state once, the gradients are all-reduced over every data-parallel rank and each rank's updated
    # weights gathered within its group (InternEvo's hybrid ZeRO, ``zero1=N``; InternEvo broadcasts from each
    # owner). ZeRO-2/3: PyTorch FSDP's HYBRID_SHARD (torchtitan's HSDP, dp_shard × dp_replicate): the gathers
    # and reduce-scatters run within the group, and each reduced shard is all-reduced across the replicas
    # (:func:`pipesim.analytic.comm.replica_all_reduce`). None: the shards span dp·cp.
    shard_group: int | None = None
    # ZeRO-3 within the shard groups with the optimizer state (the FP32 main weights and Adam's moments) sharded
    # across the groups too, over every dp·cp rank: Megatron-FSDP's hybrid FSDP (HFSDP, --outer-dp-sharding-strategy
    # optim; megatron_fsdp/param_and_grad_buffer.py, its HFSDP helper buffers). Each reduced shard is then
    # reduce-scattered across the replicas instead of all-reduced, the optimizer updates 1/(dp·cp) of the weights,
    # and the updated pieces are all-gathered across the replicas after the step
    # (:func:`pipesim.analytic.comm.replica_reduce`).
    outer_optimizer_sharding: bool = False
    cp: int = 1  # context parallel: the sequence split over cp ranks, ring attention between them
    # The CTAs (NCCL channels) the context-parallel group's sends may use: Megatron-Core's per-communicator NCCL
    # options (--nccl-communicator-config-path, a group's max_ctas; NVIDIA's MLPerf recipes give the cp group 1,
    # keeping the SMs for the attention beside it). None: NCCL's own choice, the link's P2P share.
    cp_comm_ctas: int | None = None
    cp_comm: CpComm = CpComm.P2P  # how the cp ranks exchange keys and values (CpComm)
    cp_kernels: CpKernels = CpKernels.TRANSFORMER_ENGINE  # the code that runs context-parallel attention
    # With cp_comm a2a+p2p: the all-to-all groups' size (adjacent cp ranks), the ring's cp / cp_a2a_size
    cp_a2a_size: int | None = None
    precision: Precision = Precision.BF16
    # FP8 parameters (Fp8Params): the FP8 linears' weights kept in FP8 alone, no BF16 copy beside them. The
    # embedding, the output layer and the norms stay BF16.
    fp8_params: Fp8Params = Fp8Params.OFF
    fp8_recipe: Fp8Recipe = Fp8Recipe.DELAYED  # how the FP8 casts are scaled (TENSORWISE: an amax pass first)
    fp8_linears: Fp8Linears = Fp8Linears.TRANSFORMER_ENGINE  # whose FP8 linears (what they keep: Fp8Linears)
    # torchao's enable_fsdp_float8_all_gather: FSDP gathers the float8 linears' weights in FP8, each rank casting
    # its shard first (with the scale precompute_float8_dynamic_scale_for_fsdp computes once a step), and the
    # GEMMs take the gathered FP8 weight as it is (matmul_with_hp_or_float8_args: tensor_already_casted_to_fp8),
    # so no GEMM casts a weight; half the gather's bytes, and the gathered weights held in one byte
    fp8_all_gather: bool = False
    # PyTorch's FSDP2 (fully_shard: torchtitan, OLMo-core): parameters sharded one by one, so each per-layer gather
    # lands in one flat buffer that the compute stream then copies into the layer's parameters
    # (foreach_all_gather_copy_out, split_with_sizes_copy: read and write the gathered bytes), where FSDP1's flat
    # parameters are views of that buffer (MosaicML's, IBM's runs); under pipelining, where a stage stays gathered,
    # each layer's BF16 gradients wait on its parameters for the post-backward hook to add them into FP32
    fsdp2: bool = False
    async_tp: bool = False  # TP collectives overlapped with the GEMMs they feed (Wang et al. 2023)
    # In the backward, each column-parallel linear (the attention's input projection, the MLP's up projection)
    # issues its input-gradient collective (a reduce-scatter with sequence parallelism, else an all-reduce)
    # asynchronously and computes its weight gradient meanwhile: Megatron-LM since September 2021
    # (``--async-tensor-model-parallel-allreduce``, on by default; with sequence parallelism from its first
    # release, ``LinearWithGradAccumulationAndAsyncCommunication``) and Transformer Engine's Linear and
    # LayerNormLinear ("Overlap dgrad-RS/AR with wgrad"). Off: every TP collective waits (Megatron-LM before
    # then and the forks taken from it, e.g. GPT-NeoX; PyTorch DTensor's tensor parallelism).
    overlap_tp_dgrad: bool = True
    # nanotron's tp_linear_async_communication under sequence parallelism: each column-parallel linear's forward
    # all-gather runs beside the GEMM of the rank's own sequence shard (1/tp of the linear's rows), and each row-
    # parallel linear's backward all-gather of its output gradient beside its own shard's input-gradient GEMM
    # (``_ColumnLinearAsyncCommunication``, ``_RowLinearAsyncCommunication``); async TP overlaps all of it already.
    overlap_tp_local_shard: bool = False
    # Under sequence parallelism, how the column-parallel linears' weight gradients get their gathered input
    # (ColumnInput): gathered again beside the input-gradient GEMM (Megatron-LM, TE; default), gathered again
    # and waited for (nanotron), or kept gathered from the forward (PyTorch DTensor TP).
    column_input: ColumnInput = ColumnInput.REGATHER
    elementwise: ElementwiseKernels = ElementwiseKernels.FUSED  # fused kernels, or eager PyTorch ops
    loss: LossKernel = LossKernel.MEGATRON  # the cross-entropy's implementation (bytes moved, transient peak)
    # PaLM's auxiliary z-loss (coefficient · log²Z per token) on the same logits: its own eager ops beside an
    # eager loss (torch.logsumexp), inside nanotron's sharded cross-entropy, free inside a fused or compiled one
    z_loss: bool = False
    # The logits copied before the loss (``logits[..., :-1, :].contiguous()``, shifting them against the labels:
    # OLMo-core's trainer, Hugging Face's causal-LM loss before transformers 4.46), in the loss's input dtype
    loss_input_copy: bool = False
    grad_accumulation: GradAccumulation = GradAccumulation.FUSED  # how microbatches' weight gradients are summed
    # Pipeline sends overlapped with compute. Off: Megatron-LM's blocking batched isend/irecv (the sender waits
    # for its transfer), the behaviour of the 2021–2023 runs in the published table.
    overlap_p2p: bool = False
    # Without sequence parallelism, whether each tp rank sends 1/tp of a boundary tensor (Megatron-LM 2021–2022,
    # DeepSpeed) or all of it (Megatron-Core, nanotron): BoundaryTensor.
    p2p_tensor: BoundaryTensor = BoundaryTensor.WHOLE
    # Blocking sends: a pass's send and its paired receive in one batched call (Megatron-LM) or one after the
    # other (DeepSpeed's pipeline engine): P2pCalls.
    p2p_calls: P2pCalls = P2pCalls.BATCHED
    # What the pipeline runtime keeps of the boundary tensors (PipelineBuffers): nothing beyond the activations
    # (Megatron's), or torch.distributed.pipelining's per-microbatch buffers and, in its multi-stage runtime, the
    # sends it waits for at the step's end. With ``pipeline_outputs_kept`` the last stage also keeps every
    # microbatch's output until the step ends, for ``step()`` to return (PyTorch's schedules before
    # ``return_outputs=False``, which torchtitan passes since October 2025).
    pipeline_buffers: PipelineBuffers = PipelineBuffers.FREED
    pipeline_outputs_kept: bool = False
    mlp_up: MlpUp = MlpUp.FUSED  # a gated MLP's gate and up projections: one GEMM or two linears (MlpUp)
    # Megatron's --overlap-grad-reduce (NeMo's overlap_grad_sync): the data-parallel gradient reduce runs in buckets
    # while each stage's last microbatch runs its backward. --overlap-param-gather (overlap_param_sync): the
    # distributed optimizer's parameter all-gather runs while the next step's first microbatch runs its forward.
    # Off: both wait, after the last backward and after the optimizer (Megatron-LM's defaults).
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    # How that overlapped reduce buckets the gradients (GradBuckets): the framework's, Megatron-Core's unless named
    grad_buckets: GradBuckets = GradBuckets.MEGATRON
    # Expert parallelism (mixture-of-experts models): each MoE layer's routed experts sharded over ep ranks,
    # which are carved out of the stage's dp·cp ranks (Megatron-Core: the expert-parallel group is folded over
    # data and context parallelism, so ep divides dp·cp); its expert weights sync over dp·cp/ep ranks.
    ep: int = 1
    # Expert tensor parallelism (Megatron-Core's --expert-tensor-parallel-size): None, tp (the routed experts split
    # over tp like the dense MLP, each rank routing the tp group's gathered tokens); 1 with tp > 1, MoE parallel
    # folding (Liu et al. 2025, "MoE Parallel Folding", arXiv 2504.14960; Megatron-Core's default for its MoE
    # recipes): each rank routes its own 1/tp of the tokens (sequence parallelism) to whole experts, the
    # expert-parallel group folded over tp·dp·cp (ep divides tp·dp·cp, its members adjacent), the routed experts'
    # gradients syncing over tp·dp·cp/ep ranks; the shared experts stay split over tp.
    expert_tp: int | None = None
    # The most-loaded expert-parallel rank's routed tokens over the mean (1: perfectly balanced routing; a
    # capacity factor is the bound a dropping router enforces). Scales the expert compute, the all-to-all and
    # the routed activations on the critical path.
    moe_imbalance: float = 1.0
    # How the tokens travel to and from the experts (MoeDispatcher), and whether the dispatch (and, in the backward,
    # the combine's gradient) travels in FP8 with a scale per 128 elements (DeepSeek-V3 §3.3.3, DeepEP's FP8
    # dispatch), the combine and the dispatch's gradient in BF16.
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL
    moe_dispatch_fp8: bool = False
    # Megatron-Core's --moe-shared-expert-overlap: the shared experts run on a side stream beside the dispatch and
    # combine (their forward beside the forward's, their backward beside the backward's), hiding that much of them
    moe_shared_expert_overlap: bool = False
    # Copies of the model over the pipeline ranks: 2 for bidirectional DualPipe (DeepSeek-V3 §3.2.1), where
    # rank r holds stage r of one copy and stage pp−1−r of the other, each a whole slice (so ``chunks`` is 1:
    # a microbatch passes one of the two), and half the microbatches run through each copy.
    model_copies: int = 1
    rank_order: RankOrder = RankOrder.TP_CP_DP_PP  # which dimension is outermost (RankOrder)

    def __post_init__(self) -> None:
        for key in ("tp", "dp", "pp", "chunks", "microbatches", "cp", "ep"):
            if getattr(self, key) < 1:
                raise PipesimError(f"--{key} {getattr(self, key)} must be ≥ 1")
        if self.recompute_modules is not DEFAULT_RECOMPUTE_MODULES:  # (the planner makes tens of thousands)
            self._normalise_recompute_modules()
        if self.model_copies not in (1, 2) or (self.model_copies == 2 and (self.chunks != 1 or self.pp % 2)):
            raise PipesimError(f"model_copies={self.model_copies}: 1, or 2 (DualPipe) with chunks 1 and an even pp")
        if self.expert_tp == self.tp:  # the default spelled out: one spelling of one layout, so they hash alike
            object.__setattr__(self, "expert_tp", None)
        if self.expert_tp is not None:
            self._check_folding()
        elif (self.dp * self.cp) % self.ep:
            raise PipesimError(
                f"--ep {self.ep} must divide dp·cp = {self.dp}·{self.cp} = {self.dp * self.cp}: "
                "expert-parallel groups are carved out of a stage's data- and context-parallel "
                "ranks; raise --dp or lower --ep"
            )
        if self.moe_dispatch_fp8 and self.moe_dispatcher is not MoeDispatcher.DEEPEP:
            raise PipesimError("--moe-dispatch-fp8 is DeepEP's FP8 dispatch; add --moe-dispatcher deepep or drop it")
        if not self.moe_imbalance >= 1.0:
            raise PipesimError(
                f"--moe-imbalance {self.moe_imbalance} must be ≥ 1 (the most-loaded rank's tokens over the mean)"
            )
        if self.stage_layers is not None and len(self.stage_layers) != self.num_stages:
            raise PipesimError(f"{len(self.stage_layers)} stage layer counts for {self.num_stages} stages")
        if self.stages_after_head:
            self._check_stages_after_head()
        if self.mtp_stage is not None and not 0 <= self.mtp_stage < self.num_stages:
            raise PipesimError(f"the multi-token-prediction modules' stage {self.mtp_stage} is not one of the "
                               f"pipeline's {self.num_stages} (pp·v) stages")
        if self.overlap_param_gather and self.asked_sharding is ZeroStage.NONE:
            raise PipesimError("--overlap-param-gather overlaps the distributed optimizer's parameter all-gather, but "
                               "no optimizer state is sharded; add --distributed-optimizer (or --zero N) or drop it")
        if self.zero_collectives is ZeroCollectives.PER_LAYER and (
                self.asked_sharding < ZeroStage.GRADIENTS or self.pp > 1):
            raise PipesimError(
                "--zero-collectives per-layer is PyTorch FSDP's ZeRO-2 (SHARD_GRAD_OP) without pipelining; it "
                f"needs --zero 2 and --pp 1 (got --zero {int(self.asked_sharding)}, --pp {self.pp}): set those or "
                "drop it (ZeRO-3 without pipelining is per layer already)")
        if self.zero_collectives is ZeroCollectives.PER_TENSOR and not self.zero_collectives.applies_to(
                self.asked_sharding, self.pp):
            raise PipesimError(
                "--zero-collectives per-tensor is DeepSpeed's 2021 ZeRO-3 (one collective per parameter tensor), "
                f"which has no pipelining; it needs --zero 3 and --pp 1 (got --zero {int(self.asked_sharding)}, "
                f"--pp {self.pp}): set those or drop it")
        if self.zero_collectives is ZeroCollectives.ALL_REDUCE_FP32 and not self.zero_collectives.applies_to(
                self.asked_sharding, self.pp):
            raise PipesimError(
                "--zero-collectives all-reduce-fp32 all-reduces whole gradients and shards only the optimizer state "
                f"(ZeRO-1); it needs --zero 1 (got --zero {int(self.asked_sharding)}): set it or drop the option")
        if self.zero_collectives is ZeroCollectives.HIERARCHICAL:
            self._check_hierarchical()
        if self.shard_group is not None:
            self._check_shard_group()
        if self.outer_optimizer_sharding:
            self._check_outer_optimizer_sharding()
        if self.pipeline_outputs_kept and not self.pipeline_buffers.preallocates:
            raise PipesimError("--pipeline-outputs-kept is torch.distributed.pipelining's last stage keeping its "
                               "outputs for step() to return; it needs --pipeline-buffers torch or torch-runtime "
                               "(--framework torchtitan's): add one or drop it")
        if self.p2p_calls is P2pCalls.SEQUENTIAL and self.overlap_p2p:
            raise PipesimError("--p2p-calls sequential (the default of --framework nanotron and megatron-deepspeed) "
                               "is a blocking engine's send and receive one after the other; --overlap-p2p overlaps "
                               "them with compute, which those engines do not: drop one of the two")
        if self.recompute_layers is not None and (self.recompute is not Recompute.FULL or self.recompute_layers < 1):
            raise PipesimError(
                f"--recompute-layers {self.recompute_layers} recomputes that many layers of each model chunk in full "
                "(Megatron's --recompute-method block --recompute-num-layers N): it needs --recompute full and N ≥ 1; "
                "add --recompute full or drop it")
        if self.distribute_saved_activations and (self.recompute is not Recompute.FULL or self.tp == 1
                                                  or self.sequence_parallel):
            raise PipesimError(
                "--distribute-saved-activations splits each fully recomputed layer's stored input over the tp ranks "
                f"(Megatron-LM's flag): it needs --recompute full, --tp above 1 and no --sequence-parallel (got "
                f"--recompute {self.recompute.value}, --tp {self.tp}"
                f"{', --sequence-parallel' if self.sequence_parallel else ''}): set those or drop it")
        if (self.fp8_params is not Fp8Params.OFF and self.precision is Precision.FP8
                and self.asked_sharding >= ZeroStage.PARAMETERS):
            raise PipesimError(
                "--fp8-params under ZeRO-3 (an FSDP's FP8 weights kept sharded and gathered in FP8, Megatron-FSDP's "
                "--fp8-param-gather) is not modelled: drop it, and the gathers and weights are counted in BF16")
        if self.fp8_params is not Fp8Params.OFF and (self.precision is not Precision.FP8
                                or not self.asked_sharding.gathers_after_step):
            raise PipesimError(
                "--fp8-params keeps the FP8 linears' weights in FP8 alone (Megatron-LM's --fp8-param-gather), which "
                "needs --fp8 and a distributed optimizer: add --fp8 and --distributed-optimizer (or --zero 1/2), "
                "or drop --fp8-params")
        if self.fp8_linears is Fp8Linears.TORCHAO and self.fp8_params is not Fp8Params.OFF:
            raise PipesimError("--fp8-params is Megatron-LM's FP8 parameters in Transformer Engine's linears; "
                               "--fp8-linears torchao casts its weights at each GEMM: drop one of the two")
        if self.fp8_all_gather and not (self.precision is Precision.FP8 and self.fp8_linears is Fp8Linears.TORCHAO
                                        and self.asked_sharding >= ZeroStage.PARAMETERS):
            raise PipesimError("--fp8-all-gather is torchao's FSDP float8 all-gather: it needs --fp8 with "
                               "--fp8-linears torchao (--framework torchtitan's) and FSDP (--zero 3); add those or "
                               "drop it")
        if self.fsdp2 and self.asked_sharding < ZeroStage.GRADIENTS:
            raise PipesimError("--fsdp2 is PyTorch's fully_shard, which shards gradients and weights: it needs "
                               "--zero 3 (or --zero 2); add one or drop it")
        if self.fp8_recipe is not Fp8Recipe.DELAYED and self.precision is not Precision.FP8:
            raise PipesimError(f"--fp8-recipe {self.fp8_recipe.value} scales FP8 casts, but the run is "
                               f"{self.precision.value}: add --fp8 or drop --fp8-recipe")
        if self.cp_comm_ctas is not None and (self.cp == 1 or self.cp_comm_ctas < 1):
            raise PipesimError(f"--cp-comm-ctas {self.cp_comm_ctas} caps the CTAs of the context-parallel group's "
                               "ring sends: it needs --cp N (N > 1) and at least 1 CTA; set those or drop it")
        check_cp_pairing(self.cp_kernels, self.cp_comm)
        check_z_loss(self.loss, self.z_loss)
        hierarchical = self.cp_comm is CpComm.A2A_P2P
        if hierarchical and (self.cp_a2a_size is None or self.cp_a2a_size < 1 or self.cp % self.cp_a2a_size):
            given = ("none was given" if self.cp_a2a_size is None
                     else f"an all-to-all size of {self.cp_a2a_size}, which does not divide it")
            raise PipesimError(f"--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes A B with A·B = "
                               f"--cp {self.cp} (the all-to-all groups' size, then the ring's); {given}")
        if self.cp_a2a_size is not None and not hierarchical:
            raise PipesimError("--hierarchical-context-parallel-sizes sizes the levels of --cp-comm-type a2a+p2p; add "
                               "it or drop the sizes")
        if self.async_tp and self.tp == 1:
            raise PipesimError("--async-tp overlaps tensor-parallel collectives, but --tp is 1; add --tp N or drop it")
        if self.async_tp and self.overlap_tp_local_shard:
            raise PipesimError("--overlap-tp-local-shard hides part of the TP all-gathers, --async-tp all of every TP "
                               "collective; keep one")
        if self.async_tp and not self.overlap_tp_dgrad:
            raise PipesimError("--no-overlap-tp-dgrad contradicts --async-tp, which overlaps every tensor-parallel "
                               "collective with a GEMM; drop one of them")

    def _check_stages_after_head(self) -> None:
        after = self.stages_after_head
        flag = f"--stages-after-head {after}"
        if after not in (1, 2) or self.num_stages <= after:
            raise PipesimError(f"{flag}: nanotron's cost balance leaves 1 or 2 stages after the LM head's, and the "
                               f"pipeline needs a stage before them (pp·v = {self.num_stages}); give 0, 1 or 2")
        if self.chunks != 1 or self.model_copies != 1 or self.pipeline_buffers is not PipelineBuffers.FREED:
            raise PipesimError(f"{flag} is nanotron's placement of its LM head, in its own 1F1B and "
                               "all-forward-all-backward engines: one stage a rank (no --chunks, no DualPipe), its "
                               "boundary tensors freed (no --pipeline-buffers torch); drop one of the two")
        if self.stage_layers is None or any(self.stage_layers[-after:]):
            given = ",".join(map(str, self.stage_layers)) if self.stage_layers else "an even split"
            raise PipesimError(f"{flag}: the last {after} stage(s) hold no layer, only the logits' cast and the "
                               f"loss, but the layers per stage are {given}; give --stage-layers ending in "
                               f"{after} zero(s)")

    @property
    def head_stage(self) -> int:
        """The stage holding the final norm and the LM head (:attr:`stages_after_head` before the last)."""
        return self.num_stages - 1 - self.stages_after_head

    @property
    def mtp_slice(self) -> int:
        """The model slice a multi-token-prediction model's modules run on (:attr:`mtp_stage`, else the last)."""
        return self.num_stages - 1 if self.mtp_stage is None else self.mtp_stage

    def head_parts(self, stage: int) -> HeadParts:
        """What of the model's end ``stage`` runs (:class:`HeadParts`): the LM head on :attr:`head_stage`, the
        FP32 cast with it or on the stage after it, the loss on the last stage."""
        last = self.num_stages - 1
        cast = self.head_stage + (1 if self.stages_after_head else 0)
        return HeadParts(stage == self.head_stage, stage == cast, stage == last)

    @property
    def cp_a2a_ranks(self) -> int:
        """The cp ranks Ulysses' all-to-alls span: all of cp under a2a, the inner groups' under a2a+p2p, else 1."""
        if self.cp_comm is CpComm.A2A:
            return self.cp
        return self.cp_a2a_size if self.cp_comm is CpComm.A2A_P2P else 1

    @property
    def cp_ring_ranks(self) -> int:
        """The ring's length: cp under p2p, the groups' count under a2a+p2p, else 1 (no ring)."""
        return self.cp // self.cp_a2a_ranks if self.cp_comm.ring else 1

    @property
    def hides_gathers_locally(self) -> bool:
        """Whether the TP all-gathers run beside the local shard's GEMMs (:attr:`overlap_tp_local_shard` where
        there are gathers: tp > 1 with sequence parallelism)."""
        return self.overlap_tp_local_shard and self.gathers_column_input

    @property
    def gathers_column_input(self) -> bool:
        """Whether the column-parallel linears' inputs are all-gathered (tp > 1 with sequence parallelism)."""
        return self.tp > 1 and self.sequence_parallel

    @property
    def column_input_differs(self) -> bool:
        """Whether :attr:`column_input` departs from Megatron-LM's where it matters (a report says so)."""
        return self.gathers_column_input and self.column_input is not ColumnInput.REGATHER

    @property
    def keeps_quantized_copies(self) -> bool:
        """Whether the quantized linears keep quantized tensors between passes (Transformer Engine's FP8 weight
        copy and FP8 saved inputs, its NVFP4 ones), rather than the high-precision ones torchao's keep."""
        return self.precision.quantized and not (self.precision is Precision.FP8
                                                 and self.fp8_linears is Fp8Linears.TORCHAO)

    def _normalise_recompute_modules(self) -> None:
        """One spelling of one set of modules (names parsed, sorted, once each), so equal layouts hash alike."""
        modules = tuple(sorted({parse_choice("--recompute-modules", RecomputeModule, m)
                                for m in self.recompute_modules}, key=lambda m: m.value))
        if not modules:
            raise PipesimError("--recompute-modules names no module; give one or more of "
                               + ", ".join(m.value for m in RecomputeModule))
        object.__setattr__(self, "recompute_modules", modules)

    @property
    def recomputed_modules(self) -> frozenset[RecomputeModule]:
        """What a selective recomputation re-runs (:attr:`recompute_modules`); nothing under any other."""
        return frozenset(self.recompute_modules) if self.recompute is Recompute.SELECTIVE else frozenset()

    @property
    def recomputes_attention_core(self) -> bool:
        """Whether the attention core is recomputed by a selective recomputation (full recomputation re-runs the
        whole layer, counted apart)."""
        return RecomputeModule.CORE_ATTN in self.recomputed_modules

    @property
    def keeps_gathered_column_input(self) -> bool:
        """Whether a stored layer keeps its column-parallel inputs gathered (:attr:`ColumnInput.SAVED`): only
        the layers whose activations are kept, not a layer recomputed in full or by per-op policy."""
        return (self.gathers_column_input and self.column_input is ColumnInput.SAVED
                and self.recompute in (Recompute.NONE, Recompute.SELECTIVE))

    @property
    def hides_tp_dgrad(self) -> bool:
        """Whether the fused backward hides the column-parallel linears' input-gradient collectives behind their
        weight-gradient GEMMs (:attr:`overlap_tp_dgrad` with tp > 1; async TP has a model of its own)."""
        return self.overlap_tp_dgrad and self.tp > 1 and not self.async_tp

    @property
    def gathered_weight_bytes(self) -> float:
        """Bytes a ZeRO all-gather of the weights moves per weight (and ZeRO-3 holds): BF16's, or one where the
        weights are gathered in FP8: torchao's FSDP float8 all-gather (:attr:`fp8_all_gather`), and the distributed
        optimizer's gather after the step with FP8 parameters (:attr:`fp8_params`: Megatron-Core's parameter buffer
        holds them as ``torch.uint8``, ``param_and_grad_buffer.py`` since "Add native-fp8", September 2024, so its
        all-gather moves their bytes; Megatron-LM's help: "perform the param all-gather in fp8"). The embedding,
        the head and the norms, which stay BF16, are taken alike: under 1 % of a layer's, a few percent of a small
        model's."""
        in_fp8 = self.fp8_all_gather or self.fp8_params is not Fp8Params.OFF
        return 1.0 if in_fp8 else self.param_bytes.weights

    @property
    def torch_loss_parallel(self) -> bool:
        """PyTorch's cross-entropy (``--loss pytorch``) over logits sharded along the vocabulary, at tp > 1: that is
        torch's ``loss_parallel`` (``torch.distributed.tensor.parallel.loss``: the log-softmax decomposed into
        eager ops with all-reduces, and the NLL's backward fused with it), which torchtitan runs under tensor
        parallelism (and, since June 2026, its own ``_LossParallelCrossEntropy``, the same ops); it moves and holds
        more than ATen's fused log-softmax (``kernels.LOSS_PARALLEL_BYTES``,
        ``activations.LOSS_PARALLEL_TRANSIENT_BYTES``)."""
        return self.loss is LossKernel.PYTORCH and self.loss_shards > 1

    @property
    def loss_shards(self) -> int:
        """Ranks the cross-entropy's logits are split over: tp for a vocabulary-parallel loss, else 1."""
        return self.tp if self.loss.vocab_parallel else 1

    @property
    def shards(self) -> int:
        """Ranks the ZeRO state is sharded over: the data-parallel group *with* context parallel, dp·cp. CP ranks
        hold the same weights and reduce their gradients together; Megatron-Core's ``get_megatron_optimizer``
        gives its DistributedOptimizer the ``intra_dp_cp_group`` (megatron/core/optimizer/__init__.py), and
        torchtitan's FSDP mesh is dp_shard·cp. A shard group (:attr:`shard_group`, hybrid sharding) narrows it."""
        return self.shard_group or self.dp * self.cp

    def _check_shard_group(self) -> None:
        group, ranks = self.shard_group, self.dp * self.cp
        if group < 1 or ranks % group:
            raise PipesimError(f"--shard-group {group} must divide dp·cp = {ranks} (the data-parallel ranks each "
                               "group of shards is carved from); use a divisor of it or drop the option")
        if self.asked_sharding is ZeroStage.NONE:
            raise PipesimError(f"--shard-group {group} shards the ZeRO state within groups (hybrid sharding); it "
                               "needs --zero 1, 2 or 3 (or --distributed-optimizer): set one or drop the option")
        if self.ep > 1:
            raise PipesimError(f"--shard-group {group} with --ep {self.ep}: experts' shard groups are not "
                               "modelled; drop one of the two")

    def _check_outer_optimizer_sharding(self) -> None:
        flag = "--outer-optimizer-sharding (Megatron-FSDP's --outer-dp-sharding-strategy optim)"
        if self.shard_group is None or self.shard_replicas == 1:
            raise PipesimError(f"{flag} shards the optimizer state across the replicas of hybrid sharding, but there "
                               "are none: give the shard group with --shard-group N (Megatron-LM: "
                               "--num-distributed-optimizer-instances dp·cp/N) or drop it")
        if self.asked_sharding is not ZeroStage.PARAMETERS or self.pp > 1:
            raise PipesimError(f"{flag} needs ZeRO-3 within the groups without pipelining (Megatron-FSDP: 'Optimizer "
                               "fully-sharded HFSDP is only supported with full-sharding on DP-Shard'; got --zero "
                               f"{int(self.asked_sharding)}, --pp {self.pp}): set --zero 3 --pp 1 or drop it")

    def _check_hierarchical(self) -> None:
        if not self.zero_collectives.applies_to(self.asked_sharding, self.pp):
            raise PipesimError(
                "--zero-collectives hierarchical is Megatron-LM's distributed optimizer in instances (ZeRO-1); it "
                f"needs --zero 1 or --distributed-optimizer (got --zero {int(self.asked_sharding)}): set one or drop "
                "the option")
        if self.shard_group is None:
            raise PipesimError("--zero-collectives hierarchical reduces within a shard group and across the groups; "
                               "give the group with --shard-group N (dp·cp over the instances) or drop the option")

    @property
    def optimizer_shards(self) -> int:
        """Ranks the optimizer state is sharded over: the shards' group (:attr:`shards`), or every dp·cp rank
        under hybrid FSDP's outer optimizer sharding (:attr:`outer_optimizer_sharding`)."""
        return self.dp * self.cp if self.outer_optimizer_sharding else self.shards

    @property
    def shard_replicas(self) -> int:
        """How many replicas of the sharded ZeRO state there are: dp·cp over the shard group (1 without one)."""
        return self.dp * self.cp // self.shards

    def _check_folding(self) -> None:
        """MoE parallel folding (:attr:`expert_tp` 1 under tp > 1): what it needs, and what pipesim models of it."""
        flag = f"--expert-tp {self.expert_tp}"
        if self.expert_tp != 1:
            raise PipesimError(f"{flag}: pipesim models expert tensor parallelism equal to --tp ({self.tp}) or 1 (MoE "
                               "parallel folding); use one of those")
        if not self.sequence_parallel:
            raise PipesimError(f"{flag} with --tp {self.tp}: each rank routes its own share of the sequence, so it "
                               "needs --sequence-parallel (Megatron-Core requires it with experts and tp)")
        if (self.tp * self.dp * self.cp) % self.ep:
            raise PipesimError(f"--ep {self.ep} must divide tp·dp·cp = {self.tp * self.dp * self.cp} under {flag}: "
                               "the expert-parallel groups are folded over those ranks; raise --dp or lower --ep")
        if self.rank_order is RankOrder.TP_CP_PP_DP:
            raise PipesimError(f"{flag} with --tp-pp-dp-mapping: pipesim folds the experts over Megatron's default "
                               "order only; drop one")

    @property
    def etp(self) -> int:
        """Expert tensor parallelism: :attr:`expert_tp`, tp when not given."""
        return self.tp if self.expert_tp is None else self.expert_tp

    @property
    def expert_token_share(self) -> float:
        """The share of a tp group's tokens one rank routes to its experts: all of them (gathered) with experts split
        over tp, its own 1/tp under MoE parallel folding."""
        return self.etp / self.tp

    @property
    def asked_sharding(self) -> ZeroStage:
        """The ZeRO stage asked for: ``zero``, or ZeRO-1 when only ``distributed_optimizer`` is set."""
        return max(self.zero, ZeroStage.OPTIMIZER if self.distributed_optimizer else ZeroStage.NONE)

    @property
    def sharding(self) -> ZeroStage:
        """The ZeRO stage in force: the one asked for, or none when dp·cp = 1 — nothing to shard; the run goes on
        as ZeRO-0, as Megatron does with --use-distributed-optimizer on one replica (see :attr:`sharding_note`)."""
        # Kept beside the fields (not in eq/hash): the cost model asks for it hundreds of times per layout.
        known = self.__dict__.get("_sharding")
        if known is None:
            known = self.__dict__["_sharding"] = self.asked_sharding if self.shards > 1 else ZeroStage.NONE
        return known

    @property
    def sharding_note(self) -> str | None:
        """A note for reports when a ZeRO stage was asked for but dp·cp = 1 (or the shard group is one rank), else
        None."""
        if self.asked_sharding is ZeroStage.NONE or self.shards > 1:
            return None
        what = (
            "the distributed optimizer"
            if self.asked_sharding is ZeroStage.OPTIMIZER
            else f"ZeRO-{int(self.asked_sharding)}"
        )
        ranks = self.dp * self.cp
        why = "dp·cp = 1" if ranks == 1 else f"shard groups of one rank of dp·cp = {ranks}"
        return f"nothing to shard ({why}): {what} keeps the full state (runs as ZeRO-0)"

    @property
    def column_input_note(self) -> str | None:
        """A note for reports when a non-default :attr:`column_input` was given where no input is gathered."""
        if self.column_input is ColumnInput.REGATHER or self.gathers_column_input:
            return None
        return (f"--column-input {self.column_input.value} changes nothing here: the column-parallel inputs are "
                "all-gathered only with --sequence-parallel and --tp > 1")

    @property
    def inert_flag_notes(self) -> list[str]:
        """Notes for reports on options set away from their defaults where this layout gives them nothing to act
        on: pipeline sends without a pipeline, the TP dgrad overlap or sequence parallelism without tensor
        parallelism, the boundary tensor's split where each rank holds a whole one (tp 1) or a split one (sequence
        parallelism)."""
        notes = []
        if self.pp == 1:
            sends = [flag for flag, moved in (("--overlap-p2p", self.overlap_p2p),
                                              (f"--p2p-calls {self.p2p_calls.value}", self.p2p_calls
                                               is not P2pCalls.BATCHED),
                                              (f"--p2p-tensor {self.p2p_tensor.value}", self.p2p_tensor
                                               is not BoundaryTensor.WHOLE),
                                              (f"--pipeline-buffers {self.pipeline_buffers.value}",
                                               self.pipeline_buffers is not PipelineBuffers.FREED),
                                              ("--pipeline-outputs-kept", self.pipeline_outputs_kept)) if moved]
            if sends:
                notes.append(f"{', '.join(sends)} changes nothing here: there are no pipeline sends (--pp 1)")
            if self.rank_order is RankOrder.TP_CP_PP_DP:
                notes.append("--tp-pp-dp-mapping changes nothing here: with one pipeline rank both orders number "
                             "the ranks alike (--pp 1)")
        elif self.p2p_tensor is not BoundaryTensor.WHOLE and (self.tp == 1 or self.sequence_parallel):
            notes.append(f"--p2p-tensor {self.p2p_tensor.value} changes nothing here: each tp rank holds "
                         + ("the whole boundary tensor (--tp 1)" if self.tp == 1 else
                            "1/tp of it already (--sequence-parallel)"))
        if self.fp8_linears is not Fp8Linears.TRANSFORMER_ENGINE and self.precision is not Precision.FP8:
            notes.append(f"--fp8-linears {self.fp8_linears.value} changes nothing here: the run is not FP8 (add "
                         "--fp8)")
        if self.fsdp2 and not self.gathers_per_layer and not self.accumulates_unsharded_grads:
            why = ("with dp·cp = 1 nothing is sharded" if self.shards == 1 else
                   f"ZeRO-{int(self.sharding)} keeps the weights whole")
            notes.append(f"--fsdp2 changes nothing here: no layer is gathered per microbatch ({why})")
        if not self.overlap_tp_dgrad and self.tp == 1:
            notes.append("--no-overlap-tp-dgrad changes nothing here: there are no tensor-parallel collectives "
                         "(--tp 1)")
        overlaps = [flag for flag, on in (("--overlap-grad-reduce", self.overlap_grad_reduce),
                                          ("--overlap-param-gather", self.overlap_param_gather)) if on]
        if overlaps and self.gathers_per_layer:
            notes.append(f"{', '.join(overlaps)} changes nothing here: ZeRO-{int(self.sharding)}'s per-layer gathers "
                         "and reduce-scatters run beside the layers, leaving no sync for the step's end")
        if self.cp == 1:
            cp = [flag for flag, moved in ((f"--cp-comm-type {self.cp_comm.value}", self.cp_comm is not CpComm.P2P),
                                           (f"--cp-kernels {self.cp_kernels.value}",
                                            self.cp_kernels is not CpKernels.TRANSFORMER_ENGINE)) if moved]
            if cp:
                notes.append(f"{', '.join(cp)} changes nothing here: no context parallelism (--cp 1)")
        if self.sequence_parallel and self.tp == 1:
            # Megatron-LM turns it off with a warning (arguments.py), so a pasted launch line runs on
            notes.append("--sequence-parallel changes nothing here: there is nothing to shard along tp (--tp 1; "
                         "Megatron-LM turns it off)")
        if self.overlap_tp_local_shard and not self.gathers_column_input:
            notes.append("--overlap-tp-local-shard changes nothing here: no tensor-parallel all-gathers (they need "
                         "--tp > 1 and --sequence-parallel)")
        if self.zero_collectives is ZeroCollectives.PER_LAYER and self.sharding is ZeroStage.PARAMETERS:
            notes.append("--zero-collectives per-layer changes nothing here: ZeRO-3 without pipelining gathers and "
                         "reduce-scatters per layer already")
        if self.grad_buckets is not GradBuckets.MEGATRON and not self.buckets_matter:
            why = ("no gradient is reduced across data-parallel ranks (dp·cp = 1)" if not self.reduces_gradients else
                   f"ZeRO-{int(self.sharding)}'s per-layer collectives leave no bucket for the step's end"
                   if self.gathers_per_layer else
                   "no data-parallel sync runs beside the passes (add --overlap-grad-reduce)")
            notes.append(f"--grad-buckets {self.grad_buckets.value} changes nothing here: {why}")
        if self.ep == 1 and self.moe_dispatcher is not MoeDispatcher.ALLTOALL:
            notes.append(f"--moe-dispatcher {self.moe_dispatcher.value} changes nothing here: no token leaves its "
                         "rank (--ep 1)")
        return notes

    @property
    def buckets_matter(self) -> bool:
        """Whether the gradient buckets' cut changes the step: only what of an overlapped data-parallel sync the
        passes cannot hide depends on it (:func:`~pipesim.analytic.to_costs.stage_last_bucket`, 0 elsewhere)."""
        return (self.reduces_gradients and not self.gathers_per_layer
                and (self.overlap_grad_reduce or self.overlap_param_gather))

    @property
    def reduces_gradients(self) -> bool:
        """Whether any gradient is reduced across data-parallel ranks: dp·cp > 1 (experts reduce over dp·cp/ep,
        a subset of the same ranks, so nothing when dp·cp is 1)."""
        return self.shards > 1

    @property
    def grad_reduce_note(self) -> str | None:
        """A note for reports when --overlap-grad-reduce was given where no gradient is reduced, else None."""
        if not self.overlap_grad_reduce or self.reduces_gradients:
            return None
        return ("--overlap-grad-reduce changes nothing here: no gradient is reduced across data-parallel ranks "
                "(dp·cp = 1)")

    @property
    def gathers_per_layer(self) -> bool:
        """ZeRO-3 without pipelining, or FSDP's per-layer ZeRO-2: every layer's weights are gathered before its
        forward (ZeRO-3: before its backward too) and its gradients reduce-scattered after its backward, so
        nothing of the data-parallel sync is left for the step's end. (With pipelining a stage's weights stay
        gathered through the step, as torchtitan's FSDP + PP keeps them.)"""
        if self.pp > 1:
            return False
        return self.sharding is ZeroStage.PARAMETERS or (
            self.sharding is ZeroStage.GRADIENTS and self.zero_collectives is ZeroCollectives.PER_LAYER)

    @property
    def accumulates_unsharded_grads(self) -> bool:
        """FSDP2 under pipelining (torchtitan's FSDP + PP): a stage stays gathered and syncs its gradients once a
        step, so each microbatch's gradients are added into FP32 accumulators of the whole unsharded stage by
        each layer's post-backward hook (:func:`pipesim.analytic.memory_gib.fsdp2_layer_gradients`)."""
        return self.fsdp2 and self.pp > 1 and self.sharding >= ZeroStage.GRADIENTS

    @property
    def regathers_for_backward(self) -> bool:
        """Whether a layer gathered per layer frees its weights after its forward and gathers them again for
        its backward (ZeRO-3, FSDP's FULL_SHARD), rather than keeping them until its backward is done (FSDP's
        SHARD_GRAD_OP, ZeRO-2)."""
        return self.gathers_per_layer and self.sharding is ZeroStage.PARAMETERS

    @property
    def collectives_per_tensor(self) -> bool:
        """DeepSpeed's 2021 ZeRO-3 in force (:attr:`ZeroCollectives.PER_TENSOR`): a collective per parameter
        tensor, each costing the host a tensor operation per rank."""
        return self.regathers_for_backward and self.zero_collectives is ZeroCollectives.PER_TENSOR

    @property
    def expert_shards(self) -> int:
        """Ranks an expert's ZeRO state is sharded over and its gradients sync over: dp·cp/ep (the expert
        data-parallel group), tp·dp·cp/ep under MoE parallel folding."""
        return self.shards * (self.tp // self.etp) // self.ep

    @property
    def num_stages(self) -> int:
        return self.pp * self.chunks

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def pipeline_stride(self) -> int:
        """Ranks between pipeline neighbours (:class:`RankOrder`)."""
        return self.tp * self.cp * (self.dp if self.rank_order is RankOrder.TP_CP_DP_PP else 1)

    @property
    def dp_stride(self) -> int:
        """Ranks between neighbouring members of a data-parallel (dp·cp) group, on average over the group's span:
        tp in Megatron's default order (cp and dp contiguous after tp), tp·pp when pipeline ranks sit between them
        (exact with cp = 1; with cp > 1 the cp members are tp apart and the dp members tp·cp·pp)."""
        return self.tp * (self.pp if self.rank_order is RankOrder.TP_CP_PP_DP else 1)
