"""Step-time error bands measured by validation by source left out (written by
``python experiments/validation_loso.py --update-bands``; see :mod:`pipesim.analytic.error_band`).

kind: (p90 of |left-out step-time error|, published rows of that kind)."""

BANDS: dict[str, tuple[float, int]] = {'a100-bf16': (0.129, 264), 'hopper-bf16': (0.186, 80), 'hopper-fp8': (0.062, 8)}
POOLED: tuple[float, int] = (0.141, 352)
