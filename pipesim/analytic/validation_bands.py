"""Step-time error bands measured by validation by source left out (written by ``python
experiments/validation_loso.py --update-bands``; see :mod:`pipesim.analytic.error_band`).

kind: (p90 of |left-out step-time error|, published rows of that kind)."""

BANDS: dict[str, tuple[float, int]] = {}
POOLED: tuple[float, int] = (0.1, 0)
