"""Command line: ``torchrun --nproc-per-node N -m executors.run SCHEDULE [flags]`` runs a schedule for real.

Everything that can be checked without communication (flags and their ranges, output paths, layout,
schedule, Program validation, model sizes, ``--fail-at``, the ``--emulate`` costs file) is checked before
``init_process_group``; every rank that finds a problem prints the same line and exits 2. A rank
whose instruction raises prints ``rank R (pp rank P) failed at B mb=2 chunk=0 ...`` and exits 1 at once;
torchrun then stops the other ranks, and the 60 s process-group timeout bounds any wait on a dead peer.
Backend: NCCL when CUDA is available, gloo otherwise. ``--p2p`` picks the Program: ``grouped`` (default on
NCCL) is proven deadlock-free under NCCL's grouped point-to-point semantics (pipesim.program.grouped);
``eager`` (default on gloo) is lower()'s, and on NCCL is refused before any communication when not proven
safe, unless ``--allow-unsafe-p2p``. ``--cp N`` splits each sequence over N ranks (load-balanced chunks,
ring attention: :mod:`executors.ring_attention`, or with ``--cp-comm-type allgather|a2a`` an all-gather of the
keys and values or Ulysses' all-to-alls: :mod:`executors.cp_attention`); ``--seq-len`` must divide by 2·N.
``--moe-experts E`` makes the blocks mixture-of-experts, their experts sharded over ``--ep`` data- (or context-)
parallel ranks (:mod:`executors.moe`).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

# Only torch-free modules at import time: `--help` and a bad flag are answered before torch loads (about a
# CPU-second and a half); executors.runtime and torch are imported once the flags parse.
from executors.config import FailMode, ModelConfig, MoEConfig, OptimizerKind, TPMode
from pipesim.analytic.layout import CpComm
from pipesim.cli.arg_types import layer_list, non_negative_int, positive_float, positive_int
from pipesim.errors import PipesimError
from pipesim.io.atomic import check_output_path
from pipesim.io.timeline import TimelineFormat
from pipesim.program.grouped import P2PLowering
from pipesim.program.ir import Instruction
from pipesim.sim.costs import CostModel
from pipesim.topology import Topology

if TYPE_CHECKING:
    from executors.runtime import RunConfig

_TIMEOUT = timedelta(seconds=60)
EXIT_USAGE = 2
_SCHEDULE = "1f1b"  # the defaults of `pipesim simulate`, so both tools mean the same run by default
_MICROBATCHES = 8


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming ``--help`` (every rank prints the same one, see :func:`main`),
    exit 2; :mod:`executors.torch_runtime` uses it too."""

    def error(self, message: str):  # type: ignore[override]
        raise PipesimError(f"{message} (see python -m {self.prog} --help)")


def add_model_args(group, split_over: str) -> None:
    """The small GPT's sizes, shared with :mod:`executors.torch_runtime` (``split_over``: what its layers are
    split over)."""
    d = ModelConfig()
    for flag, default, what in (
        ("--layers", d.layers, f"transformer blocks, split over {split_over}"),
        ("--hidden", d.hidden, "hidden size h"),
        ("--heads", d.heads, "attention heads (divisible by --tp)"),
        ("--seq-len", d.seq_len, "sequence length in tokens"),
        ("--micro-batch-size", d.micro_batch_size, "sequences per microbatch"),
        ("--vocab", d.vocab, "vocabulary size"),
    ):
        group.add_argument(flag, type=positive_int, default=default, help=f"{what} (default {default})")


def parser() -> argparse.ArgumentParser:
    from pipesim.program.loader import builtin_names

    p = OneLineParser(
        prog="executors.run",
        description="Run a pipeline schedule for real on torch.distributed (gloo on CPU, NCCL on CUDA), "
        "instruction by instruction, the same Program pipesim simulates.",
        epilog="Launch with torchrun: torchrun --nproc-per-node N -m executors.run -s 1f1b --mb 8. "
        "Bad input exits 2 with one line 'executors.run: error: ...' on every rank that finds it.",
    )
    schedule_help = (
        f"built-in name ({', '.join(builtin_names())}), path to a schedule .py file, a PyTorch action .csv or "
        f"program text (pipesim synthesize/lower -o) (default: {_SCHEDULE})"
    )
    p.add_argument("schedule", nargs="?", default=None, metavar="SCHEDULE", help=f"{schedule_help}; same as -s")
    p.add_argument("--schedule", "-s", dest="schedule_flag", default=None, metavar="SCHEDULE", help=schedule_help)
    layout = p.add_argument_group("layout (tp·cp·dp·pp must equal the number of processes torchrun starts)")
    for flag, what in (("--tp", "tensor"), ("--cp", "context"), ("--dp", "data")):
        layout.add_argument(flag, type=positive_int, default=1, help=f"{what}-parallel degree (default 1)")
    layout.add_argument(
        "--ep",
        type=positive_int,
        default=1,
        help="expert-parallel degree, folded over the dp×cp ranks: each EP rank holds E/ep experts "
        "of every MoE layer (needs --moe-experts; divides dp·cp) (default 1)",
    )
    layout.add_argument(
        "--cp-comm-type", choices=[c.value for c in CpComm if c is not CpComm.A2A_P2P], default=CpComm.P2P.value,
        help="with --cp: how the cp ranks exchange keys and values (pipesim simulate's flag, Megatron-LM's): p2p, "
        "a ring; allgather, every rank's K and V gathered, their gradients reduce-scattered; a2a, Ulysses' "
        "all-to-alls (--heads / --tp divisible by --cp) (default p2p)",
    )
    layout.add_argument(
        "--pp", type=positive_int, default=None, help="pipeline ranks (default: world size / (tp·cp·dp))"
    )
    layout.add_argument(
        "--mb",
        type=positive_int,
        default=None,
        help=f"microbatches per optimizer step (default: the order's own for a torch CSV or "
        f"program text, else {_MICROBATCHES}, as pipesim simulate)",
    )
    layout.add_argument(
        "--stage-layers",
        type=layer_list,
        default=None,
        metavar="N,N,...",
        help="layers of each of the pp·v stages, stage 0 first, as pipesim simulate's --stage-layers "
        "(default: even, the first stages taking one more where --layers does not divide)",
    )
    layout.add_argument(
        "--chunks",
        "-v",
        type=positive_int,
        default=None,
        help="model chunks per rank, v (default: the schedule's own, 2 for interleaved)",
    )
    train = p.add_argument_group("training")
    train.add_argument("--steps", type=positive_int, default=3, help="optimizer steps to run (default 3)")
    train.add_argument("--seed", type=non_negative_int, default=0, help="seed of weights and data (default 0)")
    train.add_argument(
        "--tp-mode",
        choices=[m.value for m in TPMode],
        default=TPMode.ALL_REDUCE.value,
        help="TP collectives: Megatron all-reduce, or reduce-scatter = sequence parallel (default all-reduce)",
    )
    train.add_argument(
        "--optimizer",
        choices=[o.value for o in OptimizerKind],
        default=OptimizerKind.SGD.value,
        help="sgd (momentum 0.9) or adamw (weight decay 0.01) (default sgd)",
    )
    train.add_argument("--lr", type=positive_float, default=0.1, help="learning rate, finite and > 0 (default 0.1)")
    add_model_args(p.add_argument_group("model (a small GPT; sizes in elements)"), "the pp·v stages")
    moe = p.add_argument_group("mixture of experts (default: a dense GPT)")
    moe.add_argument(
        "--moe-experts",
        type=positive_int,
        default=None,
        metavar="E",
        help="routed experts per MoE layer; makes the blocks MoE (default: none, dense)",
    )
    moe.add_argument(
        "--moe-top-k", type=positive_int, default=None, metavar="K", help="experts each token is routed to (default 2)"
    )
    moe.add_argument(
        "--moe-ffn-hidden",
        type=positive_int,
        default=None,
        metavar="F",
        help="one expert's inner width (default 2·hidden)",
    )
    moe.add_argument(
        "--moe-shared-experts",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="experts every token goes through, each of width F (default 0)",
    )
    moe.add_argument(
        "--moe-first-dense",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="the first N blocks keep the dense MLP (default 0)",
    )
    p.add_argument(
        "--emulate",
        metavar="COSTS",
        help="costs file (.json/.yaml, as pipesim simulate --costs reads it, durations in seconds): "
        "each compute instruction sleeps its cost instead of computing, while tensors of the real "
        "activation size still cross the real P2P path and TP/DP collectives; transfers take the "
        "file's p2p_latency (+ bytes/bandwidth) at least (default: off, real compute)",
    )
    p.add_argument(
        "--costs",
        metavar="COSTS",
        help="costs file (.json/.yaml) a cost-aware schedule (zb-auto) synthesises its order for, the "
        "one pipesim plan/synthesize used, so every rank builds the same order for the same costs; or "
        "run the order itself: pipesim synthesize -o order.txt, then pass order.txt as SCHEDULE "
        "(default: unit costs)",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads per process (torch.set_num_threads; profile with the same: pipesim profile "
        "--threads) (default: torch's own, all cores)",
    )
    out = p.add_argument_group("outputs (checked before any process group starts)")
    out.add_argument(
        "--print-model-file",
        metavar="FILE.yaml",
        help="write this GPT (the model flags) as a pipesim model file and exit, without running "
        "(pipesim simulate --model FILE.yaml) (default: off, run)",
    )
    out.add_argument(
        "--timeline",
        metavar="FILE",
        help="write the measured Timeline (.csv or .parquet; times in seconds) (default: none)",
    )
    out.add_argument(
        "--trace", metavar="FILE.json", help="write a Chrome trace (.json, opens in Perfetto) (default: none)"
    )
    debug = p.add_argument_group("debugging")
    debug.add_argument(
        "--fail-at",
        metavar="RANK:INSTRUCTION",
        help="make global RANK raise at INSTRUCTION of its program, e.g. '1:B mb=0 chunk=0' (default: none)",
    )
    debug.add_argument(
        "--fail-mode",
        choices=[m.value for m in FailMode],
        default=FailMode.RAISE.value,
        help="with --fail-at: raise an exception, or kill the process with SIGKILL (default raise)",
    )
    comm = p.add_argument_group("point-to-point")
    comm.add_argument(
        "--p2p",
        choices=[m.value for m in P2PLowering],
        default=None,
        help="eager: receives just before their consumers, all posted at step start (safe with "
        "gloo's buffered sends); grouped: the Program proven deadlock-free under NCCL's grouped "
        "semantics, each run of transfers one batch_isend_irecv (default: grouped on NCCL, eager "
        "on gloo)",
    )
    comm.add_argument(
        "--allow-unsafe-p2p",
        action="store_true",
        help="on NCCL, run a Program that is not proven safe under grouped semantics instead of "
        "refusing it; it can hang once activations exceed NCCL's eager buffer (default: off)",
    )
    return p


def _schedule_of(args: argparse.Namespace) -> str:
    """The positional SCHEDULE (README form) and ``--schedule/-s`` (pipesim's) name the same thing."""
    if args.schedule and args.schedule_flag and args.schedule != args.schedule_flag:
        raise PipesimError(f"two schedules given ({args.schedule!r} and --schedule {args.schedule_flag!r}); give one")
    return args.schedule or args.schedule_flag or _SCHEDULE


def check_local(args: argparse.Namespace) -> None:
    """Checks of the flags alone, no communication and no schedule: output paths, formats."""
    for flag, path, allowed in (
        ("--timeline", args.timeline, (TimelineFormat.CSV, TimelineFormat.PARQUET)),
        ("--trace", args.trace, (TimelineFormat.CHROME_TRACE,)),
    ):
        if path is None:
            continue
        check_output_path(path, flag)
        if TimelineFormat.of(path, flag) not in allowed:
            raise PipesimError(f"{flag} {path}: use {' or '.join(f.value for f in allowed)}")


def config_from_args(args: argparse.Namespace, world_size: int) -> RunConfig:
    """Turn flags into a RunConfig; one-line PipesimError on nonsense."""
    from executors.runtime import RunConfig

    check_local(args)
    inner = args.tp * args.cp * args.dp
    if args.pp is None and world_size % inner:
        raise PipesimError(
            f"world size {world_size} is not divisible by tp·cp·dp = {args.tp}·{args.cp}·{args.dp} = {inner};"
            f" launch a multiple of {inner} processes or change --tp/--cp/--dp"
        )
    pp = args.pp if args.pp is not None else max(world_size // inner, 1)
    fail_at = None
    if args.fail_at:
        rank, sep, text = args.fail_at.partition(":")
        if not sep or not rank.strip().isdigit():
            raise PipesimError(f"--fail-at {args.fail_at!r}: expected RANK:INSTRUCTION, e.g. '1:B mb=0 chunk=0'")
        fail_at = (int(rank), Instruction.parse(text))
    emulate = CostModel.load(args.emulate) if args.emulate else None
    costs = CostModel.load(args.costs) if args.costs else None
    model = model_config(args)
    return RunConfig(
        schedule=_schedule_of(args),
        topology=Topology(args.tp, args.cp, args.dp, pp, ep=args.ep),
        microbatches=args.mb,
        chunks=args.chunks,
        steps=args.steps,
        model=model,
        tp_mode=TPMode(args.tp_mode),
        optimizer=OptimizerKind(args.optimizer),
        lr=args.lr,
        fail_at=fail_at,
        fail_mode=FailMode(args.fail_mode),
        emulate=emulate,
        costs=costs,
        p2p=P2PLowering(args.p2p) if args.p2p else None,
        allow_unsafe_p2p=args.allow_unsafe_p2p,
        cp_comm=CpComm(args.cp_comm_type),
    )


_MOE_FLAGS = ("moe_top_k", "moe_ffn_hidden", "moe_shared_experts", "moe_first_dense")


def model_config(args: argparse.Namespace) -> ModelConfig:
    """The model flags as a ModelConfig; MoE flags without ``--moe-experts`` are refused."""
    moe = None
    if args.moe_experts is not None:
        moe = MoEConfig(
            args.moe_experts,
            2 if args.moe_top_k is None else args.moe_top_k,
            2 * args.hidden if args.moe_ffn_hidden is None else args.moe_ffn_hidden,
            args.moe_shared_experts or 0,
            args.moe_first_dense or 0,
        )
    else:
        given = [name for name in _MOE_FLAGS if getattr(args, name) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise PipesimError(f"{flag} describes MoE layers, but the model is dense; add --moe-experts E")
    return ModelConfig(
        args.layers, args.hidden, args.heads, args.seq_len, args.micro_batch_size, args.vocab, args.seed,
        stage_layers=args.stage_layers, moe=moe,
    )


def write_model_file(args: argparse.Namespace) -> int:
    """``--print-model-file``: the model flags as a pipesim model file (rank 0 writes; atomic)."""
    import yaml

    from executors.config import model_file_dict
    from pipesim.io.atomic import write_text_atomic

    check_output_path(args.print_model_file, "--print-model-file")
    if not args.print_model_file.lower().endswith((".yaml", ".yml")):
        raise PipesimError(f"--print-model-file {args.print_model_file}: use a .yaml file")
    cfg = model_config(args)
    cfg.check(1, TPMode.ALL_REDUCE)
    if int(os.environ.get("RANK", "0")) == 0:
        write_text_atomic(args.print_model_file, yaml.safe_dump(model_file_dict(cfg), sort_keys=False))
        print(f"wrote {args.print_model_file}")
    return 0


def _cuda() -> bool:
    """NCCL when CUDA is available, gloo otherwise."""
    import torch

    return torch.cuda.is_available()


def emulation_report(program, costs: CostModel, measured) -> str:
    """Predicted (the simulator, same costs) against the measured last step, in one line."""
    from pipesim.analysis.overlay import one_step, overlay_errors
    from pipesim.sim.simulator import simulate

    predicted = simulate(program, costs, check=False).timeline
    return overlay_errors(one_step(predicted), one_step(measured)).text()


def main(argv: list[str] | None = None) -> int:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        args = parser().parse_args(argv)
        if args.print_model_file:
            return write_model_file(args)
        cfg = config_from_args(args, world_size)
        from executors.runtime import plan

        program = plan(cfg, world_size, nccl=_cuda())
    except PipesimError as err:
        # Every rank reaches the same verdict from the same flags and prints the same line: whichever rank
        # torchrun lets finish first, the line is on stderr (torchrun then adds its own failure report).
        print(f"executors.run: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    import torch
    import torch.distributed as dist

    from executors.interpreter import InstructionError

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    from executors.runtime import execute, p2p_lowering
    from pipesim.io.timeline import write_timeline

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    cuda = _cuda()
    device = torch.device("cpu")
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size, timeout=_TIMEOUT)
    tokens = cfg.topology.dp * program.shape.microbatches * cfg.model.micro_batch_size * cfg.model.seq_len

    emulated = cfg.emulate is not None

    def report(step: int, loss: float, seconds: float) -> None:
        shown = "n/a (emulated)" if emulated else f"{loss:.5f}"
        print(
            f"step {step}  loss {shown}  time {seconds * 1e3:8.1f} ms  tokens/s {tokens / seconds:10.0f}",
            flush=True,
        )

    try:
        if rank == 0:
            t = cfg.topology
            print(
                f"{program.name}: tp {t.tp} cp {t.cp} dp {t.dp} pp {t.pp}, {program.shape.microbatches} microbatches, "
                f"{program.shape.chunks} chunk(s)/rank, {cfg.tp_mode.value}, {'nccl' if cuda else 'gloo'}, "
                f"p2p {p2p_lowering(cfg, cuda).value}"
                + (f", MoE {m.experts} experts top-{m.top_k} over ep {t.ep}" if (m := cfg.model.moe) else "")
                + (f", compute emulated from {args.emulate}" if emulated else ""),
                flush=True,
            )
        result = execute(cfg, program, device=device, report=report)
        if rank == 0 and emulated:
            print(f"last step against pipesim simulate: {emulation_report(program, cfg.emulate, result.timeline)}")
        elif rank == 0:
            peaks = ", ".join(f"pp{r}: {b / 1024:.1f} KiB" for r, b in enumerate(result.peak_activation_bytes))
            print(f"peak saved activations per pipeline rank: {peaks}", flush=True)
            if cuda:
                # both: pipesim predicts what is allocated; frameworks and nvidia-smi show what the caching
                # allocator holds (reserved), which its fragmentation puts above it
                print(f"cuda max allocated: {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB, max reserved: "
                      f"{torch.cuda.max_memory_reserved() / 2**20:.1f} MiB", flush=True)
        if rank == 0:  # emulated or not: the measured timeline is written when asked
            if args.timeline:
                write_timeline(result.timeline, args.timeline)
            if args.trace:
                write_timeline(result.timeline, args.trace, "--trace")
        dist.barrier()
        dist.destroy_process_group()
    except InstructionError as err:
        print(str(err), file=sys.stderr, flush=True)
        os._exit(1)  # do not linger in teardown with peers blocked on us; torchrun stops the rest
    except Exception as err:  # a peer died, a timeout, an I/O error: one line, naming this rank
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"rank {rank} failed: {type(err).__name__}: {first}", file=sys.stderr, flush=True)
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
