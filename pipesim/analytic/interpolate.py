"""Reading a measured table between its points: linear in log₂ of the coordinate, held at the ends.

Measured tables (collective shares by group size, attention rates by sequence and head size) are taken at powers
of two; a quantity in between is read on a log₂ scale, and beyond the ends the end point's value is kept rather
than extrapolated.
"""

from __future__ import annotations

import math
from itertools import pairwise


def interpolate_log2(points: tuple[tuple[float, float], ...], x: float) -> float:
    """``points`` sorted by their first element, non-empty: the value at ``x``, linear in log₂(x) between the two
    nearest points, the end point's beyond."""
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in pairwise(points):
        if x0 <= x <= x1:
            w = (math.log2(x) - math.log2(x0)) / (math.log2(x1) - math.log2(x0))
            return y0 + w * (y1 - y0)
    raise AssertionError("unreachable: the points are sorted and x lies between the ends")
