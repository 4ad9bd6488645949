"""One training run on an initialised process group: build Program, context, stages, and step them.

Shared by ``executors.run`` (torchrun) and ``executors.harness`` (tests): :func:`plan` is everything that
can fail before communication (layout, schedule, validation, model sizes); :func:`execute` needs the
process group. Also the single-process reference run the tests compare against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.distributed as dist

from executors.compute import TorchCompute
from executors.config import FailMode, OptimizerKind, TPMode
from executors.cp_attention import context_parallel
from executors.emulation import (
    EmulatedCompute,
    EmulatedStream,
    EmulatedTransport,
    Sleeper,
    StreamClock,
    check_emulation_costs,
    row_durations,
)
from executors.interpreter import Interpreter
from executors.mirror_grads import MirrorCopies
from executors.model import (
    GPTStage,
    ModelConfig,
    ReferenceGPT,
    init_full_weights,
    layers_of_stage,
    synthetic_batch,
)
from executors.moe import is_expert
from executors.moe_compute import MoECompute
from executors.parallel_context import ParallelContext
from executors.recorder import ActivationMeter, CpuClock, CudaClock, TimelineRecorder
from executors.ring_attention import GroupRing, local_positions, split_sequence
from executors.tp_layers import shard_spec
from executors.transport import RecvPolicy, transport_for
from pipesim.analytic.layout import CpComm
from pipesim.errors import DeadlockError, PipesimError
from pipesim.program.build import DEFAULT_MICROBATCHES
from pipesim.program.grouped import P2PLowering, grouped_program
from pipesim.program.ir import Instruction, Program
from pipesim.program.loader import load_schedule
from pipesim.program.lowering import lower
from pipesim.program.validate import CommSemantics, validate
from pipesim.sim.costs import CostModel
from pipesim.topology import Topology


@dataclass(frozen=True)
class RunConfig:
    schedule: str = "1f1b"
    topology: Topology = field(default_factory=lambda: Topology(pp=2))
    microbatches: int | None = 4  # None: the schedule's own (a torch CSV fixes it), else 8 as pipesim simulate
    chunks: int | None = None  # None: the schedule's default
    steps: int = 2
    model: ModelConfig = field(default_factory=ModelConfig)
    tp_mode: TPMode = TPMode.ALL_REDUCE
    optimizer: OptimizerKind = OptimizerKind.SGD
    lr: float = 0.1
    fail_at: tuple[int, Instruction] | None = None  # (global rank, instruction) that fails on purpose
    fail_mode: FailMode = FailMode.RAISE
    recv_policy: RecvPolicy | None = None  # None: GROUPED on NCCL or with p2p GROUPED, else EAGER
    p2p: P2PLowering | None = None  # which Program runs; None: GROUPED on NCCL, EAGER on gloo
    allow_unsafe_p2p: bool = False  # run on NCCL a Program not proven safe under grouped semantics
    emulate: CostModel | None = None  # sleep each compute instruction's cost instead of computing
    # The costs a cost-aware schedule (zb-auto) synthesises its order for, e.g. those `pipesim plan` used; None:
    # the schedule's own default (unit costs).
    costs: CostModel | None = None
    capture: bool = False  # gather full gradients and parameters to rank 0 (tests)
    cp_comm: CpComm = CpComm.P2P  # how the cp ranks exchange keys and values (executors.cp_attention)


def plan(cfg: RunConfig, world_size: int, *, nccl: bool = False) -> Program:
    """Every check that needs no communication; raises PipesimError with a one-line message.

    On NCCL a Program not proven deadlock-free under grouped point-to-point semantics is refused here,
    before any communication, unless ``cfg.allow_unsafe_p2p``: it may hang once activations exceed NCCL's
    eager buffer (:mod:`pipesim.program.grouped`).
    """
    cfg.topology.check_world(world_size)
    cfg.model.check(cfg.topology.tp, cfg.tp_mode, cfg.topology.cp, cfg.cp_comm)
    _check_moe(cfg)
    source = load_schedule(cfg.schedule)
    costs = cfg.costs
    if cfg.costs is not None and "costs" not in source.build_options:
        raise PipesimError(f"--costs is for schedules that synthesise their order for costs (zb-auto); "
                           f"{source.name} has a fixed order: drop --costs")
    program = lower(source.build(cfg.topology.pp, resolved_microbatches(cfg, source), cfg.chunks, costs=costs))
    validate(program)
    check_layers(cfg.model, program)
    if p2p_lowering(cfg, nccl) is P2PLowering.GROUPED:
        program = grouped_program(program)
    elif nccl and not cfg.allow_unsafe_p2p:
        try:
            validate(program, CommSemantics.GROUPED)
        except DeadlockError as err:
            raise PipesimError(
                f"refusing to run {program.name} with --p2p eager on NCCL: it can hang once activations exceed "
                f"NCCL's eager buffer ({err}); use --p2p grouped, or --allow-unsafe-p2p to run it anyway"
            ) from None
    if cfg.fail_at is not None:
        _check_fail_at(cfg, program, world_size)
    if cfg.emulate is not None:
        check_emulation_costs(cfg.emulate, program)
    return program


def _check_moe(cfg: RunConfig) -> None:
    """MoE runs: the layer's own limits, and the runtime paths it does not take."""
    moe = cfg.model.moe
    if moe is None:
        if cfg.topology.ep > 1:
            raise PipesimError(f"--ep {cfg.topology.ep} shards experts, but the model is dense; add --moe-experts")
        return
    moe.check(cfg.model.layers, cfg.topology)
    if cfg.emulate is not None:
        raise PipesimError("--emulate does not model MoE layers (no all-to-all is emulated); drop --emulate or "
                           "--moe-experts")


def resolved_microbatches(cfg: RunConfig, source) -> int:
    """``--mb`` as given; else the schedule's own (a torch CSV or program text fixes it), else 8."""
    if cfg.microbatches is not None:
        return cfg.microbatches
    fixed = source.fixed_shape
    return fixed.microbatches if fixed is not None else DEFAULT_MICROBATCHES


def check_layers(model: ModelConfig, program: Program) -> None:
    """Every pipeline rank must hold some parameters: a rank whose stages all get no transformer block (and
    that holds neither the embedding nor the head) would build an optimizer over nothing."""
    shape = program.shape
    stages = shape.num_slices  # the model's slices (DualPipe's two copies share them)
    for rank in range(shape.pp):
        mine = shape.rank_slices(rank)
        if any(s in (0, stages - 1) for s in mine):
            continue
        if sum(len(layers_of_stage(model, s, stages)) for s in mine) == 0:
            raise PipesimError(
                f"--layers {model.layers} leaves pipeline rank {rank} without a transformer block: the model is "
                f"split over pp·v = {shape.pp}·{shape.chunks} = {stages} stages; use --layers {stages} or more, "
                "or fewer pipeline ranks (--pp) or chunks"
            )


def _check_fail_at(cfg: RunConfig, program: Program, world_size: int) -> None:
    """``--fail-at`` must name a rank of this world and an instruction that rank really executes."""
    rank, instruction = cfg.fail_at
    if rank >= world_size:
        raise PipesimError(f"--fail-at names rank {rank}, but this world has ranks 0..{world_size - 1}")
    pp_rank = cfg.topology.coordinates(rank).pp
    if instruction not in program.ranks[pp_rank]:
        raise PipesimError(
            f"--fail-at: rank {rank} (pp rank {pp_rank}) never executes '{instruction}'; name one of its "
            f"instructions, e.g. '{rank}:{program.ranks[pp_rank][0]}' (see pipesim lower)"
        )


def p2p_lowering(cfg: RunConfig, nccl: bool) -> P2PLowering:
    """The Program a run executes: as asked, else grouped on NCCL and eager on gloo."""
    return cfg.p2p or (P2PLowering.GROUPED if nccl else P2PLowering.EAGER)


@dataclass
class RankResult:
    """What one rank brings home; the ``full_*`` fields are filled on global rank 0 only."""

    rank: int
    losses: list[float] = field(default_factory=list)  # per step, the global batch mean
    step_times: list[float] = field(default_factory=list)  # per step, max over ranks
    timeline: pd.DataFrame | None = None  # merged over pipeline ranks (replica tp=cp=dp=0), rank 0 only
    peak_activation_bytes: list[int] | None = None  # per pipeline rank, rank 0 only
    bytes_per_forward: list[int] | None = None  # per pipeline rank: largest single forward's saved bytes
    memory_curves: list[list[tuple[float, int]]] | None = None  # per pipeline rank: (seconds, bytes held)
    # per stage: (bytes one forward saves, bytes its split backward's I keeps for W), rank 0 only
    saved_bytes_by_stage: dict[int, tuple[int, int]] | None = None
    full_grads: list[dict[str, torch.Tensor]] = field(default_factory=list)  # per step
    full_params: dict[str, torch.Tensor] | None = None  # after the last step
    # DualPipe with capture: the largest gap between a parameter and its other copy after the last step
    copy_difference: float | None = None
    instructions: int = 0


def execute(
    cfg: RunConfig, program: Program, *, device: torch.device | None = None, report=None
) -> RankResult:
    """Run ``cfg.steps`` steps of ``program`` on the initialised default process group."""
    device = device or torch.device("cpu")
    shape, mcfg = program.shape, cfg.model
    dual = shape.pipelines > 1  # DualPipe: two copies of the model, summed over the mirror pair at STEP
    ctx = ParallelContext.create(cfg.topology, mirror=dual)
    full = init_full_weights(mcfg)
    cp, cp_rank = cfg.topology.cp, ctx.coords.cp
    # Context parallelism: one exchange per cp group, shared by every attention layer of this rank (each
    # layer's forward and backward use it in turn, in the same order on every cp rank: they run the same Program).
    exchange = (context_parallel(cfg.cp_comm, ctx.cp_group, GroupRing(ctx.cp_group) if cfg.cp_comm is CpComm.P2P
                                 else None) if cp > 1 else None)
    positions = local_positions(cp_rank, cp, mcfg.seq_len).to(device) if cp > 1 else None
    # Each chunk is a model slice; under DualPipe chunk 1 is a copy of slice pp−1−r, built from the same full
    # weights as the mirror rank's chunk 0, so the two copies start equal.
    slices = shape.rank_slices(ctx.pp_rank)
    stages = {
        chunk: GPTStage(
            mcfg, slices[chunk], shape.num_slices, chunk, full, ctx.tp_group, cfg.tp_mode,
            exchange, positions, ctx.ep_group,
        ).to(device)
        for chunk in range(shape.chunks)
    }
    params = [p for m in stages.values() for p in m.parameters()]
    mirror = None
    if dual:
        mirror = MirrorCopies(ctx.mirror_group, {slices[c]: list(m.parameters()) for c, m in stages.items()})
    if cfg.optimizer is OptimizerKind.SGD:
        optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01, foreach=False)
    seq_local = mcfg.seq_len // cp
    seq_local = seq_local // ctx.tp if cfg.tp_mode is TPMode.REDUCE_SCATTER else seq_local
    act_shape = (seq_local, mcfg.micro_batch_size, mcfg.hidden)
    emulated = cfg.emulate is not None
    # Real runs time the device (CUDA events) when there is one; emulation times its emulated stream.
    clock = CudaClock() if device.type == "cuda" and not emulated else CpuClock()
    stream = EmulatedStream(Sleeper()) if emulated else None
    if stream is not None:
        clock = StreamClock(stream, clock.origin)
    recorder = TimelineRecorder(program, ctx.pp_rank, clock)
    if exchange is not None:
        exchange.log = recorder
    meter = ActivationMeter(params)
    fail_at = cfg.fail_at[1] if cfg.fail_at and cfg.fail_at[0] == ctx.rank else None
    policy = cfg.recv_policy or recv_policy_for(cfg, dist.get_backend() == "nccl")
    transport = transport_for(policy, act_shape, device)
    if emulated:
        durations = row_durations(program, cfg.emulate, ctx.pp_rank)
        transport = EmulatedTransport(transport, durations, stream)
        compute = EmulatedCompute(
            ctx, stages, durations, act_shape, stream,
            device=device, shape=shape, tp_mode=cfg.tp_mode,
        )
    else:
        compute = (MoECompute if mcfg.moe else TorchCompute)(
            ctx, stages, optimizer, meter, microbatches=shape.microbatches, shape=shape, mirror=mirror
        )
    interpreter = Interpreter(
        program, ctx, compute, transport, recorder, meter, fail_at=fail_at, fail_mode=cfg.fail_mode
    )
    result = RankResult(ctx.rank, instructions=len(program.ranks[ctx.pp_rank]))
    m, mbs, dp = shape.microbatches, mcfg.micro_batch_size, cfg.topology.dp
    # Holds a pipeline's last stage, so a share of the loss: rank 0 under V placement, ranks pp−1 and 0 under
    # DualPipe's two pipelines (each the sum of its microbatches' losses / m, so the two add up to the mean).
    last = any(shape.is_last_stage(shape.stage(ctx.pp_rank, c)) for c in range(shape.chunks))
    for step in range(cfg.steps):
        tokens, targets = synthetic_batch(mcfg, step, dp * m * mbs)
        rows = [slice((ctx.coords.dp * m + mb) * mbs, (ctx.coords.dp * m + mb + 1) * mbs) for mb in range(m)]

        def share(batch, r):  # this cp rank's load-balanced tokens of the microbatch
            return split_sequence(batch[r], cp_rank, cp, dim=1).to(device)

        t0 = time.perf_counter()
        out = interpreter.run_step(step, [share(tokens, r) for r in rows], [share(targets, r) for r in rows])
        elapsed = time.perf_counter() - t0
        # Outside the timed region: the loss lives on the last stage; each TP replica holds the same value,
        # each cp rank the mean over its (equally many) tokens, so the batch mean is the mean over dp×cp.
        loss = out.loss if (last and ctx.tp_rank == 0) else 0.0
        stats = torch.tensor([loss / (dp * cp), elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(stats[:1])
        dist.all_reduce(stats[1:], op=dist.ReduceOp.MAX)
        result.losses.append(float(stats[0]))
        result.step_times.append(float(stats[1]))
        if report is not None and ctx.rank == 0:
            report(step, result.losses[-1], result.step_times[-1])
        if cfg.capture:
            grads = {shard_spec(p).name: p.grad for p in params}
            assert all(g is not None for g in grads.values()), [n for n, g in grads.items() if g is None]
            result.full_grads.append(gather_full_state(ctx, params, grads, dual_copy=dual))
    transport.close()
    if cfg.capture and mirror is not None:
        gap = torch.tensor([mirror.difference()], dtype=torch.float64, device=device)
        dist.all_reduce(gap, op=dist.ReduceOp.MAX)
        result.copy_difference = float(gap)
    if cfg.capture:
        result.full_params = gather_full_state(ctx, params, {shard_spec(p).name: p.detach() for p in params},
                                               dual_copy=dual)
    # Merge the measured timeline and memory peaks of one replica (tp=cp=dp=0) of every pipeline rank.
    replica0 = ctx.coords.tp == 0 and ctx.coords.cp == 0 and ctx.coords.dp == 0
    curve = list(zip(clock.resolve([t for t, _ in meter.curve]), [b for _, b in meter.curve], strict=True))
    by_stage: dict[int, tuple[int, int]] = {}
    for (mb, stage), nbytes in meter.per_forward.items():
        kept = meter.per_weight.get((mb, stage), 0)
        old = by_stage.get(stage, (0, 0))
        by_stage[stage] = (max(old[0], nbytes), max(old[1], kept))
    mine = (
        (recorder.frame(), meter.peak, max(meter.per_forward.values(), default=0), curve, by_stage)
        if replica0
        else None
    )
    gathered = [None] * dist.get_world_size() if ctx.rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    if ctx.rank == 0:
        parts = sorted((g for g in gathered if g is not None), key=lambda g: int(g[0]["rank"].iloc[0]))
        result.timeline = pd.concat([g[0] for g in parts], ignore_index=True)
        result.peak_activation_bytes = [g[1] for g in parts]
        result.bytes_per_forward = [g[2] for g in parts]
        result.memory_curves = [g[3] for g in parts]
        result.saved_bytes_by_stage = {s: v for g in parts for s, v in g[4].items()}
    return result


def recv_policy_for(cfg: RunConfig, nccl: bool) -> RecvPolicy:
    """NCCL always issues groups; gloo does too for the grouped Program, so gloo can test what NCCL runs."""
    grouped = nccl or p2p_lowering(cfg, nccl) is P2PLowering.GROUPED
    return RecvPolicy.GROUPED if grouped else RecvPolicy.EAGER


def gather_full_state(
    ctx: ParallelContext, params, tensors: dict[str, torch.Tensor], *, dual_copy: bool = False
) -> dict[str, torch.Tensor]:
    """Reassemble full tensors on global rank 0 from the shards, using each parameter's ShardSpec."""
    entries = []
    # DP/CP replicas hold identical copies; of the routed experts, the first EP group holds one copy of each.
    first_replica = ctx.coords.dp == 0 and ctx.coords.cp == 0
    for p in params:
        holds_copy = ctx.expert_replica == 0 if is_expert(p) else first_replica
        # DualPipe's up copy (chunk 1) equals the down copy after the mirror sum: gathered once, from chunk 0.
        if holds_copy and not (dual_copy and shard_spec(p).chunk == 1):
            spec = shard_spec(p)
            if spec.dim is not None or ctx.tp_rank == 0:
                entries.append((spec, ctx.tp_rank, tensors[spec.name].detach().cpu().clone()))
    gathered = [None] * dist.get_world_size() if ctx.rank == 0 else None
    dist.gather_object(entries, gathered, dst=0)
    if ctx.rank != 0:
        return {}
    shards: dict[str, list] = {}
    specs = {}
    for part in gathered:
        for spec, tp_rank, tensor in part:
            shards.setdefault(spec.name, []).append((tp_rank, tensor))
            specs[spec.name] = spec
    full = {}
    for name, pieces in shards.items():
        pieces.sort(key=lambda x: x[0])
        spec = specs[name]
        full[name] = torch.cat([t for _, t in pieces], dim=spec.shard_dim) if spec.dim else pieces[0][1]
    return full


@dataclass
class ReferenceResult:
    losses: list[float]
    grads: list[dict[str, torch.Tensor]]
    params: dict[str, torch.Tensor]


def reference_run(cfg: RunConfig) -> ReferenceResult:
    """The same training in one process on the full global batch (dp · microbatches · micro-batch size)."""
    mcfg = cfg.model
    model = ReferenceGPT(mcfg)
    params = list(model.parameters())
    if cfg.optimizer is OptimizerKind.SGD:
        optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.01, foreach=False)
    microbatches = resolved_microbatches(cfg, load_schedule(cfg.schedule))
    global_batch = cfg.topology.dp * microbatches * mcfg.micro_batch_size
    losses, grads = [], []
    for step in range(cfg.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = model(*synthetic_batch(mcfg, step, global_batch))
        loss.backward()
        losses.append(loss.item())
        grads.append(model.full_state(grads=True))
        optimizer.step()
    return ReferenceResult(losses, grads, model.full_state())


def run_configs(rank: int, world_size: int, configs: list[RunConfig]) -> list[RankResult | None]:
    """Harness entry: run several configs in one already-initialised world (amortises spawn and init).

    Returns the results on rank 0 and ``None`` elsewhere.
    """
    out = []
    for cfg in configs:
        result = execute(cfg, plan(cfg, world_size))
        out.append(result if rank == 0 else None)
    return out
