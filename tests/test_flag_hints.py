"""A flag pipesim spells otherwise is refused with the flag it probably meant (pipesim/cli/flag_hints.py): other
tools' words for the same setting, else the command's closest flag by spelling; said in the one line, not acted on."""

from __future__ import annotations

import pytest

from pipesim.cli.flag_hints import SYNONYMS, flags_of, hint_text, subcommand_parser, suggestion
from pipesim.cli.main import build_parser, main


def _flags(command: str) -> list[str]:
    return flags_of(subcommand_parser(build_parser(command), command))


@pytest.mark.parametrize(("typed", "meant"), [
    ("--chip", "--hardware"), ("--device=h100-sxm", "--hardware"), ("--micro-batches", "--mb"),
    ("--tensor-parallel-size", "--tp"), ("--seqlen", "--seq-len"), ("--vpp", "--chunks"),
    ("--hardwre", "--hardware"),  # a typo: the closest by spelling
    ("--foo", None), ("h100-sxm", None),  # nothing close; a value is not a flag
])
def test_the_flag_probably_meant(typed, meant):
    assert suggestion(typed, _flags("simulate")) == meant


def test_every_synonym_names_a_flag_that_simulate_or_plan_takes_and_none_is_itself_a_flag():
    known = set(_flags("simulate")) | set(_flags("plan"))
    assert set(SYNONYMS.values()) <= known
    # a synonym that is a flag of its own would never be unrecognised (Megatron-LM's spellings are taken as flags)
    assert not set(SYNONYMS) & set(_flags("simulate")) - {"--global-batch-size"}


def test_a_synonym_for_a_flag_the_command_lacks_is_not_suggested():
    assert suggestion("--chip", ["--model", "--gpus"]) is None
    assert hint_text(["--chip", "x", "--seqlen", "4"], ["--hardware", "--seq-len"]) == (
        " (did you mean --hardware for --chip, --seq-len for --seqlen?)")


def test_the_cli_says_it_in_the_one_line_and_runs_nothing(capsys):
    assert main(["simulate", "--chip", "h100-sxm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "unrecognized arguments: --chip h100-sxm (did you mean --hardware for --chip?)" in err
    assert main(["simulate", "--gpu", "h100-sxm"]) == 2  # argparse's ambiguous prefix, told the same
    assert "could match --gpus, --gpu-speed-spread (did you mean --hardware for --gpu?)" in capsys.readouterr().err
    assert main(["plan", "--model", "llama3.1-8b", "--num-gpus", "8", "--global-batch", "8"]) == 2
    assert "(did you mean --gpus for --num-gpus?)" in capsys.readouterr().err
    assert main(["simulate", "--frobnicate", "3"]) == 2
    assert "did you mean" not in capsys.readouterr().err
