"""The planner figure's labels: beside their points, clear of each other and of the labelled points, and pp = 1
named as no pipeline; FP8 MFU says which peak it is against."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from pipesim.plots.pareto_plot import LABEL_H_PT, LABEL_W_PT, NO_PIPELINE, label_offsets, plot_pareto, schedule_group


def _overlap(a, b) -> bool:
    return abs(a[0] - b[0]) < LABEL_W_PT and abs(a[1] - b[1]) < LABEL_H_PT


@pytest.mark.parametrize("points", [
    [(100.0, 100.0), (101.0, 100.5), (100.5, 99.0), (300.0, 50.0), (102.0, 101.0)],  # four nearly on one spot
    [(float(10 * i), 40.0) for i in range(5)],  # a row closer than a label is wide
])
def test_labels_do_not_overlap_each_other_or_the_points(points):
    offsets = label_offsets(points)
    boxes = [(x + dx, y + dy) for (x, y), (dx, dy) in zip(points, offsets, strict=True)]
    for a, b in itertools.combinations(boxes, 2):
        assert not _overlap(a, b), (a, b)
    for box in boxes:
        for x, y in points:  # a label never sits on a labelled marker (7 pt across)
            assert not (abs(box[0] - x) < (LABEL_W_PT + 7) / 2 and abs(box[1] - y) < (LABEL_H_PT + 7) / 2)
    # Close to their points: the nearest free ring, not the figure's edge.
    assert all(abs(dx) + abs(dy) < 80 for dx, dy in offsets)


def test_a_lone_point_gets_the_first_spot():
    assert label_offsets([(0.0, 0.0)]) == [(pytest.approx(0.7 * 14 * 1.3), pytest.approx(0.7 * 14))]


def test_pp1_is_no_pipeline_not_1f1b(tmp_path):
    assert schedule_group(pd.Series({"pp": 1, "schedule": "1f1b"})) == NO_PIPELINE
    assert schedule_group(pd.Series({"pp": 4, "schedule": "1f1b"})) == "1f1b"
    frame = pd.DataFrame([
        {"label": "a", "status": "simulated", "fits": True, "pareto": True, "pp": 1, "schedule": "1f1b",
         "peak_gib": 10.0, "step_time_s": 30.0},
        {"label": "b", "status": "simulated", "fits": True, "pareto": True, "pp": 4, "schedule": "zb-v",
         "peak_gib": 20.0, "step_time_s": 3.0},
    ])
    path = tmp_path / "p.png"
    plot_pareto(frame, path, cap_gib=80, labelled=["b", "a"], title="t")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_fp8_mfu_names_its_peak(capsys):
    from pipesim.cli.main import main

    assert main(["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4", "--fp8"]) == 0
    assert "MFU and HFU against the BF16 peak, FP8 and FP4 runs included" in capsys.readouterr().out
    assert main(["simulate", "--model", "llama2-7b", "--hardware", "h100-sxm", "--pp", "2", "--mb", "4"]) == 0
    assert "against the BF16 peak" not in capsys.readouterr().out
