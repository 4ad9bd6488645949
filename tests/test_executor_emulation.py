"""Emulated costs (``executors.run --emulate``): every built-in schedule runs at a costs file's durations over
real gloo P2P, and what it measures obeys the costs — nothing (compute, or data arriving) ends before the
simulator says it can, since the emulated stream meets every constraint the simulator has — with the makespan
not absurdly longer (a generous bound for a loaded CI machine; the 2% figure lives in
``experiments/emulated_vs_predicted.py``). The stream's rules themselves are checked on a fake clock."""

import pytest

pytest.importorskip("torch")

from executors.harness import spawn
from executors.runtime import RunConfig, plan, run_configs
from executors.tp_layers import TPMode
from pipesim.analysis.overlay import one_step
from pipesim.program.loader import builtin_names
from pipesim.program.table import KIND_SEND, table_of
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate
from pipesim.topology import Topology

pytestmark = pytest.mark.distributed

# GPU-measured ratios (F ≈ 18 ms, I ≈ 18 ms, W ≈ 9 ms, P2P ≈ 0.6 ms), halved to keep the test short; long
# enough that a loaded CI host's lateness stays hidden behind each instruction, as on a GPU.
SCALE = 0.5
COSTS = CostModel(
    StageCosts(forward=0.018 * SCALE, backward=0.027 * SCALE, backward_input=0.018 * SCALE,
               backward_weight=0.009 * SCALE),
    p2p_latency=0.0006 * SCALE,
    time_unit="s",
)
# The timeline is stamped in emulated-stream time (executors.emulation.StreamClock), which meets every
# constraint the simulator has and only ever adds delay: measured times are never earlier than predicted,
# up to float rounding.
ALIGN_TOLERANCE = 1e-6


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
        predicted = one_step(simulate(program, COSTS).timeline).sort_values(["rank", "seq"])
        measured = one_step(result.timeline, step=1).sort_values(["rank", "seq"]).reset_index(drop=True)
        assert len(measured) == table.num_rows, cfg.schedule
        # The simulator's times are the earliest the constraints allow; the emulated stream meets the same
        # constraints (compute after the previous one and after its data; data a link time after its send),
        # so no compute, and no received tensor, is done before its predicted time.
        checked = table.kind != KIND_SEND
        early = measured["end"].to_numpy()[checked] < predicted["end"].to_numpy()[checked] - ALIGN_TOLERANCE
        assert not early.any(), f"{cfg.schedule}: {early.sum()} instructions ended before the costs allow"
        span_measured = measured["end"].max() - measured["start"].min()
        span_predicted = predicted["end"].max() - predicted["start"].min()
        assert span_measured >= span_predicted - ALIGN_TOLERANCE, (cfg.schedule, span_measured, span_predicted)
        # Generous: a loaded machine can starve the stream (host later than an instruction can hide); a
        # wrong time unit would be 1000×.
        assert span_measured <= 20.0 * span_predicted, (cfg.schedule, span_measured, span_predicted)
        assert result.losses == [0.0, 0.0]  # nothing was computed


class FakeClock:
    """``time.perf_counter`` for the stream's rules: advances only when the test (or a sleep) says."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stream(monkeypatch):
    from executors import emulation

    clock = FakeClock()
    monkeypatch.setattr(emulation.time, "perf_counter", clock)
    monkeypatch.setattr(emulation.time, "sleep", lambda seconds: setattr(clock, "now", clock.now + seconds))
    made = emulation.EmulatedStream(emulation.Sleeper())
    made.free_at = made.inputs_at = clock.now
    return made, clock


def test_stream_hides_host_lag_up_to_one_instruction(stream):
    s, clock = stream
    deadline = s.deadline(0.010)
    s.finish(deadline)
    assert s.free_at == pytest.approx(100.010)
    clock.now += 0.004  # the host comes back 4 ms late: a 10 ms instruction hides it
    deadline = s.deadline(0.010)
    assert deadline == pytest.approx(100.020)
    s.finish(deadline)
    assert clock.now == pytest.approx(100.020) and s.free_at == pytest.approx(100.020)


def test_stream_starves_when_the_host_is_later_than_an_instruction(stream):
    s, clock = stream
    clock.now += 0.015  # 15 ms late for a 10 ms instruction: the stream waited for the host
    deadline = s.deadline(0.010)
    assert deadline == pytest.approx(100.025)


def test_stream_waits_for_inputs_and_for_real_work_that_overran(stream):
    s, clock = stream
    s.arrived(100.050)  # the data is there 50 ms in: the host slept until then
    assert clock.now == pytest.approx(100.050)
    deadline = s.deadline(0.010)
    assert deadline == pytest.approx(100.060)
    clock.now = 100.075  # a collective inside the instruction took longer than its cost
    s.finish(deadline)
    assert s.free_at == pytest.approx(100.075)


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


def test_emulated_torchrun_writes_timeline_and_trace(tmp_path):
    """--timeline and --trace are written under --emulate too (#23: exit 0 and no file)."""
    import json
    import os
    from pathlib import Path

    import pandas as pd

    from executors.launch import run_torchrun

    root = Path(__file__).resolve().parents[1]
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(COSTS.to_dict()))
    timeline, trace = tmp_path / "t.csv", tmp_path / "t.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    proc = run_torchrun(
        ["--nproc-per-node", "2", "-m", "executors.run", "1f1b", "--mb", "4", "--steps", "1", "--emulate",
         str(costs), "--timeline", str(timeline), "--trace", str(trace)],
        cwd=root, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frame = pd.read_csv(timeline)
    assert set(frame["rank"]) == {0, 1} and (frame["op"] == "F").sum() == 8
    assert json.loads(trace.read_text())
