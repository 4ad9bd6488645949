"""Every default the Python API and the ``pipesim`` command line share, defined once.

The argparse layer reads these (for its ``default=`` values and the defaults its help texts state), so a
notebook call and the command with the same arguments run the same configuration.
"""

from __future__ import annotations

from pipesim.analytic.layout import NAMED_OPTIMIZER_BYTES
from pipesim.program.build import DEFAULT_MICROBATCHES, DEFAULT_PP
from pipesim.sim.costs import StageCosts

__all__ = [
    "DEFAULT_CHUNKED_SCHEDULE", "DEFAULT_HARDWARE", "DEFAULT_MICROBATCHES", "DEFAULT_PP", "DEFAULT_SCHEDULE",
    "DEFAULT_STEPS", "PARAM_BYTES", "PLAN_DEFAULTS", "SWEEP_DEFAULTS", "SYNTH_DEFAULTS", "UNIT_COSTS", "PlanDefaults",
    "SweepDefaults", "SynthDefaults", "default_schedule",
]

DEFAULT_SCHEDULE = "1f1b"
#: The schedule a run with several chunks per rank gets when it names none: Megatron-LM's, which interleaves
#: whenever its virtual pipeline size is above one.
DEFAULT_CHUNKED_SCHEDULE = "interleaved"
DEFAULT_HARDWARE = "h100-sxm"
#: Back-to-back steps simulated for a post-validation steady state (two is the least that has one).
DEFAULT_STEPS = 3
#: ``param_bytes``'s named accounts: weights + gradients + Adam state per parameter. 18 is Megatron's (FP32
#: gradients), 16 the ZeRO paper's (16-bit gradients); ``W+G+O`` names any other (``OptimizerBytes.parse``).
PARAM_BYTES = NAMED_OPTIMIZER_BYTES
DEFAULT_PARAM_BYTES = "18"
#: The unit-cost model's defaults (F=1, B=2, I=W=1, no P2P latency): ``StageCosts()``'s own values.
UNIT_COSTS = StageCosts()


def default_schedule(chunks: int | None = None) -> str:
    """The schedule of a run that names none: 1F1B, or interleaved for more than one chunk per rank."""
    return DEFAULT_CHUNKED_SCHEDULE if chunks is not None and chunks > 1 else DEFAULT_SCHEDULE


class SweepDefaults:
    """``pipesim sweep``'s grid when an axis is not given."""

    schedules = ("gpipe", "1f1b", "interleaved")
    pp = (2, 4, 8)
    microbatches = (8, 16, 32, 64)
    forward = (UNIT_COSTS.forward,)
    backward = (UNIT_COSTS.backward,)
    comm = (0.0,)


class PlanDefaults:
    """``pipesim plan``'s search space when an option is not given."""

    hardware = DEFAULT_HARDWARE
    context_parallel = (1, 2, 4, 8)
    min_cp_tokens = 2048
    micro_batch_sizes = (1, 2, 4, 8)
    max_chunks = 4
    param_bytes = DEFAULT_PARAM_BYTES
    top = 10
    jobs = 1


class SynthDefaults:
    """``pipesim synthesize``'s search when not told otherwise."""

    method = "local"  # greedy, then local search
    exact_seconds = 30.0  # CP-SAT's time limit with method "exact"
    exact_max_tasks = 300  # CP-SAT is skipped above this many F/I/W passes


SWEEP_DEFAULTS = SweepDefaults()
SYNTH_DEFAULTS = SynthDefaults()
PLAN_DEFAULTS = PlanDefaults()
