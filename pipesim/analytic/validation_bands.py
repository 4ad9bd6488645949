"""Step-time error bands measured by validation by source left out (written by
``python experiments/validation_loso.py --update-bands``; see :mod:`pipesim.analytic.error_band`).

kind: (90/90 tolerance bound of |left-out step-time error|, None for too few rows; published rows of
that kind; their largest |left-out error|). MEMORY: (90/90 bound of |peak-memory error| over every published
memory row, rows, sources).
STEP_REGIMES and MEMORY_REGIMES: the layout feature sets (pipesim.analytic.error_band.LayoutFeature) of
those rows, what the bands were measured on. FRAMEWORKS: per training framework the rows name (other than
Megatron-LM's), (rows, sources, lowest and highest signed left-out step-time error).
STEP_GROUPS: per step group (pipesim.analytic.error_band.StepGroup) the rows are of, (rows, sources, lowest,
highest and mean signed left-out step-time error). COMMUNICATION: each source's communication-bound rows
against its others (pipesim.analytic.error_band.CommunicationRecord): (sources with rows on both sides,
those differing the way of the median, the median difference)."""

BANDS: dict[str, tuple[float | None, int, float]] = {
    'a100-bf16': (0.149, 688, 0.385),
    'blackwell-fp4': (None, 17, 0.105),
    'blackwell-fp8': (0.424, 26, 0.424),
    'hopper-bf16': (0.157, 113, 0.188),
    'hopper-fp8': (0.195, 54, 0.211),
}
POOLED: tuple[float, int] = (0.149, 898)
MEMORY: tuple[float, int, int] = (0.064, 118, 6)
STEP_REGIMES: tuple[tuple[str, ...], ...] = (
    (),
    ('cp',),
    ('pp',),
    ('tp',),
    ('tp', 'cp'),
    ('tp', 'pp'),
    ('tp', 'pp', 'cp'),
    ('tp', 'zero-2'),
    ('zero-2',),
    ('zero-3',),
)
MEMORY_REGIMES: tuple[tuple[str, ...], ...] = (
    (),
    ('pp',),
    ('tp',),
    ('tp', 'pp', 'cp'),
    ('zero-3',),
)
FRAMEWORKS: dict[str, tuple[int, int, float, float]] = {
    'megatron-deepspeed': (2, 2, -0.155, -0.146),
    'nanotron': (2, 1, -0.16, -0.073),
    'torchtitan': (2, 1, -0.074, 0.009),
}
STEP_GROUPS: dict[str, tuple[int, int, float, float, float]] = {
    'one-microbatch': (44, 7, -0.424, 0.084, -0.045),
}
COMMUNICATION: tuple[int, int, float] = (18, 13, -0.048)
