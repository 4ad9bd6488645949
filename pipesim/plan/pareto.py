"""The Pareto front of step time against peak memory: the configurations no other beats on both.

A point is dominated when another is at least as fast *and* needs at most as much memory, and is strictly
better in one of the two. The front is found by one sort (time, then memory) and a running minimum of memory:
a point is on the front exactly when it needs less memory than every faster point (Kung, Luccio & Preparata
1975, the two-dimensional maxima problem).
"""

from __future__ import annotations

import numpy as np


def pareto_mask(step_time: np.ndarray, peak: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated points (smaller is better on both axes); ties keep one point."""
    step_time, peak = np.asarray(step_time, dtype=float), np.asarray(peak, dtype=float)
    order = np.lexsort((peak, step_time))
    mask = np.zeros(len(step_time), dtype=bool)
    best_memory = np.inf
    for i in order:
        if peak[i] < best_memory:
            mask[i] = True
            best_memory = peak[i]
    return mask
