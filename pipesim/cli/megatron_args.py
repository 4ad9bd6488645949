"""Megatron-LM's own flags on ``simulate``'s command line, so a launch script's parallel layout can be pasted in.

Flags that only rename a pipesim option are hidden aliases of it (``--tensor-model-parallel-size`` is ``--tp``:
:data:`MEGATRON_ALIASES`, :func:`add_megatron_aliases`). The others take a value
pipesim spells differently (``--fp8-format hybrid`` is ``--fp8``; ``--attention-backend flash`` is ``--attention
fused``), are accepted because they ask for what pipesim does anyway (``--bf16``), or combine into one option
(``--recompute-method`` with ``--recompute-num-layers``: :func:`recompute_layers_of`; ``--cross-entropy-loss-fusion``
with ``--cross-entropy-fusion-impl``: :func:`loss_of`). The flags that count layers
per pipeline rank (``--decoder-first-pipeline-num-layers`` and the rest) are model options of their own
(:class:`~pipesim.api.model_options.ModelOptions`), with Megatron-LM's names. Every meaning below is Megatron-LM's
(``megatron/training/arguments.py``).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from dataclasses import fields

from pipesim.analytic.layout import MOMENT_BYTES, OptimizerBytes, precision_aware_bytes
from pipesim.analytic.megatron_model import MegatronModelArgs, capacity_imbalance
from pipesim.cli.arg_types import non_negative_float, positive_float, positive_int
from pipesim.errors import PipesimError

# --attention-backend's choices (Megatron-Core's AttnBackend) as pipesim's --attention: FlashAttention, cuDNN's
# fused attention and "auto" (which picks one of the two) keep no s² scores; "unfused" and "local" (Megatron's
# own DotProductAttention) materialise them.
_ATTENTION_BACKENDS = {"flash": "fused", "fused": "fused", "auto": "fused", "unfused": "unfused", "local": "unfused"}


# Megatron-LM's name → pipesim's, for flags that mean the same: hidden aliases (:func:`add_megatron_aliases`), so an
# error names the flag as typed and --help lists each option once (docs/simulate.md lists these).
MEGATRON_ALIASES = {
    "--tensor-model-parallel-size": "--tp",
    "--pipeline-model-parallel-size": "--pp",
    "--num-virtual-stages-per-pipeline-rank": "--chunks",
    "--virtual-pipeline-model-parallel-size": "--chunks",  # NeMo's and older Megatron-LM's name
    "--vp": "--chunks",  # the "VP" column of NVIDIA's performance tables
    "--context-parallel-size": "--cp",
    "--expert-model-parallel-size": "--ep",
    "--expert-tensor-parallel-size": "--expert-tp",
    "--seq-length": "--seq-len",
    "--recompute-granularity": "--recompute",
    "--fp8-param-gather": "--fp8-params",
    "--use-tp-pp-dp-mapping": "--tp-pp-dp-mapping",
    "--global-batch-size": "--global-batch",
}


def add_megatron_aliases(parser: argparse.ArgumentParser) -> None:
    """Each of :data:`MEGATRON_ALIASES` whose pipesim flag ``parser`` has, as a hidden flag with the same
    destination, value type and choices (call after the pipesim flags are added)."""
    for alias, name in MEGATRON_ALIASES.items():
        target = parser._option_string_actions.get(name)
        if target is None:
            continue
        if target.nargs == 0:  # a switch
            parser.add_argument(alias, dest=target.dest, action="store_const", const=target.const, default=None,
                                help=argparse.SUPPRESS)
        else:
            parser.add_argument(alias, dest=target.dest, type=target.type, choices=target.choices, nargs=target.nargs,
                                const=target.const, default=None, metavar=target.metavar, help=argparse.SUPPRESS)


class _SetsTo(argparse.Action):
    """A flag whose value (checked against its choices) sets an option of pipesim's to ``mapping[value]``."""

    def __init__(self, option_strings, dest, mapping: dict, **kwargs):
        self.mapping = mapping
        super().__init__(option_strings, dest, choices=list(mapping), **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.mapping[values])


# Megatron-LM's own FSDP (--use-megatron-fsdp, Megatron-FSDP) by --data-parallel-sharding-strategy, as pipesim's ZeRO
# stage (docs/user-guide/features/megatron_fsdp.md: DDP, ZeRO-1, ZeRO-2, ZeRO-3)
_MEGATRON_FSDP_STAGES = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
_MEGATRON_FSDP_DEFAULT = "optim_grads_params"  # arguments.py's default for --data-parallel-sharding-strategy
# --megatron-fsdp-main-grads-dtype as pipesim's --param-bytes: "auto" is the parameters' own type, 16-bit under --bf16
# or --fp16 (param_and_grad_buffer.py, _resolve_group_grad_dtype: "grad.dtype == param.dtype"; BF16 for FP8 ones)
_MAIN_GRADS_BYTES = {"auto": "16", "bf16": "16", "fp16": "16", "fp32": "18"}
_PRECISION_AWARE_DTYPES = ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")


def add_megatron_args(group) -> None:
    """Megatron-LM's flags that are not just another name for one of pipesim's (see the module doc)."""
    group.add_argument("--fp8-format", dest="fp8", action=_SetsTo, mapping={"e4m3": True, "hybrid": True},
                       default=None, help="Megatron-LM's FP8 training: --fp8 (e4m3 or hybrid, the same GEMM rate)")
    group.add_argument("--fp4-format", dest="fp4", action=_SetsTo, mapping={"e2m1": True}, default=None,
                       help="Megatron-LM's NVFP4 training: --fp4")
    group.add_argument("--fp4-recipe", dest="fp4", action=_SetsTo, mapping={"nvfp4": True}, default=None,
                       help="Megatron-LM's NVFP4 recipe (NVFP4BlockScaling): --fp4")
    group.add_argument("--bf16", action="store_true", default=None,
                       help="Megatron-LM's BF16 mixed precision: what pipesim runs unless --fp8 or --fp4 (accepted "
                       "so a launch line reads as is)")
    group.add_argument("--fp16", action="store_true", default=None,
                       help="Megatron-LM's FP16 mixed precision: FP16's tensor-core rate and bytes are BF16's, and "
                       "its gradients stay FP16 unless --accumulate-allreduce-grads-in-fp32 (Megatron-LM casts to "
                       "FP32 under --bf16 only): --param-bytes 16")
    group.add_argument("--attention-backend", dest="attention", action=_SetsTo, mapping=_ATTENTION_BACKENDS,
                       default=None, help="Megatron-Core's attention backend: flash, fused or auto are --attention "
                       "fused; unfused or local are --attention unfused")
    group.add_argument("--use-flash-attn", dest="attention", action="store_const", const="fused", default=None,
                       help="Megatron-LM's FlashAttention: --attention fused (the default)")
    group.add_argument("--recompute-activations", dest="recompute", action="store_const", const="selective",
                       default=None, help="Megatron-LM's shorthand for --recompute selective")
    group.add_argument("--recompute-method", choices=["uniform", "block"], default=None,
                       help="with --recompute-granularity full: uniform recomputes every layer (a checkpoint every "
                       "--recompute-num-layers layers, taken as one a layer), block only the first "
                       "--recompute-num-layers layers of each model chunk (--recompute-layers N)")
    group.add_argument("--recompute-num-layers", type=positive_int, default=None, metavar="N",
                       help="with --recompute-method: see there")
    group.add_argument("--cross-entropy-loss-fusion", action="store_true", default=None,
                       help="Megatron-Core's fused cross-entropy: --loss megatron-fused, or --loss te with "
                       "--cross-entropy-fusion-impl te")
    group.add_argument("--cross-entropy-fusion-impl", choices=["native", "te"], default=None,
                       help="with --cross-entropy-loss-fusion: native (Megatron's compiled pieces, its default) or te "
                       "(Transformer Engine's Triton kernel)")
    group.add_argument("--moe-expert-capacity-factor", type=positive_float, default=None, metavar="F",
                       help="Megatron-Core's expert capacity, F times an expert's mean tokens: with "
                       "--moe-pad-expert-input-to-capacity every expert computes (and the all-to-all carries) "
                       "exactly that, --moe-imbalance F; without it, tokens above it are dropped, so --moe-imbalance "
                       "(default 1) must not exceed F")
    group.add_argument("--moe-pad-expert-input-to-capacity", action="store_true", default=None,
                       help="with --moe-expert-capacity-factor: see there")
    group.add_argument("--moe-grouped-gemm", action="store_true", default=None,
                       help="Megatron-Core's grouped GEMM over a rank's experts: how pipesim counts them anyway "
                       "(accepted so a launch line reads as is)")
    group.add_argument("--moe-token-dispatcher-type", choices=["alltoall", "flex"], default=None,
                       help="Megatron-Core's token dispatcher: alltoall (--moe-dispatcher alltoall) or flex, whose "
                       "default backend is DeepEP (--moe-dispatcher deepep); its allgather is not modelled")
    group.add_argument("--moe-flex-dispatcher-backend", choices=["deepep", "hybridep"], default=None,
                       help="with --moe-token-dispatcher-type flex: deepep, or hybridep (DeepEP's hybrid-ep branch, "
                       "the same route: across the network once per node, NVLink within), both --moe-dispatcher "
                       "deepep; ncclep is not modelled")
    group.add_argument("--moe-enable-deepep", action="store_true", default=None,
                       help="Megatron-Core's older spelling of the flex dispatcher's deepep backend")
    group.add_argument("--grad-reduce-in-bf16", dest="param_bytes", action="store_const", const="16", default=None,
                       help="Megatron-LM's BF16 gradient buffer and reduce (its default under --bf16 is FP32, "
                       "--accumulate-allreduce-grads-in-fp32): --param-bytes 16")
    group.add_argument("--accumulate-allreduce-grads-in-fp32", dest="param_bytes", action="store_const", const="18",
                       default=None, help="Megatron-LM's FP32 gradient buffer and reduce: --param-bytes 18 (the "
                       "default)")
    group.add_argument("--use-precision-aware-optimizer", action="store_true", default=None,
                       help="Megatron-LM's precision-aware optimizer (Transformer Engine's FusedAdam, with the "
                       "distributed optimizer): its state in the types --main-grads-dtype, --main-params-dtype, "
                       "--exp-avg-dtype and --exp-avg-sq-dtype give (FP32 each by default; an FP32 master kept as the "
                       "16-bit remainder beside BF16 weights), as --param-bytes W+G+O")
    for flag, choices in (("--main-grads-dtype", ["fp32", "bf16"]), ("--main-params-dtype", ["fp32", "fp16"]),
                          ("--exp-avg-dtype", list(MOMENT_BYTES)), ("--exp-avg-sq-dtype", list(MOMENT_BYTES))):
        group.add_argument(flag, choices=choices, default=None, help="with --use-precision-aware-optimizer: see there")
    group.add_argument("--use-megatron-fsdp", action="store_true", default=None,
                       help="Megatron-LM's own FSDP (Megatron-FSDP), sharding as --data-parallel-sharding-strategy "
                       "says: its default optim_grads_params is --zero 3; optim_grads --zero 2 (weights replicated, "
                       "every microbatch's gradients reduce-scattered beside its backward), optim --zero 1 and "
                       "no_shard --zero 0, these three with --overlap-grad-reduce")
    group.add_argument("--data-parallel-sharding-strategy", choices=list(_MEGATRON_FSDP_STAGES), default=None,
                       help="with --use-megatron-fsdp: see there")
    group.add_argument("--megatron-fsdp-main-grads-dtype", choices=list(_MAIN_GRADS_BYTES), default=None,
                       help="with --use-megatron-fsdp: the gradient buffer's type; its default auto is the "
                       "parameters' (BF16): --param-bytes 16; fp32 --param-bytes 18")
    group.add_argument("--use-torch-fsdp2", action="store_true", default=None,
                       help="Megatron-LM on PyTorch's FSDP2 (fully_shard): --zero 3 --fsdp2, or with "
                       "--torch-fsdp2-no-reshard-after-forward --zero 2 --zero-collectives per-layer --fsdp2 (weights "
                       "kept gathered from each forward to its backward); Megatron-LM runs it without a pipeline")
    group.add_argument("--torch-fsdp2-no-reshard-after-forward", action="store_true", default=None,
                       help="with --use-torch-fsdp2: see there")
    group.add_argument("--num-distributed-optimizer-instances", type=positive_int, default=None, metavar="N",
                       help="Megatron-LM's distributed optimizer in N instances (1, its default: one over all "
                       "dp·cp): each instance's dp·cp/N ranks shard the optimizer state and reduce-scatter the "
                       "gradients, the shards all-reduced across the instances: --shard-group dp·cp/N "
                       "--zero-collectives hierarchical; with --use-megatron-fsdp, its HSDP: the strategy's sharding "
                       "within dp·cp/N ranks, replicated across the N (--shard-group dp·cp/N)")
    # Megatron-LM's flags that change what a GPU holds or how it syncs in ways pipesim does not model: taken so a
    # launch line's value can be read (their defaults change nothing), refused otherwise (check_unmodelled), even
    # under --ignore-unknown, which would have dropped them with a note
    group.add_argument("--optimizer-cpu-offload", action="store_true", default=None,
                       help="Megatron-LM's optimizer on the host: refused as not modelled")
    group.add_argument("--outer-dp-sharding-strategy", choices=["no_shard", "optim"], default=None,
                       help="Megatron-FSDP's sharding across its optimizer instances (HSDP's replicas): no_shard, "
                       "its default, replicates; optim (hybrid FSDP) shards the optimizer state across them too: "
                       "--outer-optimizer-sharding, with --num-distributed-optimizer-instances and "
                       "optim_grads_params")
    group.add_argument("--megatron-fsdp-grad-comm-dtype", choices=["auto", "fp32", "bf16", "fp16"], default=None,
                       help="Megatron-FSDP's gradient wire type: auto (its default, the buffer's) is what pipesim "
                       "runs; another is refused as not modelled")
    group.add_argument("--no-gradient-accumulation-fusion", dest="grad_accumulation", action="store_const",
                       const="autograd", default=None,
                       help="Megatron-LM without its fused weight-gradient accumulation: --grad-accumulation autograd")


# Megatron-LM's defaults where a launch line leaves a flag out and pipesim's own default differs
# (``megatron/training/arguments.py``): no pipeline, and a global batch of one micro-batch per replica
# (``args.global_batch_size = args.micro_batch_size * args.data_parallel_size``), so one microbatch a step.
MEGATRON_DEFAULT_PP = 1
MEGATRON_DEFAULT_MICROBATCHES = 1
# Megatron-LM's names that are second spellings of pipesim flags defined beside their pipesim names
# (cli/analytic_args.py); names both spell alike (--micro-batch-size, --sequence-parallel, --overlap-grad-reduce)
# say nothing about whose line it is
_SECOND_SPELLINGS = ("--distribute-checkpointed-activations", "--use-distributed-optimizer", "--tp-comm-overlap",
                     "--overlap-p2p-communication")


@functools.cache
def megatron_flags() -> frozenset[str]:
    """Every option string that is Megatron-LM's spelling: the aliases and the flags of :func:`add_megatron_args`
    and :func:`add_megatron_model_args`, read off throwaway parsers so the list cannot drift from them."""
    names = {*MEGATRON_ALIASES, *_SECOND_SPELLINGS}
    for add in (add_megatron_args, add_megatron_model_args):
        parser = argparse.ArgumentParser(add_help=False)
        add(parser)
        names.update(s for action in parser._actions for s in action.option_strings)
    return frozenset(names)


def pasted_megatron_line(command_line: Sequence[str]) -> bool:
    """Whether ``command_line`` (the words as typed) uses a flag in Megatron-LM's spelling: a pasted launch line,
    whose absent flags then mean Megatron-LM's defaults (:data:`MEGATRON_DEFAULT_PP`,
    :data:`MEGATRON_DEFAULT_MICROBATCHES`), not pipesim's. A flag abbreviated (argparse takes a unique prefix)
    does not count."""
    flags = megatron_flags()
    return any(word.split("=", 1)[0] in flags for word in command_line if word.startswith("--"))


def moe_imbalance_of(args: argparse.Namespace) -> float | None:
    """``--moe-imbalance`` with Megatron-Core's expert capacity flags folded in
    (:func:`~pipesim.analytic.megatron_model.capacity_imbalance`)."""
    return capacity_imbalance(getattr(args, "moe_expert_capacity_factor", None),
                              bool(getattr(args, "moe_pad_expert_input_to_capacity", None)),
                              getattr(args, "moe_imbalance", None))


def moe_dispatcher_of(args: argparse.Namespace) -> str | None:
    """``--moe-dispatcher`` from Megatron-Core's dispatcher flags (``flex`` with DeepEP is ``deepep``); a one-line
    error where they contradict it or each other."""
    kind = getattr(args, "moe_token_dispatcher_type", None)
    deepep = getattr(args, "moe_enable_deepep", None) or getattr(args, "moe_flex_dispatcher_backend", None)
    if deepep and kind != "flex":
        raise PipesimError("DeepEP runs under Megatron-Core's flex dispatcher: add --moe-token-dispatcher-type flex "
                           "(or use --moe-dispatcher deepep)")
    meant = {"alltoall": "alltoall", "flex": "deepep"}.get(kind)
    if meant is None:
        return args.moe_dispatcher
    if args.moe_dispatcher not in (None, meant):
        raise PipesimError(f"--moe-token-dispatcher-type {kind} is --moe-dispatcher {meant}, but --moe-dispatcher "
                           f"{args.moe_dispatcher} is given too; keep one")
    return meant


def sharding_of(args: argparse.Namespace) -> dict:
    """The ZeRO options Megatron-LM's FSDP flags ask for (``zero``, ``distributed_optimizer``, ``zero_collectives``,
    ``fsdp2``, ``overlap_grad_reduce``), to replace the flags' own; empty without them. A one-line error where they
    contradict each other, pipesim's flags, or what Megatron-LM itself refuses (``arguments.py``)."""
    megatron, torch_fsdp2 = getattr(args, "use_megatron_fsdp", None), getattr(args, "use_torch_fsdp2", None)
    strategy = getattr(args, "data_parallel_sharding_strategy", None)
    main_grads = getattr(args, "megatron_fsdp_main_grads_dtype", None)
    if main_grads is not None and not megatron:
        raise PipesimError(f"--megatron-fsdp-main-grads-dtype {main_grads} is Megatron-FSDP's; add --use-megatron-fsdp "
                           "(or give --param-bytes)")
    if strategy is not None and not megatron:
        raise PipesimError(f"--data-parallel-sharding-strategy {strategy} is Megatron-FSDP's; add --use-megatron-fsdp "
                           "(or give --zero N)")
    outer = getattr(args, "outer_dp_sharding_strategy", None)
    if outer is not None and not megatron:
        raise PipesimError(f"--outer-dp-sharding-strategy {outer} is Megatron-FSDP's; add --use-megatron-fsdp (or "
                           "give --outer-optimizer-sharding)")
    if getattr(args, "torch_fsdp2_no_reshard_after_forward", None) and not torch_fsdp2:
        raise PipesimError("--torch-fsdp2-no-reshard-after-forward applies to --use-torch-fsdp2; add it or drop it")
    if not (megatron or torch_fsdp2):
        return {}
    if megatron and torch_fsdp2:
        raise PipesimError("--use-megatron-fsdp and --use-torch-fsdp2 are two FSDPs; Megatron-LM takes one, keep one")
    if torch_fsdp2:
        if args.pp is not None and args.pp > 1:
            raise PipesimError("--use-torch-fsdp2 with --pp > 1: Megatron-LM refuses it ('not supported with pipeline "
                               "parallelism'); drop one")
        if args.distributed_optimizer:
            raise PipesimError("--use-torch-fsdp2 with --use-distributed-optimizer: Megatron-LM refuses the pair "
                               "('not supported with MCore's distributed optimizer'); keep one")
        stage, collectives = (2, "per-layer") if args.torch_fsdp2_no_reshard_after_forward else (3, None)
        options = {"zero": stage, "fsdp2": True, "zero_collectives": collectives or args.zero_collectives}
    else:
        if getattr(args, "use_precision_aware_optimizer", None):
            raise PipesimError("--use-precision-aware-optimizer beside --use-megatron-fsdp is not modelled "
                               "(Megatron-FSDP keeps its own master and gradient types, "
                               "--megatron-fsdp-main-params-dtype and --megatron-fsdp-main-grads-dtype); drop one")
        strategy = strategy or _MEGATRON_FSDP_DEFAULT
        stage = _MEGATRON_FSDP_STAGES[strategy]
        # Megatron-FSDP v1 turns the distributed optimizer on itself: the strategy decides what is sharded
        options = {"zero": stage, "distributed_optimizer": None}
        if outer == "optim":  # hybrid FSDP: the optimizer state across the instances too (Layout checks the rest)
            options["outer_optimizer_sharding"] = True
        # "overlapped with backward compute" (its docs): under optim_grads (ZeRO-2, weights replicated) every
        # microbatch's reduce-scatter beside its backward
        if stage <= 2 and args.overlap_grad_reduce is None:
            options["overlap_grad_reduce"] = True
        bytes_ = _MAIN_GRADS_BYTES[main_grads or "auto"]
        if args.param_bytes not in (None, bytes_):
            kept = "FP32" if bytes_ == "18" else "16-bit"
            raise PipesimError(f"--use-megatron-fsdp keeps {kept} gradients (--megatron-fsdp-main-grads-dtype "
                               f"{main_grads or 'auto'}): --param-bytes {bytes_}, but --param-bytes {args.param_bytes} "
                               "is given; keep one")
        options["param_bytes"] = bytes_
    if args.zero is not None and args.zero != options["zero"]:
        flag = "--use-torch-fsdp2" if torch_fsdp2 else f"--use-megatron-fsdp ({strategy})"
        raise PipesimError(f"{flag} is --zero {options['zero']}, but --zero {args.zero} is given; keep one")
    return options


# Megatron-LM's Mamba and hybrid models' flags (pretrain_mamba.py, MambaModel: Nemotron-H's
# --hybrid-override-pattern "M-M-M*-…", M a Mamba-2 mixer, * attention, - an MLP, each a layer of its own)
MAMBA_FLAGS = ("hybrid-override-pattern", "hybrid-attention-ratio", "hybrid-mlp-ratio", "is-hybrid-model",
               "mamba-state-dim", "mamba-head-dim", "mamba-num-groups", "mamba-num-heads")


def check_unmodelled(args: argparse.Namespace) -> None:
    """A one-line refusal for a Megatron-LM flag set away from its default where that changes what a GPU holds or
    how it syncs in a way pipesim does not model (each named with what it does and what dropping it runs), and
    for any of a Mamba or hybrid model's flags: pipesim's layers are transformer layers."""
    mamba = [f"--{name}" for name in MAMBA_FLAGS if getattr(args, name.replace("-", "_"), None) is not None]
    if mamba:
        raise PipesimError(f"{mamba[0]}: Mamba (state-space) layers, as pretrain_mamba.py builds them for hybrid "
                           "models such as Nemotron-H, are not modelled: pipesim simulates transformer layers "
                           "(attention and an MLP or experts); drop the Mamba flags only for a transformer of that "
                           "depth, which is another model")
    unmodelled = {
        "--optimizer-cpu-offload": (bool(getattr(args, "optimizer_cpu_offload", None)),
                                    "the optimizer's state and step on the host"),
        "--megatron-fsdp-grad-comm-dtype": (getattr(args, "megatron_fsdp_grad_comm_dtype", None)
                                            not in (None, "auto"),
                                            "gradients reduced in another type than the buffer keeps them"),
    }
    for flag, (asked, what) in unmodelled.items():
        if asked:
            value = getattr(args, flag[2:].replace("-", "_"))
            given = flag if value is True else f"{flag} {value}"
            raise PipesimError(f"{given} ({what}) is not modelled; drop it and pipesim runs Megatron-LM's default "
                               "for it")


def precision_bytes_of(args: argparse.Namespace) -> str | None:
    """``--param-bytes`` with Megatron-LM's precision flags folded in: ``--fp16`` keeps FP16 gradients (16) unless
    the FP32 ones are asked for (``arguments.py`` sets ``accumulate_allreduce_grads_in_fp32`` under ``--bf16``
    alone); the precision-aware optimizer (:func:`_precision_aware_bytes`). One-line errors where Megatron-LM
    refuses the flags too."""
    chosen = args.param_bytes
    if getattr(args, "fp16", None):
        if getattr(args, "bf16", None):
            raise PipesimError("--fp16 and --bf16 are two precisions; Megatron-LM takes one, keep one")
        chosen = chosen or "16"
    return _precision_aware_bytes(args, chosen)


def _precision_aware_bytes(args: argparse.Namespace, chosen: str | None) -> str | None:
    """``chosen`` (a ``--param-bytes``) under ``--use-precision-aware-optimizer``, in the types its flags give
    (:func:`pipesim.analytic.layout.precision_aware_bytes`); one-line refusals where Megatron-LM refuses them."""
    asked = {name: getattr(args, name, None) for name in _PRECISION_AWARE_DTYPES}
    if not getattr(args, "use_precision_aware_optimizer", None):
        lower = [f"--{name.replace('_', '-')} {value}" for name, value in asked.items() if value not in (None, "fp32")]
        if lower:
            raise PipesimError(f"{lower[0]} needs --use-precision-aware-optimizer (Megatron-LM keeps every optimizer "
                               "type FP32 without it); add it or drop the type")
        return chosen
    sharded = args.distributed_optimizer or (args.zero or 0) >= 1 or getattr(args, "use_megatron_fsdp", None)
    if not sharded:
        raise PipesimError("--use-precision-aware-optimizer runs with the distributed optimizer only (Megatron-LM: "
                           "'only supported with distributed optimizer'); add --use-distributed-optimizer")
    delayed = not args.fp8 or (args.fp8_recipe or "delayed") == "delayed"
    types = {name.removesuffix("_dtype"): value or "fp32" for name, value in asked.items()}
    return precision_aware_bytes(OptimizerBytes.parse(chosen or "18"), **types,
                                 master_remainder=delayed and not getattr(args, "fp16", None)).text


def schedule_of(args: argparse.Namespace) -> str | None:
    """``-s`` with Megatron-Core's ``--overlap-moe-expert-parallel-comm`` folded in: its combined 1F1B is pipesim's
    ``interleaved-overlap``; a one-line error beside another schedule."""
    if not getattr(args, "overlap_moe_expert_parallel_comm", None):
        return args.schedule
    if args.schedule not in (None, "interleaved", "interleaved-overlap"):
        raise PipesimError("--overlap-moe-expert-parallel-comm is Megatron-Core's combined 1F1B (-s "
                           f"interleaved-overlap), but -s {args.schedule} is given; keep one")
    return "interleaved-overlap"


def loss_of(args: argparse.Namespace) -> str | None:
    """``--loss`` from Megatron-LM's ``--cross-entropy-loss-fusion`` and ``--cross-entropy-fusion-impl`` (the
    implementation alone changes nothing in Megatron-LM, so nothing here); a one-line error where ``--loss``
    names another."""
    if not getattr(args, "cross_entropy_loss_fusion", None):
        return args.loss
    fused = "te" if getattr(args, "cross_entropy_fusion_impl", None) == "te" else "megatron-fused"
    if args.loss not in (None, fused):
        raise PipesimError(f"--cross-entropy-loss-fusion is --loss {fused}, but --loss {args.loss} is given too; keep "
                           "one")
    return fused


def recompute_layers_of(args: argparse.Namespace) -> int | None:
    """``--recompute-layers`` from Megatron-LM's ``--recompute-method`` and ``--recompute-num-layers``: block's N
    is it, uniform recomputes every layer (None); a one-line error where they contradict or one is missing."""
    method, layers = getattr(args, "recompute_method", None), getattr(args, "recompute_num_layers", None)
    if method is None:
        if layers is not None:
            raise PipesimError("--recompute-num-layers needs --recompute-method uniform or block (as in Megatron-LM)")
        return args.recompute_layers
    if method == "block" and layers is None:
        raise PipesimError("--recompute-method block needs --recompute-num-layers N (each chunk's first N layers "
                           "recompute)")
    if args.recompute_layers is not None:
        raise PipesimError("--recompute-layers and --recompute-method both say which layers recompute; keep one")
    if args.recompute != "full":
        raise PipesimError(f"--recompute-method applies to --recompute-granularity full, not {args.recompute or 'none'}"
                           "; add it or drop --recompute-method")
    return layers if method == "block" else None


def add_megatron_model_args(parser: argparse.ArgumentParser) -> None:
    """Megatron-LM's model-shape flags (:class:`~pipesim.analytic.megatron_model.MegatronModelArgs`): without
    --model they build the model, beside it they must agree with it."""
    counts = ("num-layers", "hidden-size", "num-attention-heads", "ffn-hidden-size", "num-query-groups",
              "max-position-embeddings", "vocab-size", "make-vocab-size-divisible-by", "num-experts",
              "moe-router-topk", "moe-ffn-hidden-size", "moe-shared-expert-intermediate-size", "q-lora-rank",
              "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim",
              "kv-channels", "padded-vocab-size", "moe-router-num-groups", "moe-router-group-topk",
              "mtp-num-layers")
    switches = ("group-query-attention", "swiglu", "untie-embeddings-and-output-weights", "disable-bias-linear",
                "multi-latent-attention", "qk-layernorm")
    others = ("normalization", "position-embedding-type", "hidden-dropout", "attention-dropout", "moe-layer-freq",
              "window-size", "window-attn-skip-freq")
    group = parser.add_argument_group(
        "Megatron-LM's model flags", "a pretrain_gpt.py launch line's model: without --model they build it "
        "(Megatron-LM's defaults where a flag is absent; --vocab-size as its tokenizer has it), with --model each "
        "must agree with that model: " + ", ".join(f"--{name}" for name in (*counts, *switches, *others)))
    for name in counts:
        group.add_argument(f"--{name}", type=positive_int, default=None, metavar="N", help=argparse.SUPPRESS)
    for name in switches:
        group.add_argument(f"--{name}", action="store_true", default=False, help=argparse.SUPPRESS)
    group.add_argument("--normalization", choices=["LayerNorm", "RMSNorm"], default=None, help=argparse.SUPPRESS)
    group.add_argument("--position-embedding-type", choices=["learned_absolute", "rope", "none"], default=None,
                       help=argparse.SUPPRESS)
    group.add_argument("--hidden-dropout", type=non_negative_float, default=None, help=argparse.SUPPRESS)
    group.add_argument("--attention-dropout", type=non_negative_float, default=None, help=argparse.SUPPRESS)
    group.add_argument("--moe-layer-freq", default=None, help=argparse.SUPPRESS)
    group.add_argument("--window-size", default=None, help=argparse.SUPPRESS)
    group.add_argument("--window-attn-skip-freq", default=None, help=argparse.SUPPRESS)
    # pretrain_mamba.py's layers: taken so that a pasted line is refused by name, even under --ignore-unknown, which
    # would otherwise drop them and simulate a transformer of the same depth (check_unmodelled)
    for name in MAMBA_FLAGS:
        group.add_argument(f"--{name}", default=None, nargs="?", const=True, help=argparse.SUPPRESS)


def megatron_model_args(args: argparse.Namespace) -> MegatronModelArgs:
    """The model-shape flags as the library's :class:`MegatronModelArgs` (their defaults where not given)."""
    values = {f.name: getattr(args, f.name) for f in fields(MegatronModelArgs)
              if getattr(args, f.name, None) is not None}
    return MegatronModelArgs(**values)
