"""Calibration round trip, overlay errors, sweeps and their figures; mismatched inputs get one-line errors."""

from __future__ import annotations

import pandas as pd
import pytest

from pipesim.analysis.calibrate import calibrate
from pipesim.analysis.overlay import overlay_errors
from pipesim.analysis.sweep import SweepGrid, run_sweep
from pipesim.cli.main import main
from pipesim.io.timeline import read_timeline, write_timeline
from pipesim.program.build import build_program
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate


@pytest.mark.parametrize(("schedule", "pp", "mb"), [("1f1b", 4, 8), ("gpipe", 3, 5), ("interleaved", 2, 4)])
def test_calibration_round_trip_reproduces_costs(tmp_path, schedule, pp, mb):
    program = build_program(schedule, pp, mb).program
    original = CostModel(StageCosts(forward=1.5, backward=2.5), overrides={0: {"forward": 3.0}},
                         p2p_latency=0.25, time_unit="s")
    path = tmp_path / "t.parquet"
    write_timeline(simulate(program, original).timeline, path)
    recovered = calibrate(read_timeline(path))
    assert recovered.stage(0).forward == pytest.approx(3.0)
    for stage in range(program.shape.num_stages):
        assert recovered.stage(stage).backward == pytest.approx(2.5)
        if stage:
            assert recovered.stage(stage).forward == pytest.approx(1.5)
    assert recovered.p2p_latency == pytest.approx(0.25)
    again = simulate(program, recovered)
    assert again.metrics.makespan == pytest.approx(simulate(program, original).metrics.makespan)


def test_calibrate_drops_warmup_steps():
    program = build_program("1f1b", 2, 4).program
    slow = simulate(program, CostModel(StageCosts(forward=9.0, backward=9.0))).timeline.assign(step=0)
    fast = simulate(program, CostModel(StageCosts(forward=1.0, backward=2.0))).timeline.assign(step=1)
    costs = calibrate(pd.concat([slow, fast]))
    assert (costs.default.forward, costs.default.backward) == (1.0, 2.0)


def test_overlay_errors_measure_the_difference():
    program = build_program("1f1b", 2, 4).program
    predicted = simulate(program).timeline
    measured = simulate(program, CostModel(StageCosts(forward=1.1, backward=2.2))).timeline
    errors = overlay_errors(predicted, measured)
    assert errors.makespan_error == pytest.approx(1 / 1.1 - 1)
    busy = sum(not ins.op.is_comm for code in program.ranks for ins in code)
    assert errors.start_error_max > 0 and errors.instructions == busy


def test_overlay_cli_writes_figure_and_rejects_mismatch(tmp_path, capsys):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    assert main(["simulate", "--pp", "2", "--mb", "4", "--timeline", str(a)]) == 0
    assert main(["simulate", "--pp", "2", "--mb", "4", "--forward", "1.2", "--timeline", str(b)]) == 0
    assert main(["simulate", "--pp", "2", "--mb", "6", "--timeline", str(c)]) == 0
    capsys.readouterr()
    assert main(["overlay", str(a), str(b), "-o", str(tmp_path / "o.svg")]) == 0
    assert "makespan predicted" in capsys.readouterr().out
    assert (tmp_path / "o.svg").exists()
    assert main(["overlay", str(a), str(c)]) == 2
    assert "different programs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: (d / "empty.csv").write_text(""), "cannot be read"),
        (lambda d: (d / "rows0.csv").write_text("rank,stage,chunk,op,microbatch,start,end\n"), "holds no rows"),
        (lambda d: (d / "other.csv").write_text("a,b\n1,2\n"), "not a pipesim timeline"),
        (lambda d: (d / "x.txt").write_text("hello"), "unknown format"),
    ],
)
def test_bad_timeline_files_are_one_line_errors(tmp_path, capsys, make, fragment):
    make(tmp_path)
    path = next(tmp_path.iterdir())
    for args in (["calibrate", str(path), "-o", str(tmp_path / "c.json")], ["overlay", str(path), str(path)]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert fragment in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.json").exists()


def test_overlay_rejects_different_rank_counts(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    main(["simulate", "--pp", "2", "--mb", "4", "--timeline", str(a)])
    main(["simulate", "--pp", "3", "--mb", "4", "--timeline", str(b)])
    capsys.readouterr()
    assert main(["overlay", str(a), str(b)]) == 2
    assert "different rank counts" in capsys.readouterr().err


def test_sweep_grid_matches_closed_forms_and_skips_invalid_points():
    grid = SweepGrid(schedules=["1f1b", "interleaved"], pp=[2, 4], microbatches=[3, 4, 6, 8])
    result = run_sweep(grid.points())
    one_f_one_b = result.frame[result.frame["schedule"] == "1f1b"]
    expected = (one_f_one_b["pp"] - 1) / (one_f_one_b["microbatches"] + one_f_one_b["pp"] - 1)
    assert (one_f_one_b["bubble_fraction"] - expected).abs().max() < 1e-9
    # interleaved at m = 6 on pp = 4 too (Megatron-Core's groups of 6): (p−1)/(v·m) over, v = 2
    interleaved = result.frame[result.frame["schedule"] == "interleaved"]
    expected = (interleaved["pp"] - 1) / (2 * interleaved["microbatches"])
    assert len(interleaved) == 7 and (interleaved["bubble_overhead"] - expected).abs().max() < 1e-9
    assert result.skipped == 1  # interleaved with pp=4, m=3: fewer microbatches than ranks
    assert "--mb ≥ --pp 4" in result.first_skip_reason


def test_sweep_parallel_equals_serial():
    points = SweepGrid(schedules=["gpipe", "1f1b"], pp=[2, 3], microbatches=[2, 5], backward=[1.0, 2.0]).points()
    serial = run_sweep(points).frame
    parallel = run_sweep(points, jobs=2).frame
    pd.testing.assert_frame_equal(serial, parallel)


def test_sweep_and_plot_cli(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    assert main(["sweep", "--schedule", "gpipe,1f1b", "--pp", "2,4", "--mb", "4,8", "-q", "-o", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 8
    assert main(["plot", str(out), "-o", str(tmp_path / "f.pdf")]) == 0
    assert (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"
    assert main(["plot", str(out), "--y", "nonsense", "-o", str(tmp_path / "g.pdf")]) == 2
    assert main(["sweep", "--schedule", "nosuch", "-q", "-o", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "--y nonsense is not a column" in err and "unknown schedule 'nosuch'" in err
    assert not (tmp_path / "g.pdf").exists() and not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize(("measured", "reused"), [(("interleaved", 2, 2), ("1f1b", 4, 1)),
                                                  (("1f1b", 4, 1), ("interleaved", 2, 2))])
def test_costs_file_reused_on_another_pp_times_v_keeps_each_stage_time(tmp_path, measured, reused):
    """By hand: a rank's share F = 4 s, B = 8 s under interleaved pp 2, v 2 makes each of its 4 stages (a quarter
    of the model) take F 2 s, B 4 s. 1F1B on pp 4 has the same 4 stages, so each must take 2 s and 4 s again,
    not v times that (#23); and the other way round."""
    name, pp, chunks = measured
    per_stage = CostModel(StageCosts(forward=2.0 * chunks, backward=4.0 * chunks), time_unit="s")
    program = build_program(name, pp, 8, chunks).program
    path = tmp_path / "costs.json"
    calibrate(simulate(program, per_stage).timeline).save(path)
    costs = CostModel.load(path)
    assert (costs.num_stages, costs.chunks) == (4, chunks)
    name, pp, chunks = reused
    timeline = simulate(build_program(name, pp, 8, chunks).program, costs).timeline
    durations = (timeline["end"] - timeline["start"]).groupby(timeline["op"]).agg(["min", "max"])
    assert durations.loc["F"].tolist() == pytest.approx([2.0, 2.0])
    assert durations.loc["B"].tolist() == pytest.approx([4.0, 4.0])


def test_calibrating_a_fused_backward_derives_i_and_w_and_says_so(tmp_path, capsys):
    """#23: a fused-backward timeline used to give split schedules I = W = 0 (a free backward, zb-h1 −35%)."""
    program = build_program("1f1b", 4, 8).program
    measured = simulate(program, CostModel(StageCosts(forward=1.0, backward=3.0), time_unit="s")).timeline
    notes = []
    costs = calibrate(measured, notes=notes)
    assert costs.default.backward_input == pytest.approx(1.5) and costs.default.backward_weight == pytest.approx(1.5)
    assert notes and "I and W derived from the fused B" in notes[0]
    path = tmp_path / "t.csv"
    write_timeline(measured, path)
    assert main(["calibrate", str(path), "-o", str(tmp_path / "c.json")]) == 0
    assert "note: I and W derived from the fused B" in capsys.readouterr().out
    zb = simulate(build_program("zb-h1", 4, 8).program, CostModel.load(tmp_path / "c.json"))
    assert zb.metrics.ideal == pytest.approx(8 * (1.0 + 3.0))  # every rank still does F + I + W = F + B of work


def test_calibrating_a_split_backward_derives_b():
    program = build_program("zb-h1", 4, 8).program
    split = CostModel(StageCosts(forward=1.0, backward=3.0, backward_input=2.0, backward_weight=1.0), time_unit="s")
    notes = []
    costs = calibrate(simulate(program, split).timeline, notes=notes)
    assert costs.default.backward == pytest.approx(3.0) and notes == ["B derived as I + W (the timeline has no "
                                                                      "fused backward)"]
