"""Benchmark: step time of pipesim's Program interpreter against torch.distributed.pipelining, side by side.

Same GPT stage modules, same microbatches, same world size, CPU + gloo, pp = 2 and 4; for each schedule
(GPipe, 1F1B, interleaved 1F1B with 2 chunks) both runtimes run in the same spawned world, alternating.
The table reports median step time (optimizer included, max over ranks), the ratio ours / torch (target
≤ 1.0), the ratio of the fastest steps (steadier on a loaded machine) and our interpreter overhead per
instruction (step wall time not covered by any instruction's span, divided by the rank's instruction
count). Run by hand: ``python experiments/bench_executor_vs_torch.py``.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from executors.harness import spawn
from executors.model import GPTStage, ModelConfig, init_full_weights, synthetic_batch
from executors.parallel_context import ParallelContext
from executors.runtime import RunConfig, execute, plan
from pipesim.topology import Topology

SCHEDULES = (
    ("gpipe", "ScheduleGPipe", 1),
    ("1f1b", "Schedule1F1B", 1),
    ("interleaved", "ScheduleInterleaved1F1B", 2),
)


def _torch_step_times(
    pp: int, schedule_cls: str, chunks: int, mcfg: ModelConfig, m: int, steps: int
) -> list[float]:
    from torch.distributed import pipelining

    ctx = ParallelContext.create(Topology(pp=pp))
    full = init_full_weights(mcfg)
    num_stages = pp * chunks
    modules = [
        GPTStage(mcfg, c * pp + ctx.pp_rank, num_stages, c, full, ctx.tp_group, _mode())
        for c in range(chunks)
    ]
    stages = [
        pipelining.PipelineStage(
            mod, c * pp + ctx.pp_rank, num_stages, torch.device("cpu"), group=ctx.pp_group
        )
        for c, mod in enumerate(modules)
    ]
    vocab = mcfg.vocab

    def loss_fn(logits, targets):  # logits [s, b, V], targets [b, s]
        return F.cross_entropy(logits.reshape(-1, vocab), targets.t().reshape(-1))

    cls = getattr(pipelining, schedule_cls)
    schedule = cls(stages if chunks > 1 else stages[0], n_microbatches=m, loss_fn=loss_fn)
    params = [p for mod in modules for p in mod.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    times = []
    for step in range(steps):
        tokens, targets = synthetic_batch(mcfg, step, m * mcfg.micro_batch_size)
        optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        if ctx.pp_rank == 0:
            schedule.step(tokens)
        elif ctx.pp_rank == pp - 1:
            schedule.step(target=targets, losses=[])
        else:
            schedule.step()
        optimizer.step()
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        times.append(float(elapsed))
    return times


def _mode():
    from executors.tp_layers import TPMode

    return TPMode.ALL_REDUCE


def bench_world(
    rank: int, world: int, mcfg: ModelConfig, m: int, steps: int, repeats: int
) -> list[dict] | None:
    rows = []
    for name, torch_cls, chunks in SCHEDULES:
        ours_t, theirs_t, overhead = [], [], []
        cfg = RunConfig(
            schedule=name, topology=Topology(pp=world), microbatches=m, chunks=chunks, steps=steps, model=mcfg
        )
        program = plan(cfg, world)
        for _ in range(repeats):  # alternate the runtimes so drift in machine load hits both alike
            result = execute(cfg, program)
            ours_t += result.step_times[1:]  # drop the warm-up step
            if rank == 0:
                frame = result.timeline
                for _key, g in frame[frame["step"] > 0].groupby(["step", "rank"]):
                    gap = (g["end"].max() - g["start"].min()) - (g["end"] - g["start"]).sum()
                    overhead.append(gap / len(g))
            theirs_t += _torch_step_times(world, torch_cls, chunks, mcfg, m, steps)[1:]
        if rank == 0:
            ours, theirs = statistics.median(ours_t), statistics.median(theirs_t)
            rows.append(
                {
                    "pp": world,
                    "schedule": name,
                    "ours_ms": ours * 1e3,
                    "torch_ms": theirs * 1e3,
                    "ratio": ours / theirs,
                    "min_ratio": min(ours_t) / min(theirs_t),
                    "overhead_us": statistics.median(overhead) * 1e6,
                    "instructions": len(program.ranks[0]),
                }
            )
    return rows if rank == 0 else None


def main() -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    p = experiment_parser(__doc__, figures=False, fast_help="tiny sizes (pp 2, 2 microbatches, 2 steps, 1 repeat, "
                          "2 layers of hidden 32): checks both runtimes run every schedule")
    p.add_argument("--pp", type=int, nargs="+", default=[2, 4])
    p.add_argument("--mb", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--micro-batch-size", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    a = parse_experiment_args(p)
    if a.fast:
        a.pp, a.mb, a.steps, a.repeats, a.layers, a.hidden = [2], 2, 2, 1, 2, 32
    record_output(a.out, "bench_executor_vs_torch.txt")
    mcfg = ModelConfig(a.layers, a.hidden, a.heads, a.seq_len, a.micro_batch_size, a.vocab)
    print(
        f"model {mcfg}, {a.mb} microbatches, CPU gloo, 1 thread/rank, median of "
        f"{a.repeats}×{a.steps - 1} steps"
    )
    print(
        f"{'pp':>3} {'schedule':<12} {'ours ms':>9} {'torch ms':>9} {'ratio':>6} {'min ratio':>9} "
        f"{'overhead/instr':>15}"
    )
    for pp in a.pp:
        for row in spawn(bench_world, pp, mcfg, a.mb, a.steps, a.repeats, timeout=1800)[0]:
            print(
                f"{row['pp']:>3} {row['schedule']:<12} {row['ours_ms']:>9.1f} {row['torch_ms']:>9.1f} "
                f"{row['ratio']:>6.2f} {row['min_ratio']:>9.2f} {row['overhead_us']:>12.1f} µs"
            )


if __name__ == "__main__":
    main()
