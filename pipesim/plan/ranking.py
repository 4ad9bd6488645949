"""Which of the fitting configurations a plan lists: the fastest, without exact step-time ties that need more memory."""

from __future__ import annotations

__all__ = ["distinct_top"]


def distinct_top(ranked: list, top: int) -> tuple[list, int]:
    """The first ``top`` of ``ranked`` (fastest, then leanest), skipping exact step-time ties that need more
    memory: with equal speed the leaner configuration is strictly better, so the others only crowd the list.
    Returns the listed outcomes and how many ties were skipped."""
    shown, hidden = [], 0
    for outcome in ranked:
        if shown and outcome.evaluation.step_time == shown[-1].evaluation.step_time:
            hidden += 1
            continue
        if len(shown) == top:
            break
        shown.append(outcome)
    return shown, hidden
