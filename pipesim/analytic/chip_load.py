"""Loading a chip by name or file: the presets, the committed measured chips, or a user's .yaml/.json.

Apart from :mod:`pipesim.analytic.chip_spec` (the dataclass and its schema) because the presets are built from
that dataclass: one module that knows both keeps the spec ↔ presets import one way.
"""

from __future__ import annotations

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.chip_spec import ChipSpec, chip_from_dict
from pipesim.analytic.measured_chips import measured_chip_files
from pipesim.io.spec_files import preset_or_file


def load_chip(spec: str) -> ChipSpec:
    """A preset name, a committed measured chip's name (``pipesim chips``) or a path to a .yaml/.json chip file."""
    if spec.lower() not in CHIP_PRESETS and spec.lower() in measured_chip_files():  # a committed measured file
        spec = str(measured_chip_files()[spec.lower()])
    return preset_or_file(spec, CHIP_PRESETS, flag="--hardware", what="chip", listing="pipesim chips",
                          from_dict=chip_from_dict)
