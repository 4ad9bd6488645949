"""The search space: every meaningful parallel configuration of a GPU count and a global batch, or why none.

A configuration (:class:`Candidate`) fixes tp × cp × pp × dp = GPUs, the micro-batch size ``b`` (so the
microbatches per pipeline ``m = global batch / (dp · b)``), the schedule and its chunks per rank ``v``,
recomputation, sequence parallelism, the ZeRO stage and the GEMM precision. What is *meaningful*:

- tp stays within a node (it divides ``gpus_per_node``; Narayanan et al. 2021, §3.3 takeaway #1) and divides
  the model's heads, KV heads, FFN width and vocabulary; the layers split over the pp·v slices evenly, or else
  with one layer fewer on the first and the last slice where that balances (Megatron-LM's accounting of the
  embedding and the loss as a layer each: :func:`~pipesim.analytic.stage_split.pipeline_split`), as Llama 3.1
  405B's 126 layers over pp 8 are run;
- context parallelism (cp) splits each sequence into ``2·cp`` load-balanced chunks, so ``2·cp`` divides the
  sequence, and each rank keeps at least ``min_cp_tokens`` tokens (below that the ring's transfers cannot
  hide behind attention, and cp only exists for long sequences: Megatron-LM's CP guide); none over sliding
  windows, which the cost model does not model under cp;
- ZeRO-2 only without pipelining (with pp > 1 every microbatch accumulates into the full gradients: no
  framework shards them), FP8 only on chips with FP8 tensor cores;
- pp = 1 has no pipeline schedule, so it is one candidate (simulated as 1F1B on one rank, which is
  plain gradient accumulation), not one per schedule;
- sequence parallelism needs tp > 1, ZeRO dp > 1 (at degree 1 they are off);
- expert parallelism (mixture-of-experts models only): every ep in ``expert_parallel`` (default: all) that
  divides dp·cp (the expert-parallel groups are carved out of them) and the experts per layer; and at tp > 1
  with sequence parallelism, MoE parallel folding too (``expert_tp`` 1: whole experts a rank, each rank routing
  its own tokens), with every ep above 1 that divides tp·dp·cp and the experts;
- schedules with a fixed chunk count (1 for 1F1B-like, 2 for the V schedules) get that; those with a free
  one (interleaved, looped BFS) get every ``v ≥ 2`` up to ``max_chunks`` that splits the layers so.
  Constraints of a schedule's own (interleaved needs m to be a multiple of pp) are left to the schedule:
  the search builds it and counts the refusal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.frameworks import Framework, knobs
from pipesim.analytic.kernels import PassTimes, head_times, layer_times
from pipesim.analytic.layout import (
    SEARCHED_RECOMPUTE,
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    ElementwiseKernels,
    Fp8Linears,
    Fp8Params,
    GradAccumulation,
    Layout,
    LossKernel,
    MlpUp,
    MoeDispatcher,
    OptimizerBytes,
    P2pCalls,
    PipelineBuffers,
    Precision,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.analytic.model_spec import LayerKind, ModelSpec
from pipesim.analytic.params import total_params
from pipesim.analytic.stage_split import SplitPolicy, head_balanced_split, pipeline_split
from pipesim.errors import PipesimError
from pipesim.program.ir import Placement
from pipesim.program.loader import builtin_names, load_schedule

MEGATRON_PARAM_BYTES = OptimizerBytes()  # 18 B/param: BF16 weights, FP32 grads, FP32 master + Adam m, v
NO_PIPELINE_SCHEDULE = "1f1b"  # what pp = 1 is simulated as: m forward/backward pairs, no bubble
# The precisions searched unless asked otherwise: NVFP4 is a numerics choice a plan should not make for its user
# (its recipes keep layers in BF16 and add transforms for convergence), so it is searched only when named.
SEARCHED_PRECISIONS = (Precision.BF16, Precision.FP8)


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks: this model on this many chips at this global batch (sequences per step)."""

    model: ModelSpec
    chip: ChipSpec
    gpus: int
    global_batch: int
    gpus_per_node: int = 8
    memory_cap_gib: float | None = None  # default: the chip's HBM
    # A request built directly: the fixed-order built-ins. plan_request (and so `pipesim plan`) passes every
    # built-in the framework runs, zb-auto too: the search synthesises it per shape, last (search.py).
    schedules: tuple[str, ...] = field(
        default_factory=lambda: tuple(n for n in builtin_names() if not load_schedule(n).build_options)
    )
    recompute: tuple[Recompute, ...] = SEARCHED_RECOMPUTE
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    sequence_parallel: tuple[bool, ...] = (False, True)
    zero: tuple[ZeroStage, ...] = tuple(ZeroStage)
    precision: tuple[Precision, ...] = SEARCHED_PRECISIONS
    context_parallel: tuple[int, ...] = (1, 2, 4, 8)
    min_cp_tokens: int = 2048
    max_chunks: int = 4
    param_bytes: OptimizerBytes = MEGATRON_PARAM_BYTES
    attention: AttentionKernel = AttentionKernel.FUSED  # the kernel the training code uses (not searched)
    kv_repeated: bool = False  # grouped K and V copied to every query head first (Layout.kv_repeated; not searched)
    elementwise: ElementwiseKernels = ElementwiseKernels.FUSED  # fused kernels or eager ops (not searched)
    loss: LossKernel = LossKernel.MEGATRON  # the cross-entropy's implementation (not searched)
    z_loss: bool = False  # a z-loss beside it (Layout.z_loss; not searched)
    loss_input_copy: bool = False  # its input copied first (Layout.loss_input_copy; not searched)
    # How ZeRO-2 candidates communicate (not searched): DeepSpeed's buckets, or FSDP's per-layer collectives
    zero_collectives: ZeroCollectives = ZeroCollectives.BUCKETED
    # sharded candidates' shard groups (Layout.shard_group, hybrid sharding, not searched): None, over all of dp·cp
    shard_group: int | None = None
    # The column-parallel linears' input-gradient collectives beside their weight gradients (Megatron-LM's and
    # Transformer Engine's backward, Layout.overlap_tp_dgrad; not searched); False: every TP collective waits.
    overlap_tp_dgrad: bool = True
    # Under sequence parallelism, each TP all-gather beside the local shard's GEMM (nanotron's asynchronous TP,
    # Layout.overlap_tp_local_shard; not searched).
    overlap_tp_local_shard: bool = False
    # Under sequence parallelism, how the column-parallel linears' weight gradients get their gathered input
    # (Layout.column_input; not searched): gathered again beside the input-gradient GEMM (Megatron-LM, TE).
    column_input: ColumnInput = ColumnInput.REGATHER
    # Without sequence parallelism, what each tp rank sends across a pipeline boundary (Layout.p2p_tensor; not
    # searched): the whole tensor (Megatron-Core).
    p2p_tensor: BoundaryTensor = BoundaryTensor.WHOLE
    # Blocking sends' send and paired receive: one batched call (Megatron-LM) or one after the other (DeepSpeed's
    # engine); Layout.p2p_calls, not searched. Overlapped sends (interleaved candidates) are batched.
    p2p_calls: P2pCalls = P2pCalls.BATCHED
    # A gated MLP's gate and up projections (Layout.mlp_up; not searched): one fused GEMM (Megatron-Core).
    mlp_up: MlpUp = MlpUp.FUSED
    # How a MoE model's tokens reach their experts (Layout.moe_dispatcher, moe_dispatch_fp8; not searched).
    moe_dispatcher: MoeDispatcher = MoeDispatcher.ALLTOALL
    moe_dispatch_fp8: bool = False
    # Whose FP8 linears the FP8 candidates train with (Layout.fp8_linears; not searched): Transformer Engine's.
    fp8_linears: Fp8Linears = Fp8Linears.TRANSFORMER_ENGINE
    # How microbatches' weight gradients are summed (Layout.grad_accumulation; not searched): in the GEMM.
    grad_accumulation: GradAccumulation = GradAccumulation.FUSED
    # The training code whose defaults set the fields above (pipesim.analytic.frameworks); Megatron's launch line
    # is printed for its candidates only.
    framework: Framework = Framework.MEGATRON
    # Candidates overlap their pipeline sends with compute where the framework's engine does for their schedule
    # (Megatron-LM's interleaved schedule, its --overlap-p2p-communication default; torchtitan's multi-stage
    # ones); the others block on them. False: every candidate's sends block.
    overlap_p2p: bool = True
    # Every candidate reduces its gradients beside its last backward and gathers its sharded parameters beside the
    # next step's first forward (Megatron-LM's --overlap-grad-reduce and --overlap-param-gather, what tuned
    # recipes set); False: both after the passes. Only where the framework has those switches (Megatron's).
    overlap_dp_sync: bool = True
    # Expert-parallel degrees to consider (MoE models); None: every one that divides dp·cp and the experts.
    expert_parallel: tuple[int, ...] | None = None
    # FP8 candidates with a distributed optimizer keep their linears' weights in FP8 alone (Layout.fp8_params,
    # Megatron-LM's --fp8-param-gather; not searched); OFF: a BF16 weight and an FP8 copy.
    fp8_params: Fp8Params = Fp8Params.OFF
    # FP8 candidates under FSDP (ZeRO-3) with torchao's linears gather their weights in FP8 (Layout.fp8_all_gather,
    # torchao's enable_fsdp_float8_all_gather, which torchtitan leaves off and OLMo-core sets; not searched).
    fp8_all_gather: bool = False
    # How the context-parallel candidates exchange keys and values, and whose code runs their attention
    # (Layout.cp_comm, Layout.cp_kernels; not searched): the framework's.
    cp_comm: CpComm = CpComm.P2P
    cp_kernels: CpKernels = CpKernels.TRANSFORMER_ENGINE
    # Candidates of schedules that place their slices in a loop (single-chunk and interleaved) are tried a second
    # time with the ends of their split (the end ranks' whole chunks, or the end slices) chosen against the LM head's
    # rank (head_balanced_split), where the framework splits as Megatron-Core does and that is lighter; False: the
    # framework's split alone.
    balance_head: bool = True

    def __post_init__(self) -> None:
        for name in ("gpus", "global_batch", "gpus_per_node", "max_chunks", "min_cp_tokens"):
            if getattr(self, name) < 1:
                raise PipesimError(f"--{name.replace('_', '-')} {getattr(self, name)} must be ≥ 1")
        if self.memory_cap_gib is not None and not self.memory_cap_gib > 0:
            raise PipesimError(f"--memory-cap {self.memory_cap_gib} must be > 0 GiB")
        for name in (
            "schedules",
            "recompute",
            "micro_batch_sizes",
            "sequence_parallel",
            "zero",
            "precision",
            "context_parallel",
        ):
            if not getattr(self, name):
                raise PipesimError(f"--{name.replace('_', '-')} is empty; give at least one value")
        if self.expert_parallel is not None:
            if not self.expert_parallel:
                raise PipesimError("--ep is empty; give at least one value")
            if not self.model.is_moe and self.expert_parallel != (1,):
                raise PipesimError(
                    f"--ep searches expert parallelism, but model {self.model.name} is dense "
                    "(experts: 0); drop --ep or use a MoE model (pipesim models)"
                )

    def fp8_params_of(self, candidate: Candidate) -> Fp8Params:
        """:attr:`fp8_params` where the candidate can keep FP8 parameters, else OFF."""
        c = candidate
        takes = c.precision is Precision.FP8 and c.zero.gathers_after_step
        return self.fp8_params if takes else Fp8Params.OFF

    def fp8_all_gather_of(self, candidate: Candidate) -> bool:
        """:attr:`fp8_all_gather` where the candidate runs torchao's FP8 linears under FSDP (ZeRO-3)."""
        c = candidate
        return (self.fp8_all_gather and c.precision is Precision.FP8 and c.zero is ZeroStage.PARAMETERS
                and self.fp8_linears is Fp8Linears.TORCHAO)

    @property
    def host_gpus(self) -> int:
        """GPUs per host, what a launch line's --nproc-per-node counts: the node, or fewer where the chip's NVLink
        domain spans hosts (GB200 NVL72's 4-GPU trays)."""
        return min(self.gpus_per_node, self.chip.gpus_per_host)

    @property
    def cap_gib(self) -> float:
        return self.chip.memory_gib if self.memory_cap_gib is None else self.memory_cap_gib

    def sends_overlap(self, candidate: Candidate) -> bool:
        """Whether the candidate's pipeline sends overlap compute: with :attr:`overlap_p2p`, where the framework's
        engine overlaps its schedule's (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.overlaps_p2p`:
        Megatron-LM's interleaved schedule, torchtitan's multi-stage ones)."""
        c = candidate
        return self.overlap_p2p and c.pp > 1 and knobs(self.framework).overlaps_p2p(c.schedule)

    def schedule_settings(self, candidate: Candidate) -> tuple[bool, PipelineBuffers]:
        """The layout fields the training code sets by the candidate's schedule: whether its sends overlap
        (:meth:`sends_overlap`, which also decides how its blocking calls are made) and what its pipeline runtime
        keeps of the boundary tensors."""
        c = candidate
        return self.sends_overlap(c), (knobs(self.framework).pipeline_buffers(c.schedule) if c.pp > 1
                                       else PipelineBuffers.FREED)

    def layout_of(self, candidate: Candidate) -> Layout:
        """The candidate's Layout with this request's fixed choices, the training code's (not searched).

        The sends overlap where the candidate's schedule can (:meth:`sends_overlap`). DualPipe's two
        model copies are ``model_copies`` = 2 with one slice per chunk (the layout's ``chunks`` is 1). With
        ``overlap_dp_sync`` the gradient reduce runs beside the last backward, and the parameter gather beside
        the first forward where the optimizer state is sharded, in a framework with switches for them
        (Megatron's); another framework's sync runs as its code runs it
        (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.dp_sync_overlaps`: nanotron's DDP beside the last
        backward, its gather after the step; DeepSpeed's engine and torchtitan's FSDP under pipelining after).
        ``shard_group`` applies to the sharded candidates (ZeRO 1–3) over more data-parallel ranks than it.
        ``zero_collectives`` applies to the candidates it can (:meth:`ZeroCollectives.applies_to`: ZeRO-2 per
        layer or ZeRO-3 per tensor, without pipelining); every other candidate keeps the buckets. ``fp8_params``
        applies to the FP8 candidates whose optimizer state is sharded without sharding the weights (ZeRO 1–2), as
        Megatron-LM's --fp8-param-gather needs; ``fp8_all_gather`` to the FP8 candidates under FSDP (ZeRO-3) with
        torchao's linears (:meth:`fp8_all_gather_of`). What the pipeline runtime keeps of the boundary tensors is the
        framework's for the schedule (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.pipeline_buffers`:
        torchtitan's torch.distributed.pipelining buffers, nothing more elsewhere).

        The last candidate's layout is kept: the search asks for its memory bound and then its time bound, and
        the one layout object carries what the first derived from it (its stage breakdowns) to the second."""
        last = self.__dict__.get("_last_layout")
        if last is not None and last[0] is candidate:
            return last[1]
        layout = self._layout_of(candidate)
        self.__dict__["_last_layout"] = (candidate, layout)
        return layout

    def _layout_of(self, candidate: Candidate) -> Layout:
        c = candidate
        # a sharded candidate over more ranks than the group shards within groups (one that the group does not
        # divide is refused by its Layout, so the search rejects it with that reason); a smaller one over them all
        group = self.shard_group
        shard_group = group if c.zero > ZeroStage.NONE and group is not None and group < c.dp * c.cp else None
        # the hierarchical reduce runs between shard groups: one whose ranks make a single group keeps the buckets
        applies = self.zero_collectives.applies_to(c.zero, c.pp) and (
            shard_group is not None or self.zero_collectives is not ZeroCollectives.HIERARCHICAL)
        grad_reduce, param_gather = knobs(self.framework).dp_sync_overlaps(c.zero, self.overlap_dp_sync)
        copies = model_copies(c.schedule, c.chunks) if c.pp > 1 else 1
        overlap_p2p, pipeline_buffers = self.schedule_settings(c)
        return Layout(tp=c.tp, dp=c.dp, pp=c.pp, cp=c.cp, chunks=c.chunks // copies, model_copies=copies,
                      microbatches=c.microbatches, recompute=c.recompute, sequence_parallel=c.sequence_parallel,
                      zero=c.zero, precision=c.precision, fp8_params=self.fp8_params_of(c), ep=c.ep,
                      expert_tp=c.expert_tp,
                      attention=self.attention, kv_repeated=self.kv_repeated, elementwise=self.elementwise,
                      loss=self.loss,
                      z_loss=self.z_loss, loss_input_copy=self.loss_input_copy,
                      param_bytes=self.param_bytes,
                      zero_collectives=self.zero_collectives if applies else ZeroCollectives.BUCKETED,
                      shard_group=shard_group,
                      overlap_p2p=overlap_p2p, overlap_grad_reduce=grad_reduce,
                      overlap_param_gather=param_gather, grad_buckets=knobs(self.framework).grad_buckets,
                      overlap_tp_dgrad=self.overlap_tp_dgrad, column_input=self.column_input,
                      overlap_tp_local_shard=self.overlap_tp_local_shard,
                      p2p_tensor=self.p2p_tensor, grad_accumulation=self.grad_accumulation, mlp_up=self.mlp_up,
                      p2p_calls=P2pCalls.BATCHED if overlap_p2p else self.p2p_calls,
                      moe_dispatcher=self.moe_dispatcher, moe_dispatch_fp8=self.moe_dispatch_fp8,
                      pipeline_buffers=pipeline_buffers,
                      cp_comm=self.cp_comm, cp_kernels=self.cp_kernels,
                      fp8_linears=self.fp8_linears if c.precision is Precision.FP8 else Fp8Linears.TRANSFORMER_ENGINE,
                      fp8_all_gather=self.fp8_all_gather_of(c),
                      stage_layers=c.stage_layers,
                      fsdp2=knobs(self.framework).fsdp2 and c.zero >= ZeroStage.GRADIENTS,
                      stages_after_head=(self.stages_after_head(_slices(c.schedule, c.pp, c.chunks))
                                         if c.stage_layers else 0))

    def stages_after_head(self, slices: int) -> int:
        """The stages after the LM head's where the framework splits the model over ``slices`` unasked
        (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.stages_after_head`: nanotron's may leave the loss to
        stages of its own), asked once per slice count."""
        made = self.__dict__.setdefault("_after_head", {})
        if slices not in made:
            made[slices] = knobs(self.framework).stages_after_head(self.model, slices)
        return made[slices]

    def layer_split(self, slices: int) -> tuple[int, ...] | None:
        """The layers of each of ``slices`` model slices as the framework splits them unasked, or None where it
        cannot: Megatron's even split or lighter ends (:func:`~pipesim.analytic.stage_split.pipeline_split`),
        the others' own (:meth:`~pipesim.analytic.frameworks.FrameworkKnobs.split_layers`)."""
        made = self.__dict__.setdefault("_splits", {})  # asked once per shape of every candidate
        if slices not in made:
            own = knobs(self.framework)
            try:
                made[slices] = own.split_layers(self.model, slices) or pipeline_split(self.model.layers, slices)
            except PipesimError:
                made[slices] = None
        return made[slices]

    def head_balanced_split(self, slices: int, recompute: Recompute, chunks: int = 1) -> tuple[int, ...] | None:
        """The split of ``slices`` slices, ``chunks`` a rank placed in a loop, with the ends of the pipeline chosen
        against the LM head's rank (:func:`~pipesim.analytic.stage_split.head_balanced_split`, at least one layer
        a slice), costed by pipesim's own times on this chip of one layer and of the head (its FP32 loss
        included), or None: where :attr:`balance_head` is off, the framework splits by a rule of its own, the
        layers are not all alike (experts, multi-token prediction), or no such split is lighter than the default
        one."""
        made = self.__dict__.setdefault("_head_balanced_splits", {})
        key = (slices, recompute, chunks)
        if key not in made:
            made[key] = self._head_balanced(slices, recompute, chunks)
        return made[key]

    def _head_balanced(self, slices: int, recompute: Recompute, chunks: int) -> tuple[int, ...] | None:
        model = self.model
        alike = set(model.layer_kinds()) == {LayerKind.DENSE} and not model.mtp_layers
        megatron_split = knobs(self.framework).stage_split is SplitPolicy.EVEN_OR_LIGHTER_ENDS
        if not (self.balance_head and alike and megatron_split):
            return None

        def seconds(times: PassTimes) -> float:
            return times.forward + times.backward_input + times.backward_weight + times.recompute

        layer = seconds(layer_times(model, Layout(recompute=recompute), self.chip))
        head = seconds(head_times(model, Layout(), self.chip))
        return head_balanced_split(model.layers, slices, layer, head, least=1, chunks=chunks)

    @property
    def model_params(self) -> float:
        """The model's unique parameters, counted once (per-candidate readers ask for them thousands of times)."""
        made = self.__dict__.get("_model_params")
        if made is None:
            made = self.__dict__["_model_params"] = total_params(self.model)
        return made

    def model_of(self, candidate: Candidate) -> ModelSpec:
        # One ModelSpec per micro-batch size, made once (kept outside the fields): the search asks for one
        # per candidate, and building it re-validates every field.
        made = self.__dict__.setdefault("_models", {})
        model = made.get(candidate.micro_batch_size)
        if model is None:
            model = made[candidate.micro_batch_size] = candidate.shaped(self.model)
        return model


@dataclass(frozen=True)
class Candidate:
    """One configuration to evaluate; :meth:`key` orders them so every listing is deterministic."""

    tp: int
    pp: int
    dp: int
    micro_batch_size: int
    microbatches: int  # per pipeline per step
    schedule: str
    chunks: int
    recompute: Recompute
    sequence_parallel: bool
    zero: ZeroStage = ZeroStage.NONE
    precision: Precision = Precision.BF16
    cp: int = 1
    ep: int = 1
    # Layers per model slice where the split is not even (pipeline_split's lighter ends, or the framework's own
    # split: PlanRequest.layer_split); None: even.
    stage_layers: tuple[int, ...] | None = None
    # Expert tensor parallelism: None, tp (the experts split like the dense MLP); 1, MoE parallel folding
    # (Layout.expert_tp), ep then over tp·dp·cp
    expert_tp: int | None = None

    @property
    def sharding(self) -> ZeroStage:
        """The ZeRO stage as it runs: none where one data-parallel rank holds everything (dp·cp = 1)."""
        return self.zero if self.dp * self.cp > 1 else ZeroStage.NONE

    def key(self) -> tuple:
        return (
            self.tp,
            self.cp,
            self.pp,
            self.dp,
            self.micro_batch_size,
            self.schedule,
            self.chunks,
            list(Recompute).index(self.recompute),
            self.sequence_parallel,
            int(self.zero),
            list(Precision).index(self.precision),
            self.ep,
            self.stage_layers or (),
            self.tp if self.expert_tp is None else self.expert_tp,
        )

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def shaped(self, model: ModelSpec) -> ModelSpec:
        """The model at this configuration's micro-batch size (the ModelSpec carries b, the Layout does not)."""
        return model.with_shape(micro_batch=self.micro_batch_size)

    def label(self) -> str:
        """A short name for tables and figure labels, e.g. ``tp8 pp4 dp32 b1 interleaved v2 sel sp zero1``."""
        parts = (
            [f"tp{self.tp}"]
            + ([f"cp{self.cp}"] if self.cp > 1 else [])
            + [
                f"pp{self.pp}",
                f"dp{self.dp}",
                f"b{self.micro_batch_size}",
                self.schedule if self.pp > 1 else "no-pipeline",
            ]
            + ([f"ep{self.ep}"] if self.ep > 1 else [])
            + ([f"etp{self.expert_tp}"] if self.expert_tp is not None else [])
        )
        if self.chunks > 1:
            parts.append(f"v{self.chunks}")
        if self.stage_layers is not None:  # the first and last slice's layers (lighter, or the framework's)
            first, last = self.stage_layers[0], self.stage_layers[-1]
            parts.append(f"ends{first}" if first == last else f"ends{first}/{last}")
        parts.append({Recompute.NONE: "norc", Recompute.SELECTIVE: "sel", Recompute.FULL: "full",
                      Recompute.PER_OP: "perop"}[self.recompute])
        if self.sequence_parallel:
            parts.append("sp")
        if self.zero is not ZeroStage.NONE:
            parts.append(f"zero{int(self.zero)}")
        if self.precision.quantized:
            parts.append(self.precision.value)
        return " ".join(parts)

    def to_dict(self) -> dict:
        return {
            "tp": self.tp,
            "cp": self.cp,
            "pp": self.pp,
            "dp": self.dp,
            "micro_batch_size": self.micro_batch_size,
            "microbatches": self.microbatches,
            "schedule": self.schedule,
            "chunks": self.chunks,
            "recompute": self.recompute.value,
            "sequence_parallel": self.sequence_parallel,
            "zero": int(self.zero),
            "precision": self.precision.value,
            "ep": self.ep,
            "stage_layers": list(self.stage_layers) if self.stage_layers is not None else None,
            "expert_tp": self.tp if self.expert_tp is None else self.expert_tp,
        }


@lru_cache(maxsize=64)
def placement_of(schedule: str, chunks: int) -> Placement:
    """Where a schedule places its slices on the ranks, read from a small build (it does not depend on pp or
    microbatches)."""
    from pipesim.plan.evaluate import schedule_traits

    return schedule_traits(schedule, chunks).placement


def model_copies(schedule: str, chunks: int) -> int:
    """Copies of the model a schedule's placement holds (2 for DualPipe's dual placement, else 1)."""
    return 2 if placement_of(schedule, chunks) is Placement.DUAL else 1


def _slices(schedule: str, pp: int, chunks: int) -> int:
    """The model slices (stages of distinct layers) a schedule splits the layers into: pp·v, or pp for
    DualPipe, whose two chunks per rank are copies."""
    return pp * chunks // model_copies(schedule, chunks)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tensor_parallel_degrees(model: ModelSpec, gpus: int, gpus_per_node: int) -> list[int]:
    """tp within one node that divides the GPUs, the heads, the KV heads, the FFN width and the vocabulary."""
    return [
        t
        for t in divisors(min(gpus_per_node, gpus))
        if gpus % t == 0
        and all(
            n % t == 0
            for n in (
                model.heads,
                model.kv_heads,
                model.ffn_hidden,
                model.vocab,
                model.expert_ffn_hidden,
                model.shared_expert_ffn_hidden,
            )
        )
    ]


def context_parallel_degrees(request: PlanRequest) -> list[int]:
    s = request.model.seq_len
    if request.model.local_attention_layers:  # context parallelism over local attention is not modelled (check_layout)
        return [c for c in request.context_parallel if c == 1]
    return [c for c in request.context_parallel if c == 1 or (s % (2 * c) == 0 and s // c >= request.min_cp_tokens)]


def _no_cp_degree(request: PlanRequest) -> str:
    """Why no asked context-parallel degree splits these GPUs and this sequence, and what would."""
    s, asked = request.model.seq_len, ",".join(map(str, request.context_parallel))
    usable = context_parallel_degrees(request)
    if not usable and request.model.local_attention_layers:
        return (f"--cp {asked}: {request.model.name}'s attention in {request.model.local_attention_kind} under "
                "context parallelism is not modelled; add --cp 1")
    if not usable:
        return (f"--cp {asked}: with --seq-len {s} no degree leaves each cp rank --min-cp-tokens "
                f"{request.min_cp_tokens} tokens in 2·cp whole chunks; add --cp 1, lower --min-cp-tokens or "
                "raise --seq-len")
    return (f"--cp {asked} does not divide --gpus {request.gpus} with any tensor-parallel degree; add --cp 1 or "
            "choose a --cp that divides the GPUs")


def grid_layouts(request: PlanRequest) -> list[tuple[int, int, int, int]]:
    """Every (tp, cp, pp, dp) of the GPUs the model can be split into (the layers split over pp stages)."""
    model, gpus = request.model, request.gpus
    return [
        (t, c, p, gpus // (t * c * p))
        for t in tensor_parallel_degrees(model, gpus, request.gpus_per_node)
        for c in context_parallel_degrees(request)
        if (gpus // t) % c == 0
        for p in divisors(gpus // (t * c))
        if request.layer_split(p) is not None
    ]


def _chunk_options(request: PlanRequest, schedule: str, pp: int) -> list[int]:
    fixed = load_schedule(schedule).default_chunks
    options = range(2, request.max_chunks + 1) if schedule in _FREE_CHUNKS else [fixed]
    return [v for v in options if request.layer_split(_slices(schedule, pp, v)) is not None]


# Schedules whose chunks per rank are a free parameter (Megatron's virtual pipeline size, the looped BFS of
# Lamy-Poirier 2023); every other built-in fixes them (1, or 2 for the V placement).
_FREE_CHUNKS = frozenset({"interleaved", "looped-bfs"})


def check_request(request: PlanRequest) -> list[tuple[int, int, int, int]]:
    """The (tp, cp, pp, dp) splits, or a PipesimError saying why the GPUs or the batch leave none."""
    if not any(request.chip.supports(p) for p in request.precision):
        asked = ",".join(p.value for p in request.precision)
        raise PipesimError(f"--precision {asked}: chip {request.chip.name} has none of them (no fp8_peak_flops or "
                           "fp4_peak_flops); add bf16 or choose a chip that has them (pipesim chips)")
    # whole hosts: where an NVLink domain spans hosts (GB200 NVL72) a job may hold part of a domain, whose tp groups
    # still fit it (tp divides the domain's size)
    gpus, node = request.gpus, request.host_gpus
    if gpus > node and gpus % node:
        lower, upper = gpus // node * node, (gpus // node + 1) * node
        unit = (f"hosts of {node} GPUs (the chip's host_gpus)" if node < request.gpus_per_node
                else f"nodes of --gpus-per-node {node}")
        raise PipesimError(
            f"--gpus {gpus} is not a whole number of {unit}; tensor parallelism stays within a node and a partial "
            f"node cannot hold a tp group evenly: use --gpus {lower} or {upper}"
        )
    layouts = grid_layouts(request)  # tp = pp = 1 always qualifies, so only the asked cp degrees can leave none
    if not layouts:
        raise PipesimError(_no_cp_degree(request))
    batch = request.global_batch
    sizes = request.micro_batch_sizes
    if not any(batch % (dp * b) == 0 for *_, dp in layouts for b in sizes):
        dps = sorted({dp for *_, dp in layouts})
        step = min(dps) * min(sizes)
        near = sorted({max(step, batch // step * step), (batch // step + 1) * step})
        raise PipesimError(
            f"--global-batch {batch} is not divisible by dp × micro-batch size for any split of "
            f"{gpus} GPUs (dp ∈ {dps}, micro-batch sizes {list(sizes)}): use --global-batch "
            + " or ".join(map(str, near))
        )
    for name in request.schedules:
        load_schedule(name)  # an unknown schedule is an error up front
    return layouts


def enumerate_candidates(request: PlanRequest) -> Iterator[Candidate]:
    """Every meaningful configuration, in a fixed order (see the module docstring for the rules)."""
    chip_precisions = [p for p in request.precision if request.chip.supports(p)]
    for tp, cp, pp, dp in check_request(request):
        for b in request.micro_batch_sizes:
            if request.global_batch % (dp * b):
                continue
            m = request.global_batch // (dp * b)
            if pp == 1:
                shapes = [(NO_PIPELINE_SCHEDULE, 1)]
            else:
                shapes = [(s, v) for s in request.schedules for v in _chunk_options(request, s, pp)]
            for schedule, chunks in shapes:
                # _chunk_options kept only the shapes whose layers split: the candidate carries an uneven split
                slices = _slices(schedule, pp, chunks)
                split = request.layer_split(slices) if pp > 1 else None
                uneven = split if split is not None and len(set(split)) > 1 else None
                for recompute in request.recompute:
                    splits = [uneven]
                    # slices placed in a loop: the head's slice is the last rank's last, as Megatron's flags count
                    if pp > 1 and placement_of(schedule, chunks) is Placement.LOOP:
                        balanced = request.head_balanced_split(slices, recompute, chunks)
                        splits += [balanced] if balanced is not None else []
                    # Sequence parallelism shards along tp and ZeRO along dp·cp: at degree 1 both are off.
                    for sp in sorted({sp and tp > 1 for sp in request.sequence_parallel}):
                        for zero in _zero_options(request.zero, dp * cp, pp):
                            for precision in chip_precisions:
                                for layers in splits:
                                    yield from _candidates_of(request, (tp, pp, dp, b, m, schedule, chunks,
                                                                        recompute, sp, zero, precision, cp), layers)


def _candidates_of(request: PlanRequest, shape: tuple, stage_layers: tuple[int, ...] | None) -> Iterator[Candidate]:
    """The candidates of one shape (tp, pp, dp, micro-batch, microbatches, schedule, chunks, recomputation, sp,
    ZeRO, precision, cp) and split: one per expert-parallel degree, and MoE parallel folding's where sp is on."""
    tp, pp, dp, b, m, schedule, chunks, recompute, sp, zero, precision, cp = shape
    for ep in expert_parallel_degrees(request, dp * cp):
        yield Candidate(tp, pp, dp, b, m, schedule, chunks, recompute, sp, zero, precision, cp, ep, stage_layers)
    if sp:  # MoE parallel folding: each tp rank routes its own tokens to whole experts
        for ep in expert_parallel_degrees(request, dp * cp, folded_tp=tp):
            yield Candidate(tp, pp, dp, b, m, schedule, chunks, recompute, sp, zero, precision, cp, ep, stage_layers,
                            expert_tp=1)


def expert_parallel_degrees(request: PlanRequest, replicas: int, folded_tp: int | None = None) -> list[int]:
    """The ep degrees of a MoE model that divide dp·cp (``replicas``) and its experts; [1] for a dense model. With
    ``folded_tp`` (MoE parallel folding at that tp), those above 1 that divide tp·dp·cp and its experts; none for a
    dense model or at tp 1."""
    model = request.model
    if folded_tp is not None:
        if not model.is_moe or folded_tp == 1:
            return []
        ranks = folded_tp * replicas
        asked = request.expert_parallel or divisors(ranks)
        return [e for e in sorted(set(asked)) if e > 1 and ranks % e == 0 and model.experts % e == 0]
    if not model.is_moe:
        return [1]
    asked = request.expert_parallel or divisors(replicas)
    return [e for e in sorted(set(asked)) if replicas % e == 0 and model.experts % e == 0]


def _zero_options(asked: tuple[ZeroStage, ...], replicas: int, pp: int) -> list[ZeroStage]:
    """The ZeRO stages that exist here: none without replicas; no ZeRO-2 with a pipeline (module docstring)."""
    if replicas == 1:
        return [ZeroStage.NONE]
    return sorted({z for z in asked if not (z is ZeroStage.GRADIENTS and pp > 1)})
