"""Ring attention on CPU: the executor's measured ring transfers against the simulator's ring cost.

The simulator prices ring attention per layer and microbatch from ``pipesim.analytic.comm.cp_ring_comm``:
``cp − 1`` hops of the K/V block forward, ``(cp − 1)`` hops of twice the bytes (K, V, dK, dV) backward, each
``bytes/β + α``. This script runs the executor at cp = 2 (gloo, one host), reads the CP_RING rows of its
measured timeline, and measures the same world's hop cost in isolation (α from a tiny exchange, β from a
block-sized one, the ring's own isend/irecv pair) to put into the formula. It reports, per layer and
microbatch, the measured ring time against the formula's, and each as a share of the measured F+B time.

The executor's backward sends one hop more than the formula counts: its dK/dV accumulators travel ``cp``
hops (the last returns each to its owner), the K/V ``cp − 1`` — ``2cp − 1`` block-hops against the
formula's ``2(cp − 1)``. A CP_RING row is the rank's wait for a hop: a K/V hop overlaps the attention
compute of its ring step and shows only what that did not hide (the simulator, too, charges only the exposed
part, each hop beside one ring step's attention: ``cp_ring_exposed``; the formula's total printed here is its
upper bound); a dK/dV hop is the whole transfer.

Run: ``python experiments/cp_ring_share.py`` (``--fast``: a smaller model and fewer steps).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from executors.harness import spawn
from executors.model import ModelConfig
from executors.parallel_context import ParallelContext
from executors.ring_attention import GroupRing
from executors.runtime import RunConfig, execute, plan
from pipesim.analytic.chip_spec import ChipSpec
from pipesim.analytic.comm import cp_ring_comm
from pipesim.analytic.layout import Layout
from pipesim.analytic.model_spec import ModelSpec
from pipesim.io.timeline import RING_OP
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.topology import Topology

CP, PP = 2, 1  # two processes on a two-core host: the cp ranks run side by side, as on chips


def _hop_seconds(ring: GroupRing, nbytes: int, repeats: int) -> float:
    """Fastest of ``repeats`` ring exchanges of ``nbytes`` (send to next, receive from previous): on a shared
    host the minimum is the transfer, the rest is the scheduler."""
    tensor = torch.zeros(max(nbytes // 4, 1))
    times = []
    for _ in range(repeats):
        dist.barrier(group=ring.group)
        t0 = time.perf_counter()
        ring.start(tensor).wait()
        times.append(time.perf_counter() - t0)
    return min(times)


def _world(rank: int, world_size: int, cfg: RunConfig, repeats: int):
    result = execute(cfg, plan(cfg, world_size))
    ctx = ParallelContext.create(cfg.topology)
    ring = GroupRing(ctx.cp_group)
    m = cfg.model
    block = 2 * m.micro_batch_size * (m.seq_len // CP) * m.hidden * 4  # stacked K and V, fp32
    alpha = _hop_seconds(ring, 4, repeats)
    hop = _hop_seconds(ring, block, repeats)
    return (result.timeline, alpha, hop, block) if rank == 0 else None


def main(argv: list[str] | None = None) -> None:
    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="a smaller model and fewer steps (seconds)"), argv)
    record_output(args.out, "cp_ring_share.txt")
    model = ModelConfig(layers=4, hidden=32, heads=4, seq_len=16) if args.fast else \
        ModelConfig(layers=4, hidden=128, heads=4, seq_len=256)
    steps, mb = (2, 2) if args.fast else (3, 4)
    cfg = RunConfig(schedule="1f1b", topology=Topology(cp=CP, pp=PP), microbatches=mb, steps=steps, model=model)
    timeline, alpha, hop, block = spawn(_world, CP * PP, cfg, 5 if args.fast else 20)[0]
    last = timeline[timeline["step"] == timeline["step"].max()]
    span = last["end"] - last["start"]
    layers_per_stage = model.layers // PP
    per = layers_per_stage * mb * PP  # layer-microbatch passes in the step, over the pipeline's ranks
    ring = last["op"] == RING_OP
    hosts = last.loc[ring].merge(last.loc[~ring, ["rank", "seq", "op"]], on=["rank", "seq"], suffixes=("", "_of"))
    measured_fwd = float((hosts["end"] - hosts["start"])[hosts["op_of"] == "F"].sum()) / per
    measured_bwd = float((hosts["end"] - hosts["start"])[hosts["op_of"].isin(["B", "I"])].sum()) / per
    compute = float(span[last["op"].isin(["F", "B", "I", "W"])].sum()) / per

    beta = block / max(hop - alpha, 1e-9)
    spec = ModelSpec("executor-gpt", model.layers, model.hidden, model.heads, 4 * model.hidden, model.vocab,
                     model.seq_len, micro_batch=model.micro_batch_size, dtype_bytes=4)
    chip = ChipSpec("cpu-gloo", peak_flops=1e11, memory_gib=64, hbm_bandwidth=1e10, intra_node_bandwidth=beta,
                    inter_node_bandwidth=beta, link_latency=alpha)
    predicted = cp_ring_comm(spec, Layout(cp=CP, pp=PP), chip)
    print(f"cp {CP} pp {PP}, seq {model.seq_len}, hidden {model.hidden}, K/V block {block} B; isolated hop "
          f"{hop * 1e6:.0f} µs (α {alpha * 1e6:.0f} µs, β {beta / 1e6:.0f} MB/s)")
    print("per layer and microbatch      measured    simulator (cp_ring_comm)")
    print(f"  ring forward           {measured_fwd * 1e6:10.0f} µs {predicted.forward * 1e6:10.0f} µs")
    print(f"  ring backward          {measured_bwd * 1e6:10.0f} µs {predicted.backward * 1e6:10.0f} µs")
    print(f"  F+B compute (incl.)    {compute * 1e6:10.0f} µs")
    total_m, total_p = measured_fwd + measured_bwd, predicted.forward + predicted.backward
    print(f"ring share of F+B: measured {total_m / compute:.1%}, simulator {total_p / compute:.1%} "
          f"(ratio {total_m / total_p:.2f})")
    spans = (hosts["end"] - hosts["start"])
    kv = hosts["op_of"] == "F"
    print(f"one hop waited in the run: forward (K/V, overlapped) median {spans[kv].median() * 1e6:.0f} µs, "
          f"backward median {spans[~kv].median() * 1e6:.0f} µs, isolated hop {hop * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
