"""Issue #24's held-out groups, carried to this release, by kind of run (written by ``python
experiments/held_out_patterns.py --update-records``; see :mod:`pipesim.analytic.held_out_kinds`).

kind: (the issue's lowest and highest signed error when it was filed, the range carried to this release,
the representative runs counted, whether the issue gives the median alone)."""

HELD_OUT: dict[str, tuple[float, float, float, float, int, bool]] = {
    'a100-full-recompute-at-scale': (-0.33, -0.25, -0.1662, -0.0666, 2, False),
    'distributed-optimizer-memory': (0.17, 0.27, 0.17, 0.27, 5, False),
    'long-context': (-0.51, -0.34, -0.3852, -0.1719, 3, False),
    'small-model-one-node': (-0.42, -0.42, -0.2413, -0.2413, 35, True),
    'tp8-without-pipeline': (0.24, 0.24, 0.2491, 0.2491, 2, False),
    'zero3-tp-memory': (-0.52, -0.2, -0.1703, -0.0651, 3, False),
}
