"""The README quotes validation's headline figures by hand; ``experiments/validation_loso.py --markdown`` writes them
into docs/validation.md. The two must say the same: the README's ranking paragraph once lagged a release behind."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())  # lines joined: figures wrap


def _one(pattern: str, text: str, where: str) -> tuple[str, ...]:
    found = re.findall(pattern, text)
    assert len(found) == 1, f"{where}: {len(found)} matches of {pattern!r}"
    return found[0] if isinstance(found[0], tuple) else (found[0],)


def test_the_readme_quotes_validations_left_out_ranking():
    validation = _one(r"Ranking, left out: (\d+) groups, mean Spearman ([+−-][\d.]+) \(median [+−-][\d.]+\), "
                      r"([\d,]+) of ([\d,]+) pairs \(\d+%\); of the pairs published more than 5% apart, ([\d,]+) of "
                      r"([\d,]+)", _text("docs/validation.md"), "docs/validation.md")
    readme = _one(r"\*\*Spearman ([+−-][\d.]+) left out\*\* over (\d+) groups \(median [+−-][\d.]+\), ([\d,]+) of "
                  r"([\d,]+) pairs ordered as measured .*? more than 5 % apart, the choices a planner's ranking "
                  r"decides, ([\d,]+) of ([\d,]+)", _text("README.md"), "README.md")
    groups, spearman, right, pairs, apart_right, apart = validation
    assert readme == (spearman, groups, right, pairs, apart_right, apart)


def test_the_readme_quotes_validations_left_out_headline():
    validation = _one(r"All (\d+) rows: left out ([\d.]+)% mean \([\d.]+ %\), bias ([+−-][\d.]+)%",
                      _text("docs/validation.md"), "docs/validation.md")
    readme = _one(r"\| all \| (\d+) \| \*\*([\d.]+) %\*\* \| ([+−-][\d.]+) % \|", _text("README.md"), "README.md")
    assert readme == validation


def test_the_readme_quotes_validation_forward_in_time():
    validation = _one(r"\*\*The other (\d+), predicted from the past alone: ([\d.]+) % mean \|error\|, bias "
                      r"([+−-][\d.]+) %", _text("docs/validation.md"), "docs/validation.md")
    readme = _one(r"\| forward in time: [^|]+ \| (\d+) \| ([\d.]+) % \| ([+−-][\d.]+) % \|", _text("README.md"),
                  "README.md")
    assert readme == validation
