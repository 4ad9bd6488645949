"""Fitting a chip's constants to step times measured on one's own system (pipesim.analysis.step_fit, pipesim fit):
steps made on a chip with known constants give those constants back from the preset, every run then predicted
exactly (in sample and left out); an inconsistent run shows in its left-out error; bad files are one-line errors."""

import json
from dataclasses import replace

import pytest
import yaml

import pipesim
from pipesim.analysis.step_fit import KNOBS_BY_FIELD, MeasuredStep
from pipesim.analytic.chip_load import load_chip
from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.cli.main import main
from pipesim.errors import PipesimError

H100 = CHIP_PRESETS["h100-sxm"]
# the system the "measurements" come from: a step's GEMMs reach less than the preset's, its GPUs spread wider
TRUTH = replace(H100, training_gemm_ratio=0.86, gpu_speed_spread=0.04)
CONFIGS = {  # small models, layouts that exercise compute, data parallelism across nodes and tensor parallelism
    "1b pp2 dp4": dict(schedule="1f1b", pp=2, mb=8, model="llama3.2-1b", dp=4),
    "1b dp64": dict(schedule="1f1b", pp=1, mb=4, model="llama3.2-1b", dp=64),
    "8b tp2 pp4 v2 dp8": dict(schedule="interleaved", pp=4, mb=8, chunks=2, model="llama3.1-8b", tp=2, dp=8,
                              sequence_parallel=True),
    "8b dp256 zero1": dict(schedule="1f1b", pp=1, mb=2, model="llama3.1-8b", dp=256, zero=1),
    "8b tp4 pp2 dp2": dict(schedule="1f1b", pp=2, mb=8, model="llama3.1-8b", tp=4, dp=2),
}
KNOBS = ["training_gemm_ratio", "gpu_speed_spread", "collective_efficiency"]


def _measured(chip=TRUTH, slower: dict[str, float] | None = None) -> list[MeasuredStep]:
    steps = []
    for label, options in CONFIGS.items():
        o = dict(options)
        seconds = pipesim.simulate(o.pop("schedule"), o.pop("pp"), o.pop("mb"), o.pop("chunks", None),
                                   hardware=chip, **o).step_time
        steps.append(MeasuredStep(label, options, seconds * (slower or {}).get(label, 1.0)))
    return steps


def test_known_constants_come_back_and_every_run_is_then_exact():
    result = pipesim.fit_chip(_measured(), H100, KNOBS)
    assert result.values == {"training_gemm_ratio": 0.86, "gpu_speed_spread": 0.04, "collective_efficiency": 1.0}
    assert result.before == {"training_gemm_ratio": 0.94, "gpu_speed_spread": 0.03, "collective_efficiency": 1.0}
    assert result.chip.training_gemm_ratio == 0.86 and result.chip.name == "h100-sxm-fit"
    assert all(r.error(r.before) < -0.05 for r in result.runs)  # the preset is too fast on this system
    assert result.mean_abs("fitted") < 1e-9 and result.mean_abs("left_out") < 1e-9
    # FP8's share: no BF16 run moves it, so it is kept and said to be
    everything = pipesim.fit_chip(_measured(), H100)
    assert "fp8_gemm_efficiency" in everything.unmoved
    assert everything.chip.fp8_gemm_efficiency == H100.fp8_gemm_efficiency


def test_one_knob_alone():
    result = pipesim.fit_chip(_measured(replace(H100, training_gemm_ratio=0.8)), H100, ["training_gemm_ratio"])
    assert result.values == {"training_gemm_ratio": 0.8} and result.mean_abs("left_out") < 1e-9
    assert result.caution is None  # five runs for one knob


def test_too_few_runs_for_the_knobs_moved_is_said():
    result = pipesim.fit_chip(_measured()[:3], H100, KNOBS)  # three runs, three knobs that move them
    assert result.caution.startswith("3 runs for 3 knobs that move them")


def test_a_run_the_others_do_not_explain_shows_and_does_not_pull_the_fit():
    """The fit weighs mean |log error| (each run alike, as validation weighs sources): one run 25 % slower than its
    system's constants say leaves them where the four others put them, and shows as its own error."""
    result = pipesim.fit_chip(_measured(slower={"1b dp64": 1.25}), H100, KNOBS)
    assert result.values["training_gemm_ratio"] == 0.86 and result.values["gpu_speed_spread"] == 0.04
    odd = next(r for r in result.runs if r.label == "1b dp64")
    assert odd.error(odd.left_out) == pytest.approx(1 / 1.25 - 1) == pytest.approx(odd.error(odd.fitted))
    assert all(abs(r.error(r.fitted)) < 1e-9 for r in result.runs if r is not odd)
    # left out, a run is predicted by four runs, the odd one among them: where it is the only other run across
    # many nodes (the 256-GPU data-parallel run), it moves the network's knobs a little
    left_out = {r.label: abs(r.error(r.left_out)) for r in result.runs if r is not odd}
    assert max(left_out.values()) < 0.03 and max(left_out, key=left_out.get) == "8b dp256 zero1"


def test_the_command_prints_the_runs_and_writes_a_chip_file(tmp_path, capsys):
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump({"runs": [{"label": s.label, **s.options, "step_s": s.step_s}
                                             for s in _measured()]}))
    out = tmp_path / "mine.yaml"
    assert main(["fit", str(runs), "--hardware", "h100-sxm", "--knobs", *KNOBS, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "training_gemm_ratio: 0.94 → 0.86" in text and "gpu_speed_spread: 0.03 → 0.04" in text
    assert "8b dp256 zero1" in text and f"wrote {out}" in text
    chip = load_chip(str(out))
    assert (chip.training_gemm_ratio, chip.gpu_speed_spread) == (0.86, 0.04)
    assert out.read_text().startswith("# h100-sxm-fit: fitted by 'pipesim fit' to 5 measured steps")
    assert main(["simulate", "--model", "llama3.2-1b", "--pp", "2", "--mb", "8", "--dp", "4", "--hardware",
                 str(out)]) == 0
    capsys.readouterr()
    assert main(["fit", str(runs), "--hardware", "h100-sxm", "--knobs", *KNOBS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["knobs"]["training_gemm_ratio"] == {"before": 0.94, "fitted": 0.86}
    assert len(data["runs"]) == 5 and data["errors"]["left_out"]["mean_abs"] < 1e-9


@pytest.mark.parametrize("runs, fragment", [
    ({"steps": []}, "no 'runs' list"),
    ({"runs": [{"model": "llama3.2-1b", "pp": 2}]}, "'step_s' must be the measured seconds a step"),
    ({"runs": [{"model": "llama3.2-1b", "step_s": -1}]}, "'step_s' must be the measured seconds a step"),
    ({"runs": [{"model": "llama3.2-1b", "step_s": float("inf")}]}, "'step_s' must be the measured seconds a step"),
    ({"runs": [1, 2]}, "run 1 is not a mapping"),
    ({"runs": [{"model": "llama3.2-1b", "dp": 2.5, "step_s": 1}]}, "'dp' must be a positive whole number"),
    ({"runs": [{"model": "llama3.2-1b", "tp": "two", "step_s": 1}]}, "'tp' must be a positive whole number"),
    ({"runs": [{"label": "a", "model": "llama3.2-1b", "step_s": 1.0},
               {"label": "b", "model": "llama3.2-1b", "zero": 7, "step_s": 1.0}]},
     "run 'b': simulate(): zero=7 must be from 0 to 3"),
    ({"runs": [{"model": "llama3.2-1b", "step_s": 1, "hardware": "a100-80gb"}]}, "'hardware' is the fit's"),
    ({"runs": [{"label": "a", "model": "llama3.2-1b", "pp": 2, "mb": 8, "step_s": 1.0},
               {"label": "b", "model": "llama3.2-1b", "tpp": 2, "step_s": 1.0}]}, "run 'b': "),
    ({"runs": [{"label": "a", "model": "llama3.2-1b", "pp": 2, "mb": 8, "step_s": 1.0}]}, "a fit needs at least 2"),
    ({"runs": [{"label": "a", "model": "no-such-model", "step_s": 1.0}, {"model": "llama3.2-1b", "step_s": 1.0}]},
     "run 'a': "),
])
def test_bad_runs_files_are_one_line_errors(tmp_path, capsys, runs, fragment):
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(runs))
    out = tmp_path / "mine.yaml"
    assert main(["fit", str(path), "--hardware", "h100-sxm", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_missing_runs_file_is_named(tmp_path, capsys):
    assert main(["fit", str(tmp_path / "nope.yaml"), "--hardware", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert f"measured-steps file {tmp_path / 'nope.yaml'} does not exist" in err and len(err.splitlines()) == 1


def test_an_unknown_knob_is_refused():
    with pytest.raises(PipesimError, match="knob 'clock' is not one pipesim fits"):
        pipesim.fit_chip(_measured(), H100, ["clock"])
    assert set(KNOBS) <= set(KNOBS_BY_FIELD)


def test_fsdp_runs_give_back_zero3s_overlap_share():
    """ZeRO-3's overlap share, fitted to published FSDP runs for the presets, comes back from a system's own."""
    truth = replace(H100, training_gemm_ratio=0.9, zero3_overlap_share=0.625)
    configs = {"8b fsdp16": dict(schedule="1f1b", pp=1, mb=2, model="llama3.1-8b", dp=16, zero=3),
               "8b fsdp64": dict(schedule="1f1b", pp=1, mb=1, model="llama3.1-8b", dp=64, zero=3),
               "1b fsdp8": dict(schedule="1f1b", pp=1, mb=4, model="llama3.2-1b", dp=8, zero=3),
               "8b fsdp8": dict(schedule="1f1b", pp=1, mb=2, model="llama3.1-8b", dp=8, zero=3),
               "8b dp8 zero1": dict(schedule="1f1b", pp=1, mb=4, model="llama3.1-8b", dp=8, zero=1),
               "1b dp8 zero1": dict(schedule="1f1b", pp=1, mb=4, model="llama3.2-1b", dp=8, zero=1)}
    steps = []
    for label, options in configs.items():
        o = dict(options)
        seconds = pipesim.simulate(o.pop("schedule"), o.pop("pp"), o.pop("mb"), hardware=truth, **o).step_time
        steps.append(MeasuredStep(label, options, seconds))
    result = pipesim.fit_chip(steps, H100, ["training_gemm_ratio", "zero3_overlap_share"])
    assert result.values == {"training_gemm_ratio": 0.9, "zero3_overlap_share": 0.625}
    assert result.mean_abs("left_out") < 1e-9
