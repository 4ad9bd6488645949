"""A token budget's training time at a simulated step (``--train-tokens``): steps, days, GPU-hours and the range of
days the step's error band allows, by hand; what simulate prints and writes to JSON is the library's."""

from __future__ import annotations

import json
import math

import pytest

import pipesim
from pipesim.analytic.training_time import TrainingTime, parse_tokens
from pipesim.cli.main import main
from pipesim.errors import PipesimError


@pytest.mark.parametrize(("text", "tokens"), [("2T", 2e12), ("300B", 3e11), ("300b", 3e11), ("1.5e12", 1.5e12),
                                              ("15,000M", 1.5e10), ("12 T", 1.2e13), ("7", 7.0), ("4k", 4e3),
                                              ("0.5T", 5e11)])
def test_token_counts_as_budgets_are_written(text, tokens):
    assert parse_tokens(text) == pytest.approx(tokens)


@pytest.mark.parametrize("text", ["", "x", "-2T", "0", "0.5", "2Q", "T", "nan", "inf", "1e999", "2TT"])
def test_a_bad_token_count_is_one_line_naming_it(text):
    with pytest.raises(PipesimError, match=r"^--train-tokens '.*' is not a token count; write a positive number"):
        parse_tokens(text)


def test_training_time_by_hand():
    # 1e9 tokens at a million a step: 1,000 steps of 2 s on 8 GPUs
    t = TrainingTime(1e9, 1_000_000, 2.0, 8, band=0.25)
    assert t.steps == 1000 and t.seconds == 2000.0
    assert t.days == pytest.approx(2000 / 86_400)
    assert t.gpu_hours == pytest.approx(2000 * 8 / 3600)
    # |predicted / measured − 1| ≤ 0.25: the measured step is within t / 1.25 … t / 0.75
    low, high = t.days_range
    assert (low, high) == (pytest.approx(t.days / 1.25), pytest.approx(t.days / 0.75))
    # the last step is whole: half a step more is a step more
    assert TrainingTime(1.5e6, 1_000_000, 2.0, 8).steps == 2
    # no band, no range; a band of 100 % or more has no upper end
    assert TrainingTime(1e9, 1_000_000, 2.0, 8).days_range is None
    assert TrainingTime(1e9, 1_000_000, 2.0, 8, band=1.2).days_range[1] is None
    assert "at least" in TrainingTime(1e9, 1_000_000, 2.0, 8, band=1.2).text()
    data = t.to_dict()
    assert (data["steps"], data["days_low"], data["days_high"]) == (1000, low, high)
    assert "1 GPU (" in TrainingTime(1e9, 1_000_000, 2.0, 1).text()


def test_simulate_prints_and_writes_the_librarys_training_time(capsys):
    argv = ["simulate", "--model", "llama3.1-8b", "--hardware", "h100-sxm", "--pp", "2", "--tp", "2", "--dp", "2",
            "--global-batch", "64", "--train-tokens", "2T"]
    result = pipesim.simulate("1f1b", pp=2, model="llama3.1-8b", hardware="h100-sxm", tp=2, dp=2, global_batch=64)
    expected = result.training("2T")
    report = result.model_report
    assert expected.tokens_per_step == 64 * report.model.seq_len == report.tokens_per_step
    assert expected.steps == math.ceil(2e12 / expected.tokens_per_step)
    assert expected.days == pytest.approx(expected.steps * report.step_time / 86_400)
    assert expected.band == report.error_band.relative and expected.gpus == 8
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(expected.text())
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["training"] == pytest.approx(expected.to_dict())


def test_training_time_needs_a_model_and_a_token_count(capsys):
    assert main(["simulate", "--train-tokens", "2T"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--train-tokens times a real model's tokens; add --model NAME" in err
    assert main(["simulate", "--model", "llama3.1-8b", "--train-tokens", "lots"]) == 2
    assert "argument --train-tokens: 'lots' is not a token count" in capsys.readouterr().err
    with pytest.raises(PipesimError, match="train_tokens 'lots' is not a token count"):
        pipesim.simulate("1f1b", pp=1, model="llama3.1-8b").training("lots")
