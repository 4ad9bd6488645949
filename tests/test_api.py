"""pipesim's Python API: every public function and result attribute, held to what the command line prints for
the same arguments (one library call under each command, so they must agree exactly)."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

import pipesim
import pipesim.api
from pipesim.api.defaults import DEFAULT_SCHEDULE, PLAN_DEFAULTS, SWEEP_DEFAULTS, default_schedule
from pipesim.cli.main import build_parser, main
from pipesim.errors import PipesimError
from pipesim.plots.gantt import draw_gantt

ROOT = Path(__file__).resolve().parents[1]
GIB = 2.0**30


def cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


# --- the package surface ---------------------------------------------------------------------------------------


def test_import_pipesim_stays_cheap():
    code = ("import sys, pipesim; heavy = [m for m in ('pandas', 'matplotlib', 'numba', 'torch', 'simpy', "
            "'pipesim.plan', 'pipesim.api') if m in sys.modules]; print(heavy)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_simulate_on_unit_costs_imports_no_model_and_no_frames():
    """`pipesim simulate --json` without --model loads neither the analytic model (chips, models, the step report)
    nor pandas or matplotlib (issue 22: import only what a command uses)."""
    code = ("import sys, io, contextlib; from pipesim.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): assert main(['simulate', '--pp', '4', '--mb', '8', "
            "'--json']) == 0\n"
            "print([m for m in ('pandas', 'matplotlib', 'pipesim.api.model_setup', 'pipesim.analytic.step_report', "
            "'pipesim.analytic.to_costs', 'pipesim.analytic.chip_spec', 'pipesim.analytic.model_spec', "
            "'pipesim.plan') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_api_module_documents_and_exports_every_name():
    assert pipesim.api.__doc__ and "Example" in pipesim.api.__doc__
    for name in pipesim.api.__all__:
        obj = getattr(pipesim.api, name)
        if callable(obj):
            assert obj.__doc__, f"pipesim.api.{name} has no docstring"
    for name in pipesim._API_NAMES:
        if name != "plan":
            assert getattr(pipesim, name) is getattr(pipesim.api, name)
    # pipesim.plan is also the planner package (bound by any import of pipesim.plan.*): calling it plans.
    importlib.import_module("pipesim.plan.search")  # binds the package to the name pipesim.plan
    assert callable(pipesim.plan)
    with pytest.raises(AttributeError):
        pipesim.no_such_thing  # noqa: B018
    # what a notebook's completion lists: the public names, not the helpers the package imports for itself
    public = {name for name in dir(pipesim) if not name.startswith("_")}
    assert set(pipesim.__all__) <= public
    assert "import_module" not in public


def test_defaults_are_the_command_lines():
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices

    def default(command: str, dest: str):
        return next(a.default for a in sub[command]._actions if a.dest == dest)

    # simulate names no schedule by default: 1F1B, or interleaved where --chunks asks for more than one
    assert default("simulate", "schedule") is None
    assert (default_schedule(None), default_schedule(1), default_schedule(3)) == (DEFAULT_SCHEDULE, "1f1b",
                                                                                   "interleaved")
    assert default("sweep", "pp") == list(SWEEP_DEFAULTS.pp)
    assert default("sweep", "mb") == list(SWEEP_DEFAULTS.microbatches)
    assert default("sweep", "schedule") == ",".join(SWEEP_DEFAULTS.schedules)
    assert default("plan", "top") == PLAN_DEFAULTS.top
    assert default("plan", "cp") == PLAN_DEFAULTS.context_parallel
    assert default("plan", "hardware") == PLAN_DEFAULTS.hardware


# --- simulate ---------------------------------------------------------------------------------------------------


def test_simulate_text_and_json_are_the_clis(capsys):
    result = pipesim.simulate("interleaved", pp=4, mb=8, forward=1.5, stage_cost={1: {"backward": 4}})
    text = cli(capsys, "simulate", "-s", "interleaved", "--pp", "4", "--mb", "8", "-F", "1.5",
               "--stage-cost", "1:backward=4")
    assert str(result) + "\n" == text
    data = json.loads(cli(capsys, "simulate", "-s", "interleaved", "--pp", "4", "--mb", "8", "-F", "1.5",
                          "--stage-cost", "1:backward=4", "--json"))
    assert json.loads(result.to_json()) == data  # to_dict() holds tuples where JSON has lists
    assert result.to_dict()["metrics"]["makespan"] == data["metrics"]["makespan"]
    assert result.model_report is None and result.step_band is None
    assert result.step_time == result.metrics.makespan == data["metrics"]["makespan"]
    assert "SimResult interleaved" in repr(result)


def test_simulate_abstract_costs_match_the_closed_form():
    result = pipesim.simulate("1f1b", pp=4, mb=8)
    assert result.metrics.bubble_fraction == pytest.approx(3 / 11)
    assert result.time_unit.value == "unit"
    timeline = result.timeline
    assert isinstance(timeline, pd.DataFrame) and timeline.attrs["time_unit"] == "unit"
    assert set(timeline["op"]) >= {"F", "B", "SEND_F", "RECV_B", "STEP"}
    assert result.memory.peak_activations == (4.0, 3.0, 2.0, 1.0)  # 1F1B's min(p − r, m)


def test_simulate_a_model_gives_the_clis_step_time(capsys):
    kwargs = dict(model="llama2-7b", hardware="h100-sxm", tp=2, zero=1, dp=2)
    result = pipesim.simulate("1f1b", pp=2, mb=4, **kwargs)
    data = json.loads(cli(capsys, "simulate", "--pp", "2", "--mb", "4", "--model", "llama2-7b", "--hardware",
                          "h100-sxm", "--tp", "2", "--zero", "1", "--dp", "2", "--json"))
    report = data["model_report"]
    assert result.step_time == report["step_time_s"]
    assert result.step_band.relative == report["step_time_band"]["relative"]
    assert result.model_report.memory.band.relative == report["memory"]["peak_band"]["relative"] > 0
    assert result.model_report.mfu == pytest.approx(report["mfu"])
    assert json.loads(json.dumps(result.to_dict())) == data
    assert result.time_unit.value == "s"
    assert result.step_time > result.metrics.makespan * 0.5  # seconds of a real step, not units


def test_zero_0_is_accepted_as_the_output_names_it(capsys):
    out = cli(capsys, "simulate", "--pp", "2", "--mb", "2", "--model", "llama2-7b", "--zero", "0")
    assert "ZeRO 0" in out


def test_simulate_refuses_model_options_without_a_model():
    with pytest.raises(PipesimError, match="--tp describes a real model"):
        pipesim.simulate("1f1b", tp=2)
    with pytest.raises(PipesimError, match="--forward sets unit costs"):
        pipesim.simulate("1f1b", model="llama2-7b", forward=2.0)
    with pytest.raises(PipesimError, match=r"simulate\(\) got unknown option\(s\) tensor_parallel;"):
        pipesim.simulate("1f1b", model="llama2-7b", tp=2, tensor_parallel=2)  # only the unknown one named
    with pytest.raises(PipesimError, match=r"synthesize\(\) got unknown option\(s\) microbatches;"):
        pipesim.synthesize(model="llama2-7b", microbatches=4)


@pytest.mark.parametrize(("options", "message"), [
    ({"tp": "8"}, "tp='8' must be a whole number"),  # a string where the command line's flag would parse it
    ({"tp": 0}, "tp=0 must be ≥ 1"),  # was accepted, and simulated as tp 1
    ({"zero": 5}, "zero=5 must be from 0 to 3"),
    ({"moe_imbalance": "x"}, "moe_imbalance='x' must be a finite number"),
    ({"sequence_parallel": "yes"}, "sequence_parallel='yes' must be True or False"),
])
def test_a_library_option_of_the_wrong_kind_is_one_line(options, message):
    """What the command line's parser refuses in a flag, the library refuses in a keyword: one line naming it,
    not a TypeError from deep in the model, nor a value taken silently."""
    with pytest.raises(PipesimError, match=re.escape(f"simulate(): {message}")):
        pipesim.simulate("1f1b", 2, 4, model="llama2-7b", **options)
    # what the command line would take is taken: numpy's integers and booleans, a layer count of 0 on an end stage
    report = pipesim.simulate("1f1b", 2, 4, model="llama2-7b", tp=np.int64(2), sequence_parallel=np.bool_(True),
                              first_stage_layers=0).model_report
    assert report.layout.tp == 2 and report.layout.sequence_parallel


@pytest.mark.parametrize(("arguments", "message"), [
    ({"schedule": 1}, "schedule=1 must be a schedule's name, file or Program text"),
    ({"model": 7}, "model=7 must be a preset's name, a model file or a ModelSpec"),
    ({"model": "llama2-7b", "hardware": 0.5}, "hardware=0.5 must be a preset's name, a chip file or a ChipSpec"),
    ({"config": float("nan")}, "config=nan must be a run config file's path"),
])
def test_what_names_a_thing_is_a_name_or_the_thing(arguments, message):
    """A fuzzed `pipesim fit` runs file gave a run `model: 1000000000` and another `schedule: 1`: internal errors
    (an int has no with_shape, no lower) until the library checked what its naming arguments are."""
    with pytest.raises(PipesimError, match=re.escape(f"simulate(): {message}")):
        pipesim.simulate(**arguments)


def test_a_schedule_file_may_be_given_as_a_path():
    from pathlib import Path

    by_path = pipesim.simulate(Path(__file__).resolve().parents[1] / "schedules" / "1f1b.py", pp=4, mb=8)
    assert by_path.metrics.makespan == pipesim.simulate("1f1b", pp=4, mb=8).metrics.makespan


def test_plans_keywords_are_checked_in_one_line():
    """plan() forwards its search space to plan_request: a keyword it does not take, or GPUs that are not a
    whole number, is one line naming it (a TypeError from inside the search before)."""
    with pytest.raises(PipesimError, match=r"plan\(\) got unknown option\(s\) tp; the search space's options are "
                                           r"hardware, "):
        pipesim.plan("llama3.2-1b", 8, 32, tp=[1, 2])
    with pytest.raises(PipesimError, match=re.escape("plan(): gpus='8' must be a whole number")):
        pipesim.plan("llama3.2-1b", "8", 32)
    with pytest.raises(PipesimError, match=re.escape("plan(): global_batch=0 must be ≥ 1")):
        pipesim.plan("llama3.2-1b", 8, 0)


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved", "zb-v"])
def test_memory_over_time_peaks_at_the_reported_peak(schedule):
    result = pipesim.simulate(schedule, pp=4, mb=8, activation_bytes=2**30)
    over = result.memory.over_time
    assert list(over.columns) == ["rank", "time", "activations", "gib"]
    peaks = over.groupby("rank")["activations"].max()
    assert tuple(peaks.tolist()) == pytest.approx(result.memory.peak_activations)
    gib = over.groupby("rank")["gib"].max()
    assert tuple(gib.tolist()) == pytest.approx(tuple(b / GIB for b in result.memory.peak_bytes))
    assert over.groupby("rank")["activations"].last().abs().max() == pytest.approx(0.0)  # all freed by the end
    assert over["time"].max() <= result.metrics.makespan


def test_memory_plot_on_axes_and_to_a_file(tmp_path):
    result = pipesim.simulate("1f1b", pp=3, mb=6)
    fig, ax = plt.subplots()
    assert result.memory.plot(ax=ax) is ax
    assert len(ax.get_lines()) == 3  # one step line per rank
    assert max(max(line.get_ydata()) for line in ax.get_lines()) == 3.0
    assert ax.get_ylabel() == "activations (microbatches)" and ax.get_xlabel() == "time (cost units)"
    plt.close(fig)
    path = tmp_path / "memory.svg"
    result.memory.plot(path)
    assert path.read_text().startswith("<?xml")


def test_simulate_plot_memory_flag_writes_the_figure(tmp_path, capsys):
    path = tmp_path / "m.png"
    out = cli(capsys, "simulate", "--pp", "2", "--mb", "4", "--plot-memory", str(path))
    assert f"wrote memory plot {path}" in out
    assert path.stat().st_size > 1000


def test_gantt_on_shared_user_axes_keeps_their_limits_and_labels(tmp_path):
    abstract = pipesim.simulate("1f1b", pp=2, mb=4)
    model = pipesim.simulate("1f1b", pp=2, mb=4, model="llama2-7b")
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True)
    top.set_xlim(-5, 100)
    bottom.set_xlabel("my time axis")
    abstract.plot(ax=top)
    draw_gantt(bottom, abstract.timeline)
    assert top.get_xlim() == (-5, 100)
    assert bottom.get_xlabel() == "my time axis"
    assert top.get_xlabel() == "time (cost units)"  # abstract costs are not seconds
    plt.close(fig)
    fig, ax = plt.subplots()
    model.plot(ax=ax)
    assert ax.get_xlabel() == "time (s)"
    assert ax.get_xlim()[1] == pytest.approx(model.metrics.makespan)  # own axes: spans the timeline
    plt.close(fig)
    path = tmp_path / "g.png"
    abstract.plot(path)
    assert path.stat().st_size > 1000


# --- plan -------------------------------------------------------------------------------------------------------

PLAN_ARGS = dict(schedules=["1f1b", "interleaved"], precision=["bf16"], cp=[1], zero=[0], recompute=["none"],
                 micro_batch_sizes=[1], top=3)
PLAN_FLAGS = ["--model", "gpt3-2.7b", "--gpus", "4", "--global-batch", "16", "--schedules", "1f1b,interleaved",
              "--precision", "bf16", "--cp", "1", "--zero", "0", "--recompute", "none", "--micro-batch-sizes", "1",
              "--top", "3", "-q"]


@pytest.fixture(scope="module")
def planned():
    importlib.import_module("pipesim.plan.search")  # pipesim.plan is now the package, which still plans
    result = pipesim.plan("gpt3-2.7b", 4, 16, **PLAN_ARGS)
    assert isinstance(result, pipesim.api.PlanResult)
    return result


def test_plan_best_is_the_clis_top_row(planned, capsys, tmp_path):
    out = cli(capsys, "plan", *PLAN_FLAGS, "-o", str(tmp_path / "all.csv"))
    assert out.startswith(planned.header() + "\n" + planned.ranking_text() + "\n")
    first_row = out.splitlines()[3]  # header, counts, column names, then #1
    # the label, then the marks (here "1node": a 1B–8B model on one node, a held-out kind)
    assert first_row.split()[0] == "1" and first_row.split("  ")[-1].strip().startswith(
        planned.best.candidate.label())
    written = pd.read_csv(tmp_path / "all.csv")
    assert len(written) == len(planned.candidates) == planned.search.considered


def test_plan_times_a_token_budget_at_its_listed_steps(planned, capsys):
    """--train-tokens: the best configuration's (or the rank asked for's) training time, as simulate gives it."""
    best = planned.training("1B")
    e = planned.best.evaluation
    assert best.tokens_per_step == pytest.approx(e.tokens_per_s_per_gpu * 4 * e.step_time)
    assert best.step_time == e.step_time and best.gpus == 4 and best.band is not None
    assert planned.training(1e9, rank=2).days >= best.days
    with pytest.raises(PipesimError, match="rank 4 is not a listed configuration"):
        planned.training("1B", rank=4)
    out = cli(capsys, "plan", *PLAN_FLAGS, "--train-tokens", "1B")
    assert f"#1: {best.text()}" in out.splitlines()


def test_plan_result_attributes(planned, tmp_path):
    assert planned.best is planned.ranked[0]
    times = [o.evaluation.step_time for o in planned.ranked]
    assert times == sorted(times) and len(planned.ranked) <= 3
    front = planned.pareto
    assert front["pareto"].all() and len(front) >= 1
    assert planned.best.candidate.label() in set(front["label"])  # the fastest is always on the front
    data = planned.to_dict()
    assert data["ranked"][0]["label"] == planned.best.candidate.label()
    assert data["ranked"][0]["step_time_s"] == planned.best.evaluation.step_time
    assert str(planned) == planned.text() and "nothing fits" not in planned.text()
    assert "best tp" in repr(planned)
    planned.plot(tmp_path / "front.png")
    assert (tmp_path / "front.png").stat().st_size > 1000


def test_plan_that_fits_nothing_says_why():
    result = pipesim.plan("gpt3-2.7b", 4, 16, memory_cap=0.5, **PLAN_ARGS)
    assert result.best is None and result.ranked == []
    assert result.nothing_fits() and "nothing fits" in result.text()


# --- sweep, synthesize, calibrate, overlay, validate, programs and listings -----------------------------------


def test_sweep_equals_the_clis_table(tmp_path, capsys):
    frame = pipesim.sweep(["1f1b", "zb-h1"], pp=[2, 4], mb=[4, 8], backward_input=[1, 3])
    cli(capsys, "sweep", "-s", "1f1b,zb-h1", "--pp", "2,4", "--mb", "4,8", "--backward-input", "1,3", "-q",
        "-o", str(tmp_path / "s.csv"))
    pd.testing.assert_frame_equal(frame.reset_index(drop=True), pd.read_csv(tmp_path / "s.csv"),
                                  check_dtype=False)
    assert frame.attrs["skipped"] == 0
    zb = frame[(frame["schedule"] == "zb-h1") & (frame["pp"] == 4) & (frame["microbatches"] == 8)]
    assert zb["makespan"].nunique() == 2  # I reaches split-backward schedules
    fused = frame[(frame["schedule"] == "1f1b") & (frame["pp"] == 4) & (frame["microbatches"] == 8)]
    assert fused["makespan"].nunique() == 1  # and not fused ones


def test_sweep_takes_plans_spelling_of_the_schedules(tmp_path, capsys):
    """plan's flag and keyword are --schedules/schedules=; sweep takes them for its --schedule/schedule= (not
    both at once)."""
    frame = pipesim.sweep(schedules="1f1b,zb-h1", pp=[2], mb=[4])
    assert pipesim.sweep(["1f1b", "zb-h1"], pp=[2], mb=[4]).equals(frame)
    cli(capsys, "sweep", "--schedules", "1f1b,zb-h1", "--pp", "2", "--mb", "4", "-q", "-o", str(tmp_path / "s.csv"))
    assert pd.read_csv(tmp_path / "s.csv")["schedule"].tolist() == frame["schedule"].tolist() == ["1f1b", "zb-h1"]
    with pytest.raises(PipesimError, match="both schedule= and schedules="):
        pipesim.sweep("1f1b", schedules="zb-h1")


def test_sweep_help_names_its_schedules(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "gpipe,1f1b,interleaved" in " ".join(capsys.readouterr().out.split())


def test_plot_says_when_it_averages_an_axis(tmp_path, capsys):
    frame = pipesim.sweep(["1f1b"], pp=[2, 4], mb=[4, 8])
    frame.to_csv(tmp_path / "s.csv", index=False)
    out = cli(capsys, "plot", str(tmp_path / "s.csv"), "--x", "pp", "--facet", "", "-o", str(tmp_path / "p.png"))
    assert "mean over microbatches ∈ {4, 8}" in out
    out = cli(capsys, "plot", str(tmp_path / "s.csv"), "--x", "microbatches", "-o", str(tmp_path / "q.png"))
    assert "mean over" not in out


def test_synthesize_matches_the_cli(capsys, tmp_path):
    outcome = pipesim.synthesize(2, 4, method="greedy")
    data = json.loads(cli(capsys, "synthesize", "--pp", "2", "--mb", "4", "--method", "greedy", "--json"))
    mine = outcome.to_dict()
    for key in ("shape", "memory_limit", "origin", "max_stage_span", "makespan", "peak_activations"):
        assert mine[key] == data[key]
    outcome.write(tmp_path / "order.txt")
    again = pipesim.simulate(str(tmp_path / "order.txt"))
    assert again.metrics.makespan == outcome.simulated.metrics.makespan


def test_calibrate_recovers_the_costs_and_matches_the_cli(tmp_path, capsys):
    truth = pipesim.simulate("1f1b", pp=2, mb=4, forward=0.5, backward=1.25)
    path = tmp_path / "measured.csv"
    truth.timeline.to_csv(path, index=False)
    result = pipesim.calibrate(path, warmup_steps=0)
    assert result.costs.default.forward == pytest.approx(0.5)
    assert result.costs.default.backward == pytest.approx(1.25)
    out = cli(capsys, "calibrate", str(path), "--warmup-steps", "0", "-o", str(tmp_path / "c.json"))
    assert out.splitlines()[0] == f"wrote {tmp_path / 'c.json'}: {result.summary()}"
    assert pipesim.calibrate(truth.timeline, warmup_steps=0).costs == result.costs


def test_overlay_prints_the_step_and_units(tmp_path, capsys):
    predicted = pipesim.simulate("1f1b", pp=2, mb=4)
    result = pipesim.overlay(predicted.timeline, predicted.timeline)
    assert result.errors.makespan_error == 0.0 and result.errors.start_error_max == 0.0
    assert result.time_unit == "unit" and result.measured_step == 0
    assert "measured step 0 (of 1; times in unit)" in result.text()
    path = tmp_path / "p.csv"
    predicted.timeline.to_csv(path, index=False)
    out = cli(capsys, "overlay", str(path), str(path), "--time-unit", "unit")
    assert out == result.text() + "\n"
    data = json.loads(cli(capsys, "overlay", str(path), str(path), "--json"))
    assert data["measured_step"] == 0 and data["time_unit"] == "s"


def test_validate_load_program_and_schedules(capsys, tmp_path):
    result = pipesim.validate("zb-v", pp=4, mb=8, p2p="grouped", semantics="grouped")
    assert str(result) + "\n" == cli(capsys, "validate", "-s", "zb-v", "--pp", "4", "--mb", "8",
                                     "--semantics", "grouped", "--p2p", "grouped")
    assert "(grouped lowering)" in str(result)
    program = pipesim.load_program("zb-v", pp=4, mb=8)
    assert program.num_instructions == pipesim.build_program("zb-v", 4, 8).program.num_instructions
    assert program.to_text() == cli(capsys, "lower", "-s", "zb-v", "--pp", "4", "--mb", "8")
    text = tmp_path / "p.txt"
    text.write_text(program.to_text())
    assert "ok: program" in pipesim.validate(program=text).text()
    assert pipesim.validate(program).program is program
    listing = pipesim.schedules()
    assert listing["name"].tolist() == [line.split()[0] for line in cli(capsys, "schedules").splitlines()]
    with pytest.raises(PipesimError):
        pipesim.validate("no-such-schedule")


def test_model_and_chip_listings():
    models, chips = pipesim.models(), pipesim.chips()
    assert "llama2-7b" in set(models["name"]) and (models["params"] > 1e8).all()  # MPT-125M the smallest
    assert "h100-sxm" in set(chips["name"]) and set(chips["source"]) <= {"preset", "measured"}
