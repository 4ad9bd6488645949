"""Command line: ``torchrun --nproc-per-node N -m executors.run SCHEDULE [flags]`` runs a schedule for real.

Everything that can be checked without communication (layout, schedule, Program validation, model sizes,
output formats) is checked before ``init_process_group``; failures are one line and exit code 2. A rank
whose instruction raises prints ``rank R (pp rank P) failed at B mb=2 chunk=0 ...`` and exits 1 at once;
torchrun then stops the other ranks, and the 60 s process-group timeout bounds any wait on a dead peer.
Backend: NCCL when CUDA is available, gloo otherwise. ``--p2p`` picks the Program: ``grouped`` (default on
NCCL) is proven deadlock-free under NCCL's grouped point-to-point semantics (pipesim.program.grouped);
``eager`` (default on gloo) is lower()'s, and on NCCL is refused before any communication when not proven
safe, unless ``--allow-unsafe-p2p``.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta

from executors.interpreter import FailMode
from executors.model import ModelConfig
from executors.runtime import OptimizerKind, RunConfig, p2p_lowering, plan
from executors.tp_layers import TPMode
from pipesim.errors import PipesimError
from pipesim.io.timeline import TimelineFormat
from pipesim.program.grouped import P2PLowering
from pipesim.program.ir import Instruction
from pipesim.topology import Topology

_TIMEOUT = timedelta(seconds=60)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="executors.run", description=__doc__.splitlines()[0])
    p.add_argument("schedule", help="built-in name (gpipe, 1f1b, interleaved) or path to a schedule .py")
    for flag in ("--tp", "--cp", "--dp"):
        p.add_argument(flag, type=int, default=1)
    p.add_argument("--pp", type=int, default=None, help="default: world / (tp·cp·dp)")
    p.add_argument("--mb", type=int, default=4, help="microbatches per step")
    p.add_argument("--chunks", type=int, default=None, help="chunks per rank (default: the schedule's)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tp-mode", choices=[m.value for m in TPMode], default=TPMode.ALL_REDUCE.value)
    p.add_argument("--optimizer", choices=[o.value for o in OptimizerKind], default=OptimizerKind.SGD.value)
    p.add_argument("--lr", type=float, default=0.1)
    d = ModelConfig()
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--heads", type=int, default=d.heads)
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--micro-batch-size", type=int, default=d.micro_batch_size)
    p.add_argument("--vocab", type=int, default=d.vocab)
    p.add_argument("--timeline", help="write the measured Timeline (.csv or .parquet)")
    p.add_argument("--trace", help="write a Chrome trace (.json, opens in Perfetto)")
    p.add_argument(
        "--fail-at",
        metavar="RANK:INSTRUCTION",
        help="debugging: make global RANK raise at INSTRUCTION, e.g. '1:B mb=0 chunk=0'",
    )
    p.add_argument(
        "--fail-mode",
        choices=[m.value for m in FailMode],
        default=FailMode.RAISE.value,
        help="with --fail-at: raise an exception, or kill the process (SIGKILL)",
    )
    p.add_argument("--p2p", choices=[m.value for m in P2PLowering], default=None,
                   help="eager: receives just before their consumers, all posted at step start (safe with "
                   "gloo's buffered sends); grouped: the Program proven deadlock-free under NCCL's grouped "
                   "semantics, each run of transfers one batch_isend_irecv. Default: grouped on NCCL, eager on gloo")
    p.add_argument("--allow-unsafe-p2p", action="store_true",
                   help="on NCCL, run a Program that is not proven safe under grouped semantics instead of "
                   "refusing it (it can hang once activations exceed NCCL's eager buffer)")
    return p


def config_from_args(args: argparse.Namespace, world_size: int) -> RunConfig:
    """Turn flags into a RunConfig; one-line PipesimError on nonsense."""
    if min(args.tp, args.cp, args.dp) < 1:
        raise PipesimError("--tp, --cp and --dp must be positive integers")
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
            raise PipesimError(
                f"--fail-at {args.fail_at!r}: expected RANK:INSTRUCTION, e.g. '1:B mb=0 chunk=0'"
            )
        fail_at = (int(rank), Instruction.parse(text))
    for flag, path, allowed in (
        ("--timeline", args.timeline, (TimelineFormat.CSV, TimelineFormat.PARQUET)),
        ("--trace", args.trace, (TimelineFormat.CHROME_TRACE,)),
    ):
        if path and TimelineFormat.of(path, flag) not in allowed:
            raise PipesimError(f"{flag} {path}: use {' or '.join(f.value for f in allowed)}")
    model = ModelConfig(
        args.layers, args.hidden, args.heads, args.seq_len, args.micro_batch_size, args.vocab, args.seed
    )
    for name, value in vars(args).items():
        if (
            name in ("layers", "hidden", "heads", "seq_len", "micro_batch_size", "vocab", "mb", "steps")
            and value < 1
        ):
            raise PipesimError(f"--{name.replace('_', '-')} {value} must be a positive integer")
    return RunConfig(
        schedule=args.schedule,
        topology=Topology(args.tp, args.cp, args.dp, pp),
        microbatches=args.mb,
        chunks=args.chunks,
        steps=args.steps,
        model=model,
        tp_mode=TPMode(args.tp_mode),
        optimizer=OptimizerKind(args.optimizer),
        lr=args.lr,
        fail_at=fail_at,
        fail_mode=FailMode(args.fail_mode),
        p2p=P2PLowering(args.p2p) if args.p2p else None,
        allow_unsafe_p2p=args.allow_unsafe_p2p,
    )


def _cuda() -> bool:
    """NCCL when CUDA is available, gloo otherwise."""
    import torch

    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        cfg = config_from_args(args, world_size)
        program = plan(cfg, world_size, nccl=_cuda())
    except PipesimError as err:
        if rank == 0:  # every rank reaches the same verdict; say it once
            print(f"executors.run: error: {err}", file=sys.stderr, flush=True)
        return 2
    import torch
    import torch.distributed as dist

    from executors.interpreter import InstructionError
    from executors.runtime import execute
    from pipesim.io.timeline import write_timeline

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    cuda = _cuda()
    device = torch.device("cpu")
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size, timeout=_TIMEOUT)
    tokens = cfg.topology.dp * cfg.microbatches * cfg.model.micro_batch_size * cfg.model.seq_len

    def report(step: int, loss: float, seconds: float) -> None:
        print(
            f"step {step}  loss {loss:.5f}  time {seconds * 1e3:8.1f} ms  tokens/s {tokens / seconds:10.0f}",
            flush=True,
        )

    try:
        if rank == 0:
            t = cfg.topology
            print(
                f"{program.name}: tp {t.tp} cp {t.cp} dp {t.dp} pp {t.pp}, {cfg.microbatches} microbatches, "
                f"{program.shape.chunks} chunk(s)/rank, {cfg.tp_mode.value}, {'nccl' if cuda else 'gloo'}, "
                f"p2p {p2p_lowering(cfg, cuda).value}",
                flush=True,
            )
        result = execute(cfg, program, device=device, report=report)
        if rank == 0:
            peaks = ", ".join(
                f"pp{r}: {b / 1024:.1f} KiB" for r, b in enumerate(result.peak_activation_bytes)
            )
            print(f"peak saved activations per pipeline rank: {peaks}", flush=True)
            if cuda:
                print(f"cuda max allocated: {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB", flush=True)
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
