"""The suite's one switch for its full matrices: ``PIPESIM_FULL_MATRIX=1`` runs, beside the default run's
representative subsets, every combination the default run samples (the executor's tp2·dp2 and cp2·tp2 worlds
with every built-in schedule, every cached zb-auto order re-synthesised). docs/tests.md lists them; the
default run keeps a case per code path, so only the cross-product is left to the switch."""

from __future__ import annotations

import os


def full_matrix() -> bool:
    # PIPESIM_CP_FULL_MATRIX=1 is this switch's older, CP-only name, still honoured.
    return "1" in (os.environ.get("PIPESIM_FULL_MATRIX"), os.environ.get("PIPESIM_CP_FULL_MATRIX"))
