"""Test inputs about schedules that several test files draw: a built-in schedule with a shape it accepts
(hypothesis), and the Python schedule examples of docs/own-schedule.md."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from pipesim.program.loader import load_schedule

OWN_SCHEDULE_PAGE = Path(__file__).resolve().parent.parent / "docs" / "own-schedule.md"


def schedule_shapes(names, max_pp: int, max_chunks: int, max_microbatches: int):
    """A strategy for ``(name, pp, microbatches, chunks)``: one of ``names`` with a shape its file accepts."""

    @st.composite
    def draw_shape(draw):
        name = draw(st.sampled_from(names))
        limits = load_schedule(name).limits  # each schedule file declares what it builds
        pp = draw(st.integers(1, max_pp))
        chunks = draw(st.sampled_from(limits.chunks) if limits.chunks else st.integers(1, max_chunks))
        mb = (pp * draw(st.integers(1, 4)) if limits.microbatches_multiple_of_pp
              else draw(st.integers(1, max_microbatches)))
        pp, mb = limits.round_up(pp, mb)
        assert limits.accepts(pp, mb, chunks)
        return name, pp, mb, chunks

    return draw_shape()


def own_schedule_example(marker: str) -> str:
    """The Python code block that follows ``<!-- marker`` in docs/own-schedule.md."""
    after = OWN_SCHEDULE_PAGE.read_text()
    after = after[after.index(f"<!-- {marker}"):]
    start = after.index("```python\n") + len("```python\n")
    return after[start:after.index("```\n", start)]
