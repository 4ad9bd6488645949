"""One cost convention and one activation unit across schedules, named in every output; figure options."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipesim.cli.main import main
from pipesim.plots.sweep_plot import costs_note, in_reading_order, series_label
from pipesim.program.build import build_program
from pipesim.sim.costs import ACTIVATION_UNIT, CostModel, StageCosts
from pipesim.sim.simulator import simulate


@pytest.mark.parametrize(("name", "chunks"), [("interleaved", 2), ("interleaved", 4), ("looped-bfs", 3),
                                              ("zb-v", 2), ("dualpipe-v", 2)])
def test_chunked_schedules_do_a_ranks_work_not_v_times_it(name, chunks):
    """F and B are per microbatch through a rank's share: every schedule's busiest rank computes m·(F+B)."""
    costs = CostModel(StageCosts(forward=1.0, backward=2.0, backward_input=1.0, backward_weight=1.0))
    chunked = simulate(build_program(name, 4, 16, chunks).program, costs)
    one = simulate(build_program("1f1b", 4, 16).program, costs)
    assert chunked.metrics.ideal == pytest.approx(one.metrics.ideal) == pytest.approx(16 * 3.0)


def test_summary_names_the_convention_and_the_unit(capsys):
    assert main(["simulate", "-s", "interleaved", "--pp", "4", "--mb", "16"]) == 0
    text = capsys.readouterr().out
    assert "per microbatch through one rank's share of the model; each of the v=2 chunks takes 1/2" in text
    assert f"in {ACTIVATION_UNIT}" in text
    assert main(["simulate", "-s", "zb-v", "--pp", "4", "--mb", "16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["memory"]["unit"] == ACTIVATION_UNIT
    assert data["memory"]["peak_activations"] == [4, 4, 4, 4]  # 1F1B's first-rank peak, on every rank
    assert data["costs"]["convention"].startswith("per microbatch through one rank's share")


def test_costs_file_for_other_stages_names_file_cause_and_fix(tmp_path, capsys):
    path = tmp_path / "costs.json"
    CostModel(StageCosts(forward=0.5), overrides={3: {"forward": 0.7}}, num_stages=4, time_unit="s").save(path)
    assert main(["simulate", "--costs", str(path), "--pp", "2", "--mb", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"costs file {path} was calibrated on a pipeline of 4 stages (pp·v), but this one has 2" in err
    assert "--stage-cost" not in err
    # The same file fits pp=2 with two chunks per rank: 4 stages.
    assert main(["simulate", "--costs", str(path), "-s", "interleaved", "--pp", "2", "--mb", "8"]) == 0


def test_sweep_plot_labels_costs_and_options(tmp_path, capsys):
    frame = pd.DataFrame({"schedule": ["1f1b", "interleaved", "interleaved"], "chunks": [1, 2, 4],
                          "forward": [1.0] * 3, "backward": [2.0] * 3, "p2p_latency": [0.0, 0.0, 0.5]})
    assert list(series_label(frame, "schedule")) == ["1f1b", "interleaved v=2", "interleaved v=4"]
    assert costs_note(frame).startswith("costs: F=1 B=2 p2p latency∈{0, 0.5} per microbatch through a rank's share")
    out = tmp_path / "sweep.csv"
    assert main(["sweep", "-s", "1f1b,interleaved", "--pp", "2,4", "--mb", "4,8", "-q", "-o", str(out)]) == 0
    figure = tmp_path / "f.svg"
    assert main(["plot", str(out), "-o", str(figure), "--percent", "--title", "T", "--xlabel", "X", "--ylabel", "Y",
                 "--size", "5,2", "--ylim", "0,0.5"]) == 0
    svg = figure.read_text()
    assert "interleaved v=2" in svg and "costs: F=1 B=2" in svg and "%" in svg
    assert main(["plot", str(out), "-o", str(figure), "--y", "makespan", "--percent"]) == 2
    assert "--percent needs a fraction" in capsys.readouterr().err
    assert main(["plot", str(out), "-o", str(figure), "--ylim", "1,0"]) == 2
    assert main(["plot", str(out), "-o", str(figure), "--size", "5"]) == 2


def test_reading_order_puts_unknown_schedules_last():
    assert in_reading_order(["zb-v", "mine", "gpipe", "1f1b"]) == ["gpipe", "1f1b", "zb-v", "mine"]


def test_one_shown_name_the_schedule_gives_itself(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("from pipesim import B, F, Schedule\n\n\ndef build(pp, microbatches, chunks=1):\n"
                    "    order = [F(m) for m in range(microbatches)] + [B(m) for m in range(microbatches)]\n"
                    "    return Schedule.from_orders('my-gpipe', [order] * pp, microbatches=microbatches)\n")
    assert main(["simulate", "-s", str(path), "--pp", "2", "--mb", "2"]) == 0
    assert capsys.readouterr().out.startswith("schedule my-gpipe: pp=2")
    assert main(["lower", "-s", str(path), "--pp", "2", "--mb", "2"]) == 0
    assert "name: my-gpipe" in capsys.readouterr().out
    assert main(["simulate", "-s", str(path), "--pp", "2", "--mb", "2", "--json"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["schedule"], config["schedule_path"]) == ("my-gpipe", str(path))


def test_readme_schedule_example_runs_as_documented(tmp_path, capsys):
    from tests.schedule_cases import own_schedule_example

    path = tmp_path / "bfs_v.py"
    path.write_text(own_schedule_example("readme-schedule-example:"))
    assert main(["simulate", "--schedule", str(path), "--pp", "4", "--mb", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("schedule bfs-v: pp=4 microbatches=8 chunks=2 (v placement, 8 stages)")
    assert "makespan 30 units" in out and "simulated 0.2000" in out
    assert main(["simulate", "--schedule", str(path), "--pp", "4", "--mb", "8", "--chunks", "3"]) == 2


def test_repeated_plot_writes_every_file(tmp_path, capsys):
    pdf, png = tmp_path / "g.pdf", tmp_path / "g.png"
    assert main(["simulate", "--pp", "2", "--mb", "2", "--plot", str(pdf), "--plot", str(png)]) == 0
    assert pdf.read_bytes()[:4] == b"%PDF" and png.read_bytes()[:4] == b"\x89PNG"
    out = capsys.readouterr().out
    assert f"wrote plot {pdf}" in out and f"wrote plot {png}" in out
