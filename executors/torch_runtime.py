"""pipesim's orders trained by PyTorch's own pipelining runtime, around pipesim's own stage modules.

``torchrun --nproc-per-node N -m executors.torch_runtime ORDER.csv`` loads a PyTorch action CSV (what
``pipesim export`` / ``pipesim synthesize -o order.csv`` write) into
``torch.distributed.pipelining.schedules._PipelineScheduleRuntime`` — the class torchtitan instantiates for
``[parallelism] pipeline_parallel_schedule_csv`` — wraps each of this rank's :class:`~executors.model.GPTStage`
modules (the executor's, same seed, so the same parameters) in a ``PipelineStage`` and lets PyTorch's
runtime run the steps: its lowering adds the sends, receives and gradient reductions to a compute-only CSV,
its ``PipelineStage`` does the forward, the fused backward ``B`` and the split ``I``/``W``, and it scales the
gradients by the microbatch count at ``REDUCE_GRAD`` (the loss here is each microbatch's mean, as in
pipesim's executor, which instead divides each microbatch loss by the count: same gradients).

What torch requires of the CSV and which pipesim orders it takes: :mod:`pipesim.io.torch_runtime_rules`
(checked here before any process group starts) and docs/torch-runtime.md. Pure pipeline parallelism only:
tp = cp = dp = 1, one process per pipeline rank.

The library part is :func:`plan` (every check that needs no communication), :func:`build_stages`,
:func:`load_schedule_runtime` and :func:`execute`; :func:`run_orders` is the test harness's entry, which
runs several orders in one spawned world.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from executors.config import ModelConfig, OptimizerKind
from pipesim.errors import PipesimError
from pipesim.io.torch_csv import CsvFormat, ImportedCsv, import_rows, read_csv_file
from pipesim.io.torch_runtime_rules import check_torch_runtime_order

_TIMEOUT = timedelta(seconds=60)
EXIT_USAGE = 2


@dataclass(frozen=True)
class TorchRunConfig:
    """One run of an order file in PyTorch's runtime."""

    order: str  # path of a PyTorch action CSV
    fmt: CsvFormat = CsvFormat.COMPUTE_ONLY  # how torch loads it: lowered by torch, or comms as written
    model: ModelConfig = field(default_factory=ModelConfig)
    steps: int = 2
    optimizer: OptimizerKind = OptimizerKind.SGD
    lr: float = 0.1
    capture: bool = False  # gather full gradients and parameters to rank 0 (tests)


@dataclass
class TorchRunResult:
    """Rank 0's view of a run (other ranks: losses only); the fields the reference comparison reads."""

    losses: list[float] = field(default_factory=list)  # per step, the batch mean
    full_grads: list[dict] = field(default_factory=list)  # per step, rank 0 only, with capture
    full_params: dict | None = None  # after the last step, rank 0 only, with capture


def plan(cfg: TorchRunConfig, world_size: int) -> ImportedCsv:
    """Every check that needs no process group; a one-line PipesimError naming the input and the fix."""
    from executors.runtime import check_layers
    from executors.tp_layers import TPMode
    from pipesim.program.validate import validate

    path = Path(cfg.order)
    rows = read_csv_file(path)
    imported = import_rows(rows, source=f"torch CSV {path}", name=path.stem)
    if imported.format is not cfg.fmt:
        raise PipesimError(
            f"torch CSV {path} is {imported.format.value}, but --format {cfg.fmt.value} was asked; pass "
            f"--format {imported.format.value}"
        )
    shape = imported.program.shape
    if world_size != shape.pp:
        raise PipesimError(
            f"torch CSV {path} has {shape.pp} pipeline ranks (rows), but {world_size} processes were started; "
            f"launch torchrun --nproc-per-node {shape.pp} (this runner is pipeline-parallel only)"
        )
    validate(imported.program)  # pipesim's own proof first: complete, ordered, deadlock-free
    check_torch_runtime_order(rows, cfg.fmt, source=f"torch CSV {path}")
    cfg.model.check(1, TPMode.ALL_REDUCE)
    check_layers(cfg.model, imported.program)
    return imported


def token_loss(logits, targets):
    """The loss torch's runtime applies on the last stage: mean cross-entropy of one microbatch.

    ``logits`` is the stage output ``[s, b, vocab]`` (sequence first, the executor's layout), ``targets`` the
    microbatch's ``[b, s]`` slice of the batch (torch splits the targets along dim 0).
    """
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.t().reshape(-1))


def build_stages(ctx, imported: ImportedCsv, model: ModelConfig, device):
    """This rank's GPTStages (one per chunk, the executor's modules) and a PipelineStage around each.

    Returns ``(modules, stages)``, both ordered by chunk. The weights come from ``init_full_weights(seed)``,
    so every run — this one, pipesim's executor, the single-process reference — starts from the same ones.
    """
    from torch.distributed.pipelining import PipelineStage

    from executors.model import GPTStage, init_full_weights
    from executors.tp_layers import TPMode

    shape = imported.program.shape
    full = init_full_weights(model)
    modules, stages = [], []
    for chunk in range(shape.chunks):
        index = shape.stage(ctx.pp_rank, chunk)
        # tp = 1: a GPTStage's TP layers run on a group of one, i.e. plain linears. No weight-gradient store:
        # torch's PipelineStage splits I and W itself (autograd on the stage inputs, then on the weights).
        module = GPTStage(model, index, shape.num_stages, chunk, full, ctx.tp_group, TPMode.ALL_REDUCE).to(device)
        modules.append(module)
        # No example tensors: shapes are inferred on the first step from real data, as torchtitan's do.
        stages.append(PipelineStage(module, index, shape.num_stages, device, group=ctx.pp_group))
    return modules, stages


def load_schedule_runtime(stages, order: str, fmt: CsvFormat, microbatches: int):
    """``_PipelineScheduleRuntime`` over ``stages`` with the order file loaded, as torchtitan builds it."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    schedule = _PipelineScheduleRuntime(stages, n_microbatches=microbatches, loss_fn=token_loss)
    schedule._load_csv(order, format=fmt.value)
    return schedule


def execute(cfg: TorchRunConfig, imported: ImportedCsv, *, device=None) -> TorchRunResult:
    """Run ``cfg.steps`` optimizer steps of the order in PyTorch's runtime on the initialised process group."""
    import torch
    import torch.distributed as dist

    from executors.model import synthetic_batch
    from executors.parallel_context import ParallelContext
    from executors.runtime import gather_full_state
    from executors.tp_layers import shard_spec
    from pipesim.topology import Topology

    device = device or torch.device("cpu")
    shape = imported.program.shape
    ctx = ParallelContext.create(Topology(pp=shape.pp))
    modules, stages = build_stages(ctx, imported, cfg.model, device)
    schedule = load_schedule_runtime(stages, cfg.order, cfg.fmt, shape.microbatches)
    params = [p for m in modules for p in m.parameters()]
    if cfg.optimizer is OptimizerKind.SGD:
        optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01, foreach=False)
    has_first = any(s.is_first for s in stages)
    has_last = any(s.is_last for s in stages)
    result = TorchRunResult()
    batch = shape.microbatches * cfg.model.micro_batch_size
    for step in range(cfg.steps):
        tokens, targets = synthetic_batch(cfg.model, step, batch)
        optimizer.zero_grad(set_to_none=True)
        losses: list = []
        # The rank holding stage 0 feeds the tokens, the one holding the last stage the targets (rank 0 for
        # both under V placement); torch splits both along dim 0 into the microbatches, in order.
        args = (tokens.to(device),) if has_first else ()
        schedule.step(*args, target=targets.to(device) if has_last else None, losses=losses)
        loss = float(torch.stack([x.detach() for x in losses]).mean()) if has_last else 0.0
        total = torch.tensor([loss], dtype=torch.float64, device=device)
        dist.all_reduce(total)  # only the last stage's rank contributes
        result.losses.append(float(total))
        if cfg.capture:
            grads = {shard_spec(p).name: p.grad for p in params}
            missing = [n for n, g in grads.items() if g is None]
            if missing:
                raise RuntimeError(f"torch's runtime left no gradient on {missing[:3]}")
            result.full_grads.append(gather_full_state(ctx, params, grads))
        optimizer.step()
    if cfg.capture:
        result.full_params = gather_full_state(ctx, params, {shard_spec(p).name: p.detach() for p in params})
    return result


def run_orders(rank: int, world_size: int, configs: list[TorchRunConfig], executor_configs=()) -> list | None:
    """Harness entry (:func:`executors.harness.spawn`): several orders in one world, then, optionally, pipesim's
    executor on ``executor_configs`` in the same world; results on rank 0, ``None`` elsewhere."""
    from executors.runtime import run_configs

    torch_results = [execute(cfg, plan(cfg, world_size)) for cfg in configs]
    executor_results = run_configs(rank, world_size, list(executor_configs))
    return (torch_results, executor_results) if rank == 0 else None


# --- command line ---------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    from executors.run import OneLineParser, add_model_args
    from pipesim.cli.arg_types import non_negative_int, positive_float, positive_int

    p = OneLineParser(
        prog="executors.torch_runtime",
        description="Train pipesim's GPT with PyTorch's own pipelining runtime (_PipelineScheduleRuntime, what "
        "torchtitan's pipeline_parallel_schedule_csv loads) running an order from pipesim export/synthesize.",
        epilog="Launch with torchrun, one process per CSV row: torchrun --nproc-per-node 2 -m "
        "executors.torch_runtime order.csv. Bad input exits 2 with one line on every rank.",
    )
    p.add_argument("order", metavar="ORDER.csv", help="PyTorch action CSV (pipesim export -o / synthesize -o)")
    p.add_argument(
        "--format",
        choices=[f.value for f in CsvFormat],
        default=CsvFormat.COMPUTE_ONLY.value,
        help="compute_only: torch adds the communication (what torchtitan loads); compute_comms: the "
        "CSV's own sends/receives (pipesim export --with-comms) (default compute_only)",
    )
    p.add_argument("--steps", type=positive_int, default=3, help="optimizer steps (default 3)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of weights and data (default 0)")
    p.add_argument(
        "--optimizer",
        choices=[o.value for o in OptimizerKind],
        default=OptimizerKind.SGD.value,
        help="sgd (momentum 0.9) or adamw (default sgd)",
    )
    p.add_argument("--lr", type=positive_float, default=0.1, help="learning rate (default 0.1)")
    add_model_args(p, "the CSV's stages")
    return p


def config_from_args(args: argparse.Namespace) -> TorchRunConfig:
    model = ModelConfig(
        args.layers, args.hidden, args.heads, args.seq_len, args.micro_batch_size, args.vocab, args.seed
    )
    return TorchRunConfig(args.order, CsvFormat(args.format), model, args.steps, OptimizerKind(args.optimizer), args.lr)


def main(argv: list[str] | None = None) -> int:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        cfg = config_from_args(parser().parse_args(argv))
        imported = plan(cfg, world_size)
    except PipesimError as err:
        print(f"executors.torch_runtime: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size, timeout=_TIMEOUT)
    shape = imported.program.shape
    try:
        if rank == 0:
            print(
                f"{cfg.order}: PyTorch _PipelineScheduleRuntime ({cfg.fmt.value}), pp {shape.pp}, "
                f"{shape.microbatches} microbatches, {shape.chunks} stage(s)/rank, {shape.placement.value} "
                f"placement, {'nccl' if cuda else 'gloo'}",
                flush=True,
            )
        result = execute(cfg, imported, device=device)
        if rank == 0:
            for step, loss in enumerate(result.losses):
                print(f"step {step}  loss {loss:.5f}", flush=True)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as err:  # a peer died, torch's runtime raised: one line, naming this rank
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"rank {rank} failed: {type(err).__name__}: {first}", file=sys.stderr, flush=True)
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
