"""Emulated costs (``executors.run --emulate``): every built-in schedule runs at a costs file's durations over
real gloo P2P, and what it measures obeys the costs — no compute shorter than its cost, no message consumed
before its link time — with the makespan no shorter than the simulator's and not absurdly longer (a
generous bound: a shared machine stretches every instruction's CPU time; the 2% figure lives in
``experiments/emulated_vs_predicted.py``)."""

import numpy as np
import pytest

pytest.importorskip("torch")

from executors.harness import spawn
from executors.runtime import RunConfig, plan, run_configs
from executors.tp_layers import TPMode
from pipesim.analysis.overlay import one_step
from pipesim.program.loader import builtin_names
from pipesim.program.table import KIND_BUSY, KIND_RECV, table_of
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate
from pipesim.topology import Topology

pytestmark = pytest.mark.distributed

# GPU-measured ratios (F ≈ 18 ms, I ≈ 18 ms, W ≈ 9 ms, P2P ≈ 0.6 ms), scaled by 1/10 to keep the test short.
SCALE = 0.1
COSTS = CostModel(
    StageCosts(forward=0.018 * SCALE, backward=0.027 * SCALE, backward_input=0.018 * SCALE,
               backward_weight=0.009 * SCALE),
    p2p_latency=0.0006 * SCALE,
    time_unit="s",
)
SLEEP_TOLERANCE = 0.3e-3  # a sleep may end early by at most the sleeper's learned lateness (≤ 0.2 ms)


def test_every_schedule_runs_at_the_costs_files_pace():
    pp, m = 2, 4
    configs = [
        RunConfig(schedule=name, topology=Topology(pp=pp), microbatches=m, steps=2, emulate=COSTS)
        for name in builtin_names()
    ]
    results = spawn(run_configs, pp, configs)[0]
    for cfg, result in zip(configs, results, strict=True):
        program = plan(cfg, pp)
        table = table_of(program)
        predicted = simulate(program, COSTS).timeline
        measured = one_step(result.timeline, step=1).sort_values(["rank", "seq"]).reset_index(drop=True)
        assert len(measured) == table.num_rows, cfg.schedule
        duration = (measured["end"] - measured["start"]).to_numpy()
        expected = one_step(predicted).sort_values(["rank", "seq"])
        busy = table.kind == KIND_BUSY
        # Compute sleeps at least its cost.
        short = duration[busy] < (expected["end"] - expected["start"]).to_numpy()[busy] - SLEEP_TOLERANCE
        assert not short.any(), f"{cfg.schedule}: {short.sum()} instructions ran shorter than their cost"
        # A message is consumed no earlier than its link time after it was sent (same link, same FIFO index).
        start, end = measured["start"].to_numpy(), measured["end"].to_numpy()
        sends = {(link, msg): row for row, (link, msg) in enumerate(zip(table.link, table.message, strict=True))
                 if table.kind[row] != KIND_RECV and link >= 0}
        for row in np.flatnonzero(table.kind == KIND_RECV):
            sent = sends[(table.link[row], table.message[row])]
            assert end[row] >= start[sent] + COSTS.p2p_latency - SLEEP_TOLERANCE, (cfg.schedule, row)
        span_measured = measured["end"].max() - measured["start"].min()
        span_predicted = predicted["end"].max() - predicted["start"].min()
        assert span_measured >= 0.97 * span_predicted, (cfg.schedule, span_measured, span_predicted)
        # Generous: a loaded machine stretches every instruction's CPU time (5× seen on 2 shared cores); a
        # wrong time unit would be 1000×.
        assert span_measured <= 20.0 * span_predicted, (cfg.schedule, span_measured, span_predicted)
        assert result.losses == [0.0, 0.0]  # nothing was computed


def test_emulation_runs_tensor_and_data_parallel_collectives():
    """TP (both modes) and DP collectives run on real-size buffers inside the emulated instructions."""
    configs = [
        RunConfig(schedule="1f1b", topology=Topology(tp=2, pp=2), microbatches=4, steps=1, emulate=COSTS,
                  tp_mode=mode)
        for mode in TPMode
    ]
    configs.append(RunConfig(schedule="zb-h1", topology=Topology(dp=2, pp=2), microbatches=4, steps=1,
                             emulate=COSTS))
    results = spawn(run_configs, 4, configs)[0]
    for cfg, result in zip(configs, results, strict=True):
        span = result.timeline["end"].max() - result.timeline["start"].min()
        assert span >= 0.97 * simulate(plan(cfg, 4), COSTS).metrics.makespan, cfg
