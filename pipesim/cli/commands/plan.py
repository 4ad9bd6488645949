"""``pipesim plan``: its arguments, and printing the outcome of :func:`pipesim.api.plan` (the search is
:mod:`pipesim.plan`)."""

from __future__ import annotations

import argparse
import json

from pipesim.analytic.frameworks import Framework
from pipesim.analytic.layout import (
    AttentionKernel,
    BoundaryTensor,
    ColumnInput,
    CpKernels,
    ElementwiseKernels,
    LossKernel,
    MlpUp,
    MoeDispatcher,
    P2pCalls,
    Precision,
    Recompute,
    ZeroCollectives,
    ZeroStage,
)
from pipesim.api.defaults import PLAN_DEFAULTS
from pipesim.cli.analytic_args import (
    COLUMN_INPUT_HELP,
    FP8_PARAMS_BARE,
    FP8_PARAMS_CHOICES,
    GPU_SPEED_SPREAD_HELP,
    INTER_NODE_GBPS_HELP,
    MLP_UP_HELP,
    P2P_CALLS_HELP,
    P2P_TENSOR_HELP,
    add_loss_detail_args,
    cp_comm_type,
)
from pipesim.cli.arg_types import fraction, output_file, param_bytes, positive_float, positive_int, speed_spread
from pipesim.cli.shared_args import add_train_tokens_arg
from pipesim.errors import PipesimError
from pipesim.plots.paths import FIGURE_SUFFIXES

DESCRIPTION = (
    "Find the parallel configuration (tp, cp, pp, dp, micro-batch size, schedule and chunks, recomputation, "
    "sequence parallelism, ZeRO stage, FP8) that trains fastest within the memory cap, by simulating "
    "each candidate's real schedule with per-rank memory. Candidates are pruned by lower bounds first "
    "(memory that cannot fit, a step time that cannot reach the top); the top list and the Pareto front are "
    "those of simulating everything."
)


def _names(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _choices(enum_type, what: str, parse=str):
    """A comma-separated list of ``enum_type`` values (``parse`` turns each word into the value's type)."""
    allowed = [str(e.value) for e in enum_type]

    def convert(text: str) -> tuple:
        out = []
        for v in _names(text):
            if v not in allowed:
                raise argparse.ArgumentTypeError(f"{v!r} is not {what}; choose from {', '.join(allowed)}")
            out.append(enum_type(parse(v)))
        return tuple(out)

    return convert


def _listing(values) -> str:
    return ",".join(str(v) for v in values)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(positive_int(v) for v in _names(text))


def _gpu_counts(text: str) -> tuple[int, ...]:
    """``--gpus 1024`` or ``--gpus 256,512,1024``: one count or several, each a positive integer."""
    return tuple(positive_int(part) for part in text.split(","))


def _memory(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GiB") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0 GiB")
    return value


NAME = "plan"


def register(sub) -> None:
    p = sub.add_parser(NAME, help="find the fastest parallel configuration that fits, by simulation",
                       description=DESCRIPTION)
    p.add_argument("--model", metavar="NAME|FILE", help="model preset (pipesim models) or file")
    p.add_argument("--config", metavar="FILE",
                   help="a run's configuration (nanotron's .yaml, torchtitan's .toml) in place of --model: its model, "
                   "framework, sequence and precision, and unless given its GPUs and global batch; the plan searches "
                   "the layout")
    p.add_argument("--hardware", default=PLAN_DEFAULTS.hardware, metavar="NAME|FILE",
                   help=f"chip preset (pipesim chips) or file (default {PLAN_DEFAULTS.hardware})")
    p.add_argument("--gpus", type=_gpu_counts, default=None,
                   help="GPUs in the job (needed without --config); several, comma-separated (256,512,1024), plan the "
                   "job at each with the same global batch and list each count's best side by side")
    p.add_argument("--global-batch", type=positive_int, default=None,
                   help="sequences per optimizer step (needed without --config)")
    p.add_argument("--gpus-per-node", type=positive_int, default=None,
                   help="GPUs sharing the fast intra-node link; tp stays within one (default: the chip's "
                        "node_size: 8, or 72 on gb200)")
    p.add_argument("--memory-cap", type=_memory, default=None, metavar="GiB",
                   help="usable memory per GPU (default: the chip's HBM)")
    p.add_argument("--schedules", type=_names, default=None,
                   help="comma-separated schedules to consider (default: every built-in)")
    p.add_argument("--recompute", type=_choices(Recompute, "a recomputation"), default=None,
                   help="recomputation options to consider (default none,selective,full, selective as --framework "
                   "means it; per-op is torchtitan's)")
    p.add_argument("--zero", type=_choices(ZeroStage, "a ZeRO stage", int), default=None,
                   help="ZeRO stages to consider (default 0,1,2,3, or those --framework offers; 1 = Megatron's "
                   "distributed optimizer)")
    p.add_argument("--precision", type=_choices(Precision, "a precision"), default=None,
                   help="GEMM precisions to consider: bf16, fp8, fp4 (NVFP4); default bf16,fp8, or those --framework "
                   "trains in (nanotron: bf16); each only on chips that have it (fp4: b200, gb200), and fp4 only "
                   "when named")
    p.add_argument("--cp", type=_ints, default=PLAN_DEFAULTS.context_parallel,
                   help=f"context-parallel degrees to consider (default {_listing(PLAN_DEFAULTS.context_parallel)}; "
                   "only where each rank keeps "
                   "≥ --min-cp-tokens tokens)")
    p.add_argument("--ep", type=_ints, default=None,
                   help="expert-parallel degrees to consider, MoE models only (default: every one dividing dp·cp "
                   "and the experts)")
    p.add_argument("--min-cp-tokens", type=positive_int, default=PLAN_DEFAULTS.min_cp_tokens,
                   help=f"least sequence tokens per context-parallel rank (default {PLAN_DEFAULTS.min_cp_tokens})")
    p.add_argument("--micro-batch-sizes", type=_ints, default=None,
                   help=f"sequences per microbatch to consider (default {_listing(PLAN_DEFAULTS.micro_batch_sizes)})")
    p.add_argument("--max-chunks", type=positive_int, default=PLAN_DEFAULTS.max_chunks,
                   help=f"most chunks per rank for interleaved/looped-bfs (default {PLAN_DEFAULTS.max_chunks})")
    p.add_argument("--seq-len", type=positive_int, default=None, help="override the model's sequence length")
    p.add_argument("--achievable-fraction", type=fraction, default=None,
                   help="one fraction of peak FLOP/s for every kernel, replacing the chip's per-kernel "
                   "efficiencies (default: unset, the per-kernel model)")
    p.add_argument("--gpu-speed-spread", type=speed_spread, default=None, metavar="SIGMA",
                   help=GPU_SPEED_SPREAD_HELP + "; one factor for every candidate on these GPUs")
    p.add_argument("--inter-node-gbps", type=positive_float, default=None, metavar="GBPS",
                   help=INTER_NODE_GBPS_HELP)
    p.add_argument("--param-bytes", type=param_bytes, default=None, metavar="18|16|W+G+O",
                   help=f"bytes per parameter for weights+grads+Adam (default {PLAN_DEFAULTS.param_bytes}, "
                   "Megatron's count; 16 with 16-bit gradients; W+G+O each part's)")
    p.add_argument("--attention", choices=[a.value for a in AttentionKernel], default="fused",
                   help="the attention kernel the training code runs, not searched: fused (FlashAttention-2, "
                   "default), triton (FlashAttention in Triton) or unfused")
    p.add_argument("--repeat-kv", action=argparse.BooleanOptionalAction, default=None,
                   help="grouped-query attention's K and V copied to every query head before the attention, not "
                   "searched (torchtitan's Llama until January 2026; default: where the framework's attention path "
                   "does, Megatron-Core's unfused one)")
    p.add_argument("--framework", choices=[f.value for f in Framework], default=None,
                   help="the training code, whose defaults set --elementwise, --loss, --zero-collectives, "
                   "--overlap-tp-dgrad, --column-input, --p2p-tensor, --p2p-calls, --mlp-up, the gradient "
                   "accumulation and what the searched selective recomputation keeps (each flag given wins): megatron "
                   "(default), torchtitan, nanotron or megatron-deepspeed (pipesim/analytic/frameworks.py)")
    p.add_argument("--elementwise", choices=[e.value for e in ElementwiseKernels], default=None,
                   help="fused kernels (Megatron-LM, Transformer Engine, torch.compile; default), eager (one "
                   "PyTorch kernel per op) or eager-fused-norm (eager ops, fused norms), not searched")
    p.add_argument("--loss", choices=[k.value for k in LossKernel], default=None,
                   help="the cross-entropy's implementation, not searched: megatron (vocabulary-parallel, in place; "
                   "default), pytorch (F.cross_entropy on FP32 logits, torchtitan's), gathered (the logits "
                   "all-gathered over tp first), nanotron, fused (one fused kernel a pass) or compiled (pytorch's "
                   "under torch.compile)")
    add_loss_detail_args(p)
    p.add_argument("--zero-collectives", choices=[z.value for z in ZeroCollectives], default=None,
                   help="how ZeRO candidates communicate, not searched: bucketed (DeepSpeed; default), per-layer "
                   "(ZeRO-2 without pipelining as PyTorch FSDP's SHARD_GRAD_OP: every layer's gather and "
                   "reduce-scatter, every microbatch), per-tensor (ZeRO-3 without pipelining as DeepSpeed's 2021 "
                   "release: a collective per parameter tensor), all-reduce-fp32 (ZeRO-1: whole FP32 gradients) "
                   "or, with --shard-group, hierarchical (ZeRO-1 reduce-scattered within the group and "
                   "all-reduced across: Megatron-LM's --num-distributed-optimizer-instances)")
    p.add_argument("--shard-group", "--optimizer-shard-group", dest="shard_group", type=positive_int, default=None,
                   metavar="N",
                   help="sharded candidates (ZeRO 1-3) shard their ZeRO state over groups of N consecutive "
                   "data-parallel ranks, the groups replicas (InternEvo's zero1=N; FSDP's HYBRID_SHARD), not "
                   "searched; default: over all dp·cp")
    p.add_argument("--overlap-tp-dgrad", action=argparse.BooleanOptionalAction, default=None,
                   help="the column-parallel linears' input-gradient collectives run beside their weight "
                   "gradients, as Megatron-LM and Transformer Engine run them (default); --no-overlap-tp-dgrad: "
                   "every TP collective waits (older Megatron-LM forks, nanotron's default, PyTorch DTensor's TP), "
                   "not searched")
    p.add_argument("--overlap-tp-local-shard", action="store_true", default=None,
                   help="under sequence parallelism, each TP all-gather beside the GEMM of the rank's own shard "
                   "(nanotron's tp_linear_async_communication), not searched")
    p.add_argument("--column-input", choices=[c.value for c in ColumnInput], default=None,
                   help=COLUMN_INPUT_HELP + ", not searched")
    p.add_argument("--p2p-tensor", choices=[b.value for b in BoundaryTensor], default=None,
                   help=P2P_TENSOR_HELP + ", not searched")
    p.add_argument("--p2p-calls", choices=[c.value for c in P2pCalls], default=None,
                   help=P2P_CALLS_HELP + ", for the candidates whose sends block; not searched")
    p.add_argument("--mlp-up", choices=[m.value for m in MlpUp], default=None, help=MLP_UP_HELP + ", not searched")
    p.add_argument("--moe-dispatcher", choices=[d.value for d in MoeDispatcher], default=None,
                   help="how a MoE model's candidates send tokens to their experts: alltoall (NCCL, a copy per routed "
                   "expert; default) or deepep (a copy per node across the network), not searched")
    p.add_argument("--moe-dispatch-fp8", action="store_true",
                   help="with --moe-dispatcher deepep, the dispatch in FP8 (DeepSeek-V3's), not searched")
    p.add_argument("--cp-comm-type", type=cp_comm_type, default=None, metavar="{p2p,allgather,a2a}",
                   help="how the context-parallel candidates exchange keys and values (Megatron-LM's --cp-comm-type; "
                   "default: the framework's), not searched")
    p.add_argument("--cp-kernels", choices=[k.value for k in CpKernels], default=None,
                   help="the code that runs the context-parallel candidates' attention: transformer-engine or "
                   "pytorch (default: the framework's), not searched")
    p.add_argument("--fp8-params", nargs="?", const=FP8_PARAMS_BARE, default=None, choices=FP8_PARAMS_CHOICES,
                   help="FP8 candidates with a distributed optimizer keep their linears' weights in FP8 alone "
                   "(Megatron-LM's --fp8-param-gather), with the transpose (both, the default: Transformer Engine "
                   "2.x) or without (rowwise), not searched")
    p.add_argument("--fp8-all-gather", action="store_true",
                   help="FP8 candidates under FSDP (ZeRO-3) gather their weights in FP8 (torchao's "
                   "enable_fsdp_float8_all_gather; --framework torchtitan's linears), not searched")
    p.add_argument("--blocking-p2p", action="store_true",
                   help="every candidate blocks on its pipeline sends (default: overlapped where the framework's "
                   "engine overlaps them for the schedule, Megatron-LM's interleaved one as its "
                   "--overlap-p2p-communication default does; the other schedules block)")
    p.add_argument("--blocking-dp-sync", action="store_true",
                   help="the data-parallel gradient reduce and parameter gather wait for the passes (default: "
                   "beside them, as Megatron-LM's --overlap-grad-reduce and --overlap-param-gather run them; "
                   "under another --framework, which has no such switches, the sync runs as its code runs it)")
    p.add_argument("--even-ends", action="store_true",
                   help="split the layers as the framework does and no other way (default: single-chunk and "
                   "interleaved pipelines are also tried with their ends chosen against the LM head's rank, the "
                   "first and last rank's layers or the end slices', Megatron-Core's "
                   "--decoder-first/last-pipeline-num-layers or --pipeline-model-parallel-layout, where lighter)")
    add_train_tokens_arg(p)
    p.add_argument("--top", type=positive_int, default=PLAN_DEFAULTS.top,
                   help=f"configurations to print (default {PLAN_DEFAULTS.top})")
    p.add_argument("--output", "-o", metavar="FILE", type=output_file(".csv", ".parquet", what="plan results"),
                   help="every candidate and its outcome (.parquet or .csv)")
    p.add_argument("--plot", metavar="FILE", type=output_file(*FIGURE_SUFFIXES, what="figure"),
                   help="Pareto front of step time vs peak memory (.png/.pdf/.svg); with several --gpus counts, "
                   "throughput per GPU (and with --train-tokens days and GPU-hours) by GPU count")
    p.add_argument("--cluster", metavar="tcp://HOST:8786", help="evaluate on a running Dask scheduler")
    p.add_argument("--jobs", "-j", type=int, default=PLAN_DEFAULTS.jobs,
                   help=f"local processes (0 = all cores; default {PLAN_DEFAULTS.jobs})")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true",
                   help="print the ranking as JSON (PlanResult.to_dict(); with several --gpus, each count's best) "
                   "instead of text; files are written as asked")
    p.set_defaults(func=run)


def space_from_args(args: argparse.Namespace) -> dict:
    """The flags as :func:`pipesim.api.planning.plan_request`'s keyword arguments."""
    return dict(hardware=args.hardware, gpus_per_node=args.gpus_per_node, memory_cap=args.memory_cap,
                schedules=args.schedules, recompute=args.recompute, zero=args.zero, precision=args.precision,
                cp=args.cp, min_cp_tokens=args.min_cp_tokens, micro_batch_sizes=args.micro_batch_sizes,
                max_chunks=args.max_chunks, seq_len=args.seq_len, achievable_fraction=args.achievable_fraction,
                gpu_speed_spread=args.gpu_speed_spread, inter_node_gbps=args.inter_node_gbps,
                param_bytes=args.param_bytes, blocking_p2p=args.blocking_p2p,
                blocking_dp_sync=args.blocking_dp_sync, even_ends=args.even_ends, ep=args.ep,
                attention=args.attention, repeat_kv=args.repeat_kv, framework=args.framework,
                elementwise=args.elementwise, loss=args.loss,
                z_loss=args.z_loss, loss_input_copy=args.loss_input_copy,
                zero_collectives=args.zero_collectives, shard_group=args.shard_group,
                overlap_tp_dgrad=args.overlap_tp_dgrad,
                overlap_tp_local_shard=args.overlap_tp_local_shard,
                column_input=args.column_input, p2p_tensor=args.p2p_tensor, p2p_calls=args.p2p_calls,
                mlp_up=args.mlp_up, moe_dispatcher=args.moe_dispatcher, moe_dispatch_fp8=args.moe_dispatch_fp8,
                fp8_params=args.fp8_params, fp8_all_gather=args.fp8_all_gather,
                cp_comm_type=args.cp_comm_type,
                cp_kernels=args.cp_kernels)


def run(args: argparse.Namespace) -> int:
    from pipesim.api.planning import plan
    from pipesim.cli.progress import progress_bar  # rich: only once a plan runs

    if args.gpus is not None and len(set(args.gpus)) > 1:
        return _run_scaling(args)
    gpus = None if args.gpus is None else args.gpus[0]
    # -o and --plot were checked as the flags were parsed (folder, suffix, writable): before any work.
    with progress_bar(args.quiet) as bar:
        task = bar.add_task("planning", total=None)
        result = plan(args.model, gpus, args.global_batch, config=args.config, top=args.top, jobs=args.jobs,
                      cluster=args.cluster,
                      progress=lambda n: bar.advance(task, n),
                      on_queue=lambda n: bar.update(task, total=n, description=f"deciding {n} candidates"),
                      **space_from_args(args))
    if result.best is None:
        if not args.json:
            print(result.header())
        raise PipesimError(result.nothing_fits())
    if args.output:
        result.write(args.output)
    if args.json:
        if args.plot:
            result.plot(args.plot)
        training = {} if args.train_tokens is None else {"training": result.training(args.train_tokens).to_dict()}
        print(json.dumps(result.to_dict() | training, indent=2))
        return 0
    print(result.header())
    print(result.ranking_text())
    if args.train_tokens is not None:
        print(f"#1: {result.training(args.train_tokens).text()}")
    if args.output:
        print(f"wrote {len(result.search.outcomes)} candidates to {args.output}")
    if args.plot:
        result.plot(args.plot)
        print(f"wrote {args.plot}")
    return 0


def _run_scaling(args: argparse.Namespace) -> int:
    """``--gpus A,B,...``: the job planned at each count, each count's best side by side."""
    from pipesim.api.scaling import plan_scaling
    from pipesim.cli.progress import progress_bar

    with progress_bar(args.quiet) as bar:
        task = bar.add_task("planning", total=None)

        def starting(count: int) -> None:
            bar.reset(task, total=None, description=f"planning at {count} GPUs")

        result = plan_scaling(args.model, args.gpus, args.global_batch, train_tokens=args.train_tokens,
                              config=args.config, jobs=args.jobs, cluster=args.cluster, on_plan=starting,
                              progress=lambda n: bar.advance(task, n), **space_from_args(args))
    if args.json:
        for write, path in ((result.write, args.output), (result.plot, args.plot)):
            if path:
                write(path)
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(result.text())
    if args.output:
        result.write(args.output)
        print(f"wrote every candidate of the {len(result.plans)} plans to {args.output} (column gpus)")
    if args.plot:
        result.plot(args.plot)
        print(f"wrote {args.plot}")
    return 0
