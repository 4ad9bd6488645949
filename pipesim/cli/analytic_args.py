"""The ``--model … --hardware …`` flags of ``simulate`` and ``synthesize``, and turning them into the library's
:class:`~pipesim.api.model_options.ModelOptions`. The model logic itself is :mod:`pipesim.api.model_setup`.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from pipesim.analytic.frameworks import Framework
from pipesim.analytic.layout import (
    DEFAULT_RECOMPUTE_MODULES,
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpComm,
    CpKernels,
    ElementwiseKernels,
    Fp8Linears,
    Fp8Params,
    Fp8Recipe,
    GradAccumulation,
    GradBuckets,
    LossKernel,
    MlpUp,
    MoeDispatcher,
    P2pCalls,
    PipelineBuffers,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.api.defaults import DEFAULT_HARDWARE, DEFAULT_PARAM_BYTES, DEFAULT_STEPS
from pipesim.api.model_options import ModelOptions
from pipesim.cli.arg_types import (
    fraction,
    layer_list,
    non_negative_int,
    param_bytes,
    positive_float,
    positive_int,
    speed_spread,
)
from pipesim.cli.megatron_args import (
    MEGATRON_ALIASES,
    add_megatron_args,
    check_unmodelled,
    loss_of,
    moe_dispatcher_of,
    moe_imbalance_of,
    precision_bytes_of,
    recompute_layers_of,
    sharding_of,
)
from pipesim.errors import PipesimError
from pipesim.sim.simulator import StepBoundary

# simulate's and plan's --gpu-speed-spread
GPU_SPEED_SPREAD_HELP = ("the relative spread of the GPUs' speeds, of which a synchronous step waits for the slowest: "
                         "its compute takes 1 + σ·E[max of n normals] times one GPU's (default: the chip's, 0.02 for "
                         "the presets, fitted to published runs; 0: every GPU alike)")
# simulate's and plan's --inter-node-gbps
INTER_NODE_GBPS_HELP = ("each GPU's share of its node's network in Gb/s, the node's NICs together over its GPUs, where "
                        "the cluster's is not the chip preset's (DGX A100: 200, DGX H100: 400; four 100 Gb/s NICs for "
                        "eight GPUs: 50); default: the chip's")
COLUMN_INPUT_HELP = (
    "under --sequence-parallel, where the column-parallel linears' weight gradients get their all-gathered input: "
    "regather (default: gathered again in the backward beside the input-gradient GEMM, as Megatron-LM and "
    "Transformer Engine do), regather-blocking (gathered again and waited for: nanotron's tp_recompute_allgather) "
    "or saved (the forward's gathered input kept, tp times the bytes: PyTorch DTensor's TP, torchtitan)")

P2P_TENSOR_HELP = (
    "without --sequence-parallel, what each tp rank sends across a pipeline boundary: whole (the whole activation, as "
    "Megatron-Core, nanotron and Aleph Alpha's scaling do; megatron's default) or split (1/tp of it, all-gathered on "
    "the receiving node: Megatron-LM 2021-2022's scatter/gather, DeepSpeed's pipeline engine)")

P2P_CALLS_HELP = (
    "blocking pipeline sends: batched (a pass's send and the receive it pairs with in one call, both directions at "
    "once, as Megatron-LM batches them; megatron's default) or sequential (one blocking call after the other, as "
    "DeepSpeed's pipeline engine and Aleph Alpha's scaling run them: a pass waits out both transfers)")

PIPELINE_BUFFERS_HELP = (
    "what the pipeline runtime keeps of the tensors crossing stage boundaries, beyond the activations: freed "
    "(nothing: Megatron's, nanotron's and DeepSpeed's engines), torch (torch.distributed.pipelining's 1F1B and "
    "GPipe: a receive buffer per microbatch, each output kept until its backward) or torch-runtime (its multi-stage "
    "runtime: those, and every tensor it sent held until the step ends); default: the framework's for the "
    "schedule (torchtitan's)")
PIPELINE_OUTPUTS_KEPT_HELP = (
    "with torch's buffers, the last stage keeps every microbatch's output (the logits) until the step ends, for "
    "step() to return: PyTorch's schedules before return_outputs=False, torchtitan before October 2025")

MLP_UP_HELP = (
    "a gated MLP's gate and up projections: fused (one GEMM of twice the width, Megatron-Core's and nanotron's; "
    "megatron's default) or split (two linears, as Aleph Alpha's scaling, torchtitan and Hugging Face's Llama build "
    "them: two GEMMs, and without --sequence-parallel each column-parallel linear all-reduces its own input "
    "gradient, one collective more a layer)")


#: ``--fp8-params [both|rowwise]`` (simulate and plan): the bare flag means "both", Transformer Engine 2.x's.
FP8_PARAMS_CHOICES = [f.value for f in Fp8Params]
FP8_PARAMS_BARE = Fp8Params.BOTH.value


def at_least_two(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text} must be ≥ 2 (a steady state needs two steps)")
    return value


def cp_comm_type(text: str) -> str:
    """``--cp-comm-type allgather``: one of :class:`CpComm`'s names (which take Transformer Engine's
    ``all_gather`` too), as its canonical value."""
    try:
        return CpComm(text).value
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(c.value for c in CpComm)}") from None


def imbalance(text: str) -> float:
    """``--moe-imbalance 1.3``: a finite number ≥ 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (the most-loaded rank's tokens over the mean, "
                                         "e.g. 1.2)") from None
    if not (1.0 <= value < 1e6):
        raise argparse.ArgumentTypeError(f"{text} must be ≥ 1 (1: perfectly balanced routing)")
    return value


def add_loss_detail_args(group) -> None:
    """What the loss does beyond its kernel: a z-loss, a copy of its input (simulate's and plan's flags)."""
    group.add_argument("--z-loss", action="store_true", default=None,
                       help="the z-loss (coefficient · log²Z a token) on the same logits: eager torch.logsumexp "
                       "beside --loss pytorch or gathered, nanotron's own, free inside fused and compiled; "
                       "megatron's loss has none")
    group.add_argument("--loss-input-copy", action="store_true", default=None,
                       help="the logits copied before the loss, in the dtype it takes (logits[..., :-1, :]"
                       ".contiguous(): OLMo-core's trainer, Hugging Face's causal-LM loss before transformers 4.46)")


def add_model_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "real model on real chips (costs in seconds, memory in GiB)",
        "Megatron-LM's names are accepted for the same options: " + ", ".join(
            f"{alias} ({name})" for alias, name in MEGATRON_ALIASES.items()))
    group.add_argument("--model", metavar="NAME|FILE", help="model preset (pipesim models) or .yaml/.json file")
    group.add_argument("--hardware", metavar="NAME|FILE", default=None,
                       help=f"chip preset (pipesim chips) or .yaml/.json file (default {DEFAULT_HARDWARE})")
    group.add_argument("--tp", type=positive_int, default=None,
                       help="tensor-parallel degree (default 1)")
    group.add_argument("--dp", type=positive_int, default=None, help="data-parallel degree (default 1)")
    group.add_argument("--gpus", type=positive_int, default=None, metavar="N",
                       help="the run's GPUs, as a recipe states them: --dp becomes N / (tp·cp·pp)")
    group.add_argument("--recompute", choices=[r.value for r in Recompute], default=None,
                       help="activation recomputation (default none): selective (the attention core, Korthikanti "
                       "et al.), full (each layer from its input) or per-op (torchtitan's selective checkpointing: "
                       "keeps attention and every other matmul output)")
    group.add_argument("--recompute-layers", type=positive_int, default=None, metavar="N",
                       help="with --recompute full: only the first N layers of each model chunk are recomputed, the "
                       "others keep their activations (Megatron's --recompute-method block --recompute-num-layers N; "
                       "default: every layer)")
    group.add_argument("--recompute-modules", nargs="+", default=None, metavar="MODULE",
                       help="with --recompute selective (Megatron-Core's --recompute-modules): what it re-runs, "
                       "core_attn (the default: the attention core), layernorm (the two norms, their outputs not "
                       "kept), moe_act (the routed experts' activation, its output not kept), mla_up_proj (latent "
                       "attention's up projections and RoPE, the attention's inputs not kept), mlp (a dense layer's "
                       "MLP), moe (a MoE layer's router, dispatch, experts and combine), shared_experts (its shared "
                       "experts): the last three keep their input and re-run their forward, collectives included")
    group.add_argument("--moe-layer-recompute", action="store_true", default=None,
                       help="Megatron-Core's older spelling of --recompute selective with the moe module added")
    group.add_argument("--distribute-saved-activations", "--distribute-checkpointed-activations",
                       "--partition-activations", action="store_true", default=None,
                       help="with --recompute full and tp > 1 without --sequence-parallel: each layer's stored input "
                       "split over the tp ranks and all-gathered before its recomputed forward (Megatron-LM's flag; "
                       "its older name is metaseq's, --partition-activations DeepSpeed's checkpointing's, as "
                       "Megatron-DeepSpeed and GPT-NeoX spell it)")
    group.add_argument("--sequence-parallel", action="store_true", default=None,
                       help="shard norms/dropout along the sequence (Korthikanti et al. 2023)")
    group.add_argument("--distributed-optimizer", "--use-distributed-optimizer", action="store_true", default=None,
                       help="shard optimizer state over dp (ZeRO-1); reduce-scatter + all-gather (Megatron's "
                       "--use-distributed-optimizer)")
    group.add_argument("--attention", choices=[a.value for a in AttentionKernel], default=None,
                       help="fused (FlashAttention-2 or cuDNN: no s² scores stored, default), triton (FlashAttention "
                       "in Triton, llm-foundry's attn_impl: triton: fused, 1.8× slower), flash1 (FlashAttention v1, "
                       "flash-attn 1.x: fused, 1.4-2.5× slower by shape and chip, measured) or unfused (5as²b stored)")
    group.add_argument("--repeat-kv", action=argparse.BooleanOptionalAction, default=None,
                       help="grouped-query attention's keys and values copied out to every query head before the "
                       "attention call, which saves them and, under --cp, exchanges them at that width "
                       "(torchtitan's Llama until January 2026, Hugging Face transformers' eager and SDPA paths; "
                       "default: where the framework's attention path does, Megatron-Core's unfused one)")
    group.add_argument("--framework", choices=[f.value for f in Framework], default=None,
                       help="the training code, whose defaults set the flags its code decides (--elementwise, --loss, "
                       "--grad-accumulation, --overlap-tp-dgrad, --column-input, --p2p-tensor, --p2p-calls, "
                       "--pipeline-buffers, --mlp-up, --overlap-grad-reduce, --overlap-param-gather, --grad-buckets, "
                       "--distributed-optimizer), what --recompute selective keeps and how --zero 2 communicates "
                       "(each flag given wins): megatron (Megatron-LM/Core with Transformer Engine, from its command "
                       "line; default), nemo (NeMo's and Megatron-Bridge's recipes: Megatron-Core with the "
                       "distributed optimizer, its sync overlapped, the fused cross-entropy), torchtitan, nanotron "
                       "or megatron-deepspeed (also GPT-NeoX); 'pipesim frameworks' lists what each sets")
    group.add_argument("--elementwise", choices=[e.value for e in ElementwiseKernels], default=None,
                       help="fused (Megatron-LM / Transformer Engine kernels or torch.compile, default) or eager "
                       "(one PyTorch kernel per op: norms, RoPE and activations as reference Llama code runs "
                       "them without torch.compile) or eager-fused-norm (eager ops around a fused norm kernel, "
                       "e.g. flash-attn's rms_norm) or eager-activation (fused norms and RoPE, the gated MLP's "
                       "act(gate) * up as two PyTorch ops, the attention's inputs and output moved between "
                       "layouts by copies: nanotron's)")
    group.add_argument("--loss", choices=[k.value for k in LossKernel], default=None,
                       help="the cross-entropy's implementation: megatron (vocabulary-parallel, softmax in place; "
                       "default), pytorch (F.cross_entropy on FP32 logits, torchtitan's: more bytes moved, a "
                       "12-byte-per-logit peak on the last stage), gathered (the logits all-gathered over tp, "
                       "then pytorch's loss over the whole vocabulary on every tp rank), nanotron (megatron's, the "
                       "max subtracted out of place: a 10-byte-per-logit peak), fused (one fused kernel a pass on "
                       "the FP32 logits: flash-attn's Triton cross-entropy, OLMo-core's fused_loss) or compiled "
                       "(pytorch's under torch.compile, the FP32 cast inside: OLMo-core's compile_loss, "
                       "torchtitan's compiled loss), megatron-fused (Megatron-Core's --cross-entropy-loss-fusion: "
                       "its ops in compiled pieces) or te (Transformer Engine's Triton kernel, --cross-entropy-"
                       "fusion-impl te: the gradient written into the BF16 logits in the forward)")
    add_loss_detail_args(group)
    group.add_argument("--grad-accumulation", choices=[g.value for g in GradAccumulation], default=None,
                       help="how microbatches' weight gradients are summed: fused (Megatron-LM's "
                       "gradient_accumulation_fusion, free; default) or autograd (PyTorch's .grad += after every "
                       "microbatch but the first: a memory-bound pass over the gradients; the executor, plain DDP)")
    group.add_argument("--overlap-grad-reduce", action=argparse.BooleanOptionalAction, default=None,
                       help="the data-parallel gradient reduce runs in buckets during each stage's last backward "
                       "(Megatron's --overlap-grad-reduce, NeMo's overlap_grad_sync); --no-overlap-grad-reduce: "
                       "after it; default: as the framework runs it (after it, but under nanotron's DDP and "
                       "NeMo's recipes)")
    group.add_argument("--overlap-param-gather", action=argparse.BooleanOptionalAction, default=None,
                       help="the distributed optimizer's parameter all-gather runs during the next step's first "
                       "forward (Megatron's --overlap-param-gather, NeMo's overlap_param_sync); needs "
                       "--distributed-optimizer or --zero N; --no-overlap-param-gather: after the optimizer step; "
                       "default: as the framework runs it (after it, but under NeMo's recipes)")
    group.add_argument("--grad-buckets", choices=[b.value for b in GradBuckets], default=None,
                       help="how an overlapped gradient reduce buckets a stage's gradients, whose last-filled "
                       "bucket (the first layers and the embedding) is reduced after the backward and gathered "
                       "first, before the next forward: megatron (Megatron-Core's DDP: max(40M, 1M·dp) "
                       "parameters a bucket on the first stage, one bucket on the others), torch-ddp (PyTorch "
                       "DDP's 25 MiB buckets on every stage; nanotron's) or per-module (each module its own unit, "
                       "the embedding last; torchtitan's replicate); default: the framework's")
    group.add_argument("--halve-causal-attention", action="store_true", default=None,
                       help="count half of QKᵀ and ·V FLOPs (causal kernels skip them); default counts all")
    group.add_argument("--achievable-fraction", type=fraction, default=None,
                       help="one fraction of peak FLOP/s for every kernel, replacing the chip's per-kernel "
                       "efficiencies (default: unset, the per-kernel model)")
    group.add_argument("--gpu-speed-spread", type=speed_spread, default=None, metavar="SIGMA",
                       help=GPU_SPEED_SPREAD_HELP)
    group.add_argument("--inter-node-gbps", type=positive_float, default=None, metavar="GBPS",
                       help=INTER_NODE_GBPS_HELP)
    group.add_argument("--seq-len", type=positive_int, default=None,
                       help="override the model's sequence length")
    group.add_argument("--micro-batch-size", type=positive_int, default=None,
                       help="sequences per microbatch (default: the model's, 1 for presets)")
    group.add_argument("--param-bytes", type=param_bytes, default=None, metavar="18|16|W+G+O",
                       help="bytes per parameter for weights+grads+Adam: 18 (Megatron, FP32 grads), 16 (ZeRO paper, "
                       "16-bit grads) or W+G+O, each part's (2+4+6: a precision-aware optimizer's 16-bit master "
                       f"remainder and BF16 moments); default {DEFAULT_PARAM_BYTES}")
    group.add_argument("--first-stage-layers", type=non_negative_int, default=None, metavar="N",
                       help="layers on stage 0 (it also holds the embedding); the rest split evenly")
    group.add_argument("--last-stage-layers", type=non_negative_int, default=None, metavar="N",
                       help="layers on the last stage (it also holds the LM head and loss)")
    group.add_argument("--stage-layers", type=layer_list, default=None, metavar="N,N,...",
                       help="layers on every stage, stage 0 first (pp·v counts summing to the model's layers)")
    group.add_argument("--stages-after-head", type=non_negative_int, default=None, metavar="N",
                       help="stages after the LM head's holding only the logits' FP32 cast and the loss (1: both "
                       "on the last; 2: the cast on the one before), the logits crossing the boundaries between, "
                       "as nanotron's cost balance places them; needs --stage-layers ending in N zeros. Default: "
                       "the framework's split unasked (--framework nanotron's may), else 0")
    group.add_argument("--decoder-first-pipeline-num-layers", type=positive_int, default=None, metavar="N",
                       help="Megatron-LM's: layers on pipeline rank 0 over all its chunks (a multiple of them), the "
                       "other ranks splitting the rest evenly")
    group.add_argument("--decoder-last-pipeline-num-layers", type=positive_int, default=None, metavar="N",
                       help="Megatron-LM's: layers on the last pipeline rank over all its chunks")
    group.add_argument("--account-for-embedding-in-pipeline-split", action="store_true", default=None,
                       help="Megatron-LM's: the embedding counts as a layer, so the first model chunk holds one fewer")
    group.add_argument("--account-for-loss-in-pipeline-split", action="store_true", default=None,
                       help="Megatron-LM's: the loss counts as a layer, so the last model chunk holds one fewer")
    group.add_argument("--num-layers-per-virtual-pipeline-stage", type=positive_int, default=None, metavar="N",
                       help="Megatron-LM's: layers per model chunk, which sets --chunks to each rank's layers / N "
                       "(and the schedule to interleaved when none is named)")
    group.add_argument("--pipeline-model-parallel-layout", default=None, metavar="LAYOUT",
                       help="Megatron-Core's layout string, e.g. 'Et*3|(tt|)*29,m|L': the pp·v stages split by |, "
                       "E the embedding, t a decoder layer, m a multi-token-prediction layer, L the loss; sets the "
                       "layers per stage, the MTP modules' stage and --chunks")
    group.add_argument("--zero", type=int, choices=[z.value for z in ZeroStage], default=None,
                       help="ZeRO stage over the dp·cp ranks: 0 nothing sharded (default), 1 optimizer state "
                       "(= --distributed-optimizer), "
                       "2 + gradients, 3 + weights (FSDP); with dp·cp = 1 nothing is sharded (a note says so)")
    group.add_argument("--zero-collectives", choices=[z.value for z in ZeroCollectives], default=None,
                       help="how --zero 2 communicates: bucketed (DeepSpeed: gradients reduce-scattered in "
                       "buckets after the backward, weights gathered after the step; default) or per-layer "
                       "(PyTorch FSDP's SHARD_GRAD_OP: each layer gathers its weights before its forward and "
                       "reduce-scatters its gradients after its backward, every microbatch); with --zero 3, "
                       "per-tensor (DeepSpeed's 2021 ZeRO-3: a collective per parameter tensor, each costing the "
                       "host an operation per rank); both need --pp 1; with --zero 1, all-reduce-fp32 (Aleph "
                       "Alpha's scaling: whole gradients all-reduced in FP32, then the weights gathered) or, with "
                       "--shard-group, hierarchical (Megatron-LM's optimizer instances: reduce-scattered within the "
                       "group, the shard all-reduced across the groups)")
    group.add_argument("--shard-group", "--optimizer-shard-group", dest="shard_group", type=positive_int,
                       default=None, metavar="N",
                       help="hybrid sharding, with --zero 1, 2 or 3: the ZeRO state sharded over groups of N "
                       "consecutive data-parallel ranks, the groups replicas (8 keeps a node's shards in the "
                       "node). ZeRO-1: gradients all-reduced over every data-parallel rank, each group's updated "
                       "weights gathered within it (InternEvo's zero1=N; --zero-collectives hierarchical reduces "
                       "as ZeRO-2/3 do); ZeRO-2/3: gathers and reduce-scatters "
                       "within the group, each reduced shard all-reduced across the replicas (PyTorch FSDP's "
                       "HYBRID_SHARD, torchtitan's HSDP: --data-parallel-shard-degree N); default: over all dp·cp")
    group.add_argument("--outer-optimizer-sharding", action="store_true", default=None,
                       help="with --zero 3 --shard-group N and no pipelining: the optimizer state sharded across "
                       "the groups too, over every dp·cp rank, each reduced shard reduce-scattered across the "
                       "replicas and the updated weights gathered across them after the step (Megatron-FSDP's "
                       "hybrid FSDP: --outer-dp-sharding-strategy optim)")
    group.add_argument("--cp", type=positive_int, default=None,
                       help="context-parallel degree: sequence split over cp ranks, ring attention (default 1)")
    group.add_argument("--cp-comm-ctas", type=positive_int, default=None, metavar="N",
                       help="with --cp: the CTAs (NCCL channels) the context-parallel group's ring sends may use, "
                       "as a Megatron-Core communicator config sets them (--nccl-communicator-config-path, the "
                       "cp group's max_ctas: 1 in NVIDIA's MLPerf recipes); default: NCCL's own choice")
    group.add_argument("--cp-comm-type", type=cp_comm_type, default=None, metavar="{p2p,allgather,a2a,a2a+p2p}",
                       help="with --cp: how the context-parallel ranks exchange keys and values (Megatron-LM's "
                       "--cp-comm-type): p2p, a ring beside the attention's steps; allgather, the whole K and V "
                       "gathered before the attention; a2a, Ulysses' all-to-alls (heads split over the cp ranks); "
                       "a2a+p2p, all-to-alls inside groups of adjacent cp ranks and a ring between the groups "
                       "(with --hierarchical-context-parallel-sizes). Default: the framework's (Megatron's p2p, "
                       "torchtitan's allgather)")
    group.add_argument("--hierarchical-context-parallel-sizes", type=positive_int, nargs=2, default=None,
                       metavar=("A2A", "P2P"),
                       help="with --cp-comm-type a2a+p2p: the all-to-all groups' size (adjacent cp ranks) and the "
                       "ring's length between them, A2A·P2P = --cp (Megatron-LM's flag)")
    group.add_argument("--cp-kernels", choices=[k.value for k in CpKernels], default=None,
                       help="with --cp: the code that runs context-parallel attention: transformer-engine "
                       "(Megatron-Core's) or pytorch (PyTorch's context_parallel, torchtitan's: an SDPA call a "
                       "step, merged in FP32 by eager ops). Default: the framework's")
    group.add_argument("--fp8", action="store_true", default=None,
                       help="FP8 GEMMs at the chip's FP8 peak, plus an FP8 copy of the FP8 linears' weights")
    group.add_argument("--fp4", action="store_true", default=None,
                       help="NVFP4 GEMMs (Transformer Engine's NVFP4BlockScaling, Megatron's --fp4-format e2m1) at "
                       "the chip's FP4 peak (b200, gb200), plus the linears' weights in NVFP4 row- and column-wise; "
                       "attention, the output layer and the optimizer stay in higher precision")
    group.add_argument("--fp8-params", nargs="?", const=FP8_PARAMS_BARE, default=None,
                       choices=FP8_PARAMS_CHOICES,
                       help="with --fp8 and --distributed-optimizer: the FP8 linears' weights kept in FP8 alone, no "
                       "BF16 copy (Megatron-LM's --fp8-param-gather, NeMo's fp8_params): both (default: the data "
                       "and its transpose, as Transformer Engine 2.x keeps them, 2 bytes a parameter), rowwise "
                       "(the data alone, 1 byte) or off (a BF16 weight and an FP8 copy; the default but under "
                       "--framework nemo, whose FP8 recipes set fp8_param_gather)")
    group.add_argument("--fp8-recipe", default=None, choices=[r.value for r in Fp8Recipe],
                       help="with --fp8: how the casts are scaled (Megatron-LM's --fp8-recipe): delayed (default; "
                       "scales from earlier steps' amax) or tensorwise (per-tensor current scaling: each cast "
                       "first reads its tensor for the amax)")
    group.add_argument("--fp8-linears", default=None, choices=[f.value for f in Fp8Linears],
                       help="with --fp8: whose FP8 linears, by what they keep between the passes: transformer-engine "
                       "(Megatron, NeMo: an FP8 weight copy through the step, inputs saved in FP8) or torchao "
                       "(torchtitan's Float8Linear: BF16 input and weight saved and cast again at each GEMM, no copy "
                       "kept); default: the framework's")
    group.add_argument("--fp8-all-gather", action="store_true", default=None,
                       help="with --fp8-linears torchao under FSDP (--zero 3): the weights all-gathered in FP8, each "
                       "rank casting its shard first, no GEMM casting a weight (torchao's "
                       "enable_fsdp_float8_all_gather; OLMo-core sets it)")
    group.add_argument("--fsdp2", action=argparse.BooleanOptionalAction, default=None,
                       help="with --zero 3 (or 2): the FSDP is PyTorch's fully_shard (FSDP2: torchtitan, OLMo-core), "
                       "each per-layer gather copied out into the parameters on the compute stream; --no-fsdp2: "
                       "FSDP1's flat parameters (MosaicML, IBM). Default: the framework's (torchtitan's FSDP2)")
    group.add_argument("--async-tp", "--tp-comm-overlap", action="store_true", default=None,
                       help="overlap tensor-parallel collectives with the GEMMs they feed (Megatron's "
                       "--tp-comm-overlap, NeMo's tp_comm_overlap, torchtitan's enable_async_tensor_parallel)")
    group.add_argument("--overlap-tp-dgrad", action=argparse.BooleanOptionalAction, default=None,
                       help="in the backward, each column-parallel linear's input-gradient collective runs beside "
                       "its weight-gradient GEMM (default: on, as Megatron-LM since 2021 and Transformer Engine "
                       "do); --no-overlap-tp-dgrad: every TP collective waits (older Megatron-LM and its forks, "
                       "PyTorch DTensor's TP)")
    group.add_argument("--overlap-tp-local-shard", action="store_true", default=None,
                       help="under --sequence-parallel, each TP all-gather runs beside the GEMM of the rank's own "
                       "shard (1/tp of the linear's), the rest waited for: nanotron's tp_linear_async_communication")
    group.add_argument("--column-input", choices=[c.value for c in ColumnInput], default=None,
                       help=COLUMN_INPUT_HELP)
    group.add_argument("--overlap-p2p", "--overlap-p2p-communication", action=argparse.BooleanOptionalAction,
                       default=None,
                       help="pipeline sends overlap compute, each receive waited for where its data is read "
                       "(Megatron's --overlap-p2p-communication); --no-overlap-p2p: blocking sends, the sender "
                       "waits for its transfer. Default: the framework's way for the schedule (Megatron-LM "
                       "overlaps its interleaved schedule's sends, torchtitan its multi-stage schedules'; other "
                       "orders block)")
    group.add_argument("--p2p-tensor", choices=[b.value for b in BoundaryTensor], default=None,
                       help=P2P_TENSOR_HELP)
    group.add_argument("--p2p-calls", choices=[c.value for c in P2pCalls], default=None, help=P2P_CALLS_HELP)
    group.add_argument("--pipeline-buffers", choices=[b.value for b in PipelineBuffers], default=None,
                       help=PIPELINE_BUFFERS_HELP)
    group.add_argument("--pipeline-outputs-kept", action="store_true", default=None,
                       help=PIPELINE_OUTPUTS_KEPT_HELP)
    group.add_argument("--mlp-up", choices=[m.value for m in MlpUp], default=None, help=MLP_UP_HELP)
    group.add_argument("--tp-pp-dp-mapping", action="store_true", default=None,
                       help="number ranks tp, cp, pp, dp (Megatron-Core's --use-tp-pp-dp-mapping): pipeline "
                       "neighbours tp·cp ranks apart, so a model replica shares a node or an NVL72 rack and data "
                       "parallelism crosses nodes; default: Megatron's tp, cp, dp, pp")
    group.add_argument("--ep", type=positive_int, default=None,
                       help="expert-parallel degree for mixture-of-experts models: routed experts sharded over ep "
                       "ranks carved out of dp·cp (ep divides dp·cp and the experts; tp·dp·cp under --expert-tp 1; "
                       "default 1)")
    group.add_argument("--expert-tp", type=positive_int, default=None, metavar="N",
                       help="expert tensor-parallel degree (Megatron's --expert-tensor-parallel-size): --tp (the "
                       "default, experts split like the dense MLP) or 1, MoE parallel folding: each rank routes its "
                       "own 1/tp of the sequence to whole experts (needs --sequence-parallel; ep divides tp·dp·cp)")
    group.add_argument("--moe-imbalance", type=imbalance, default=None, metavar="X",
                       help="most-loaded expert-parallel rank's routed tokens over the mean (≥ 1; default 1: "
                       "balanced); scales expert compute, all-to-all and routed activations")
    group.add_argument("--moe-dispatcher", choices=[d.value for d in MoeDispatcher], default=None,
                       help="how tokens reach their experts: alltoall (one NCCL all-to-all each way, a copy per "
                       "routed expert; default) or deepep (DeepEP: one copy per destination node across the "
                       "network, forwarded over NVLink; Megatron's --moe-token-dispatcher-type flex)")
    group.add_argument("--moe-shared-expert-overlap", action="store_true", default=None,
                       help="the shared experts run beside the dispatch and combine, hiding that much of them "
                       "(Megatron-Core's flag)")
    group.add_argument("--moe-dispatch-fp8", action="store_true", default=None,
                       help="with --moe-dispatcher deepep: dispatch in FP8 with a scale per 128 elements, combine in "
                       "BF16 (DeepSeek-V3's training)")
    group.add_argument("--step-boundary", choices=[b.value for b in StepBoundary], default=None,
                       help="what separates training steps: sync (global all-reduce before the optimizer) or "
                       "post-validation (zero-bubble's optimizer bypass); default: post-validation for "
                       "split-backward schedules (zb-*), sync for the others")
    add_megatron_args(group)
    group.add_argument("--steps", type=at_least_two, default=None,
                       help="steps simulated back to back for the post-validation steady state (default "
                       f"{DEFAULT_STEPS})")


def model_options_from_args(args: argparse.Namespace) -> ModelOptions:
    """The model-only flags as the library's options (None where a flag was not given); Megatron-LM's
    ``--recompute-method``/``--recompute-num-layers`` folded into ``recompute_layers``, its
    ``--cross-entropy-loss-fusion``/``--cross-entropy-fusion-impl`` into ``loss``, its expert capacity
    (``--moe-expert-capacity-factor``, ``--moe-pad-expert-input-to-capacity``) into ``moe_imbalance``."""
    values = {f.name: getattr(args, f.name, None) for f in fields(ModelOptions)}
    values["recompute_layers"] = recompute_layers_of(args)
    values["loss"] = loss_of(args)
    values["moe_imbalance"] = moe_imbalance_of(args)
    values["moe_dispatcher"] = moe_dispatcher_of(args)
    check_unmodelled(args)
    values["param_bytes"] = precision_bytes_of(args)
    values |= sharding_of(args)  # Megatron-LM's FSDP flags as the ZeRO stage they run
    if getattr(args, "moe_layer_recompute", None):  # Megatron-Core: selective, with "moe" among the modules
        if values["recompute"] not in (None, "selective"):
            raise PipesimError(f"--moe-layer-recompute is a selective recomputation, but --recompute "
                               f"{values['recompute']} is given; keep one (as Megatron-Core refuses it with full)")
        values["recompute"] = "selective"
        named = list(values["recompute_modules"] or [m.value for m in DEFAULT_RECOMPUTE_MODULES])
        values["recompute_modules"] = tuple(dict.fromkeys([*named, "moe"]))
    return ModelOptions(**values)
