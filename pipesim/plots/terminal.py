"""A small timeline drawn in the terminal: one line per rank, boxes as wide as their duration.

Each compute box starts with its op letter and microbatch (``F3``, ``B3``) and is padded with a fill that
tells the ops apart without colour (F ' ', B '=', I '-', W '~'); idle time is '·'. An overlapped F-and-B pair
(both halves span one interval) is one box labelled with both, ``F5+B2``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipesim.io.timeline import pair_halves

MAX_WIDTH = 180
_FILL = {"F": " ", "B": "=", "I": "-", "W": "~"}


def render(frame: pd.DataFrame, max_width: int = MAX_WIDTH) -> str | None:
    """Return the drawing, or None when the timeline would be wider than ``max_width`` characters."""
    compute = frame[frame["op"].isin(tuple(_FILL))]
    if compute.empty:
        return None
    durations = (compute["end"] - compute["start"]).to_numpy()
    quantum = float(durations[durations > 0].min()) if (durations > 0).any() else 1.0
    label_width = len(str(int(compute["microbatch"].max()))) + 1
    makespan = float(frame["end"].max())
    columns = math.ceil(makespan / quantum - 1e-9) * label_width
    if columns > max_width:
        return None
    scale = label_width / quantum
    lines = []
    pp = int(frame["rank"].max()) + 1
    halves = pair_halves(compute)
    paired_text = {}  # (rank, start) of a pair → "F5+B2", drawn once from its forward
    for ins in compute[halves].itertuples(index=False):
        key = (ins.rank, ins.start)
        text = f"{ins.op}{ins.microbatch}"
        paired_text[key] = text + "+" + paired_text[key] if ins.op == "F" and key in paired_text else (
            paired_text[key] + "+" + text if key in paired_text else text)
    for rank in range(pp):
        row = np.full(columns, "·", dtype="<U1")
        for ins, half in zip(compute[compute["rank"] == rank].itertuples(index=False),
                             halves[compute["rank"] == rank], strict=True):
            if half and ins.op != "F":
                continue  # drawn with its forward
            begin, end = min(round(ins.start * scale), columns), min(round(ins.end * scale), columns)
            text = paired_text[(ins.rank, ins.start)] if half else f"{ins.op}{ins.microbatch}"
            cells = list(text.ljust(end - begin, _FILL[ins.op]))[: end - begin]
            row[begin:end] = cells
        lines.append(f"rank {rank:>2} |" + "".join(row) + "|")
    lines.append("         legend: F<mb> forward, B<mb>== backward, I<mb>-- input grad, W<mb>~~ weight grad, · idle")
    return "\n".join(lines)
