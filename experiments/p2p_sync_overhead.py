"""Where the chips' ``p2p_sync_overhead`` comes from: Qi et al. 2024's own runs, measured two ways.

Table 4 gives each schedule's throughput at three microbatch counts m. In steady state a step grows by one
microbatch's time per microbatch, so the slope of step time against m is what a rank really spends per
microbatch. Table 9 profiles the passes of the same runs (T_F, T_B, T_W per stage) and one stage-boundary
send (T_comm). The slope holds more than the passes and the sends: 1.3–4.8 ms per microbatch, in every
model and schedule. Megatron-LM synchronises the device after each batched isend/irecv (``batch_p2p_sync``),
so the host starts the next pass with nothing queued: that gap, per call, is the constant. Calls per
microbatch and rank: two for 1F1B and the zero-bubble schedules (one after each sending pass), v for the
interleaved schedule (it exchanges a forward's output and a backward's gradient in one call). The profiled
passes are a typical GPU's, while the step runs at its slowest GPU's pace (``pipesim.analytic.slowest_gpu``):
that difference is taken out of the gap first (it was 1.18 ms per call before).

Run: ``python experiments/p2p_sync_overhead.py`` — each (model, schedule)'s gap per call and their median,
which the chips' ``p2p_sync_overhead`` rounds (a test holds the two together).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.analytic.slowest_gpu import slowest_gpu_factor
from pipesim.synth.paper import PAPER_ROWS, QI_TABLE4, QI_TABLE4_SCHEDULES


@dataclass(frozen=True)
class SyncGap:
    model: str
    schedule: str
    slope_ms: float  # published step time per microbatch (Table 4)
    profiled_ms: float  # passes and sends per microbatch (Table 9)
    calls: int  # synchronising P2P calls per microbatch on a middle rank

    @property
    def per_call_ms(self) -> float:
        return (self.slope_ms - self.profiled_ms) / self.calls


def sync_gaps() -> list[SyncGap]:
    gaps = []
    for name, (pp, micro_batch, by_m, _) in QI_TABLE4.items():
        profile = [row for row in PAPER_ROWS if f"zb-{row.model.lower()}" == name]
        # the profile's passes are a typical GPU's; the step runs at the slowest of the pp GPUs' pace
        # (pipesim.analytic.slowest_gpu), which is not a synchronisation gap
        pace = slowest_gpu_factor(pp, CHIP_PRESETS["a100-80gb"].gpu_speed_spread)
        passes = pace * statistics.mean(r.forward + r.backward_input + r.backward_weight for r in profile)
        send = statistics.mean(r.comm for r in profile)
        counts = np.array(list(by_m))
        for column, schedule in enumerate(QI_TABLE4_SCHEDULES):
            step_ms = [1e3 * m * micro_batch / (by_m[m][column] * pp) for m in counts]
            slope = float(np.polyfit(counts, step_ms, 1)[0])
            chunks = (MODEL_PRESETS[name].layers + 2) // pp if schedule == "interleaved" else 1
            calls = chunks if chunks > 1 else 2
            gaps.append(SyncGap(name, schedule, slope, passes + 2 * chunks * send, calls))
    return gaps


def derived_overhead() -> float:
    """The median gap per synchronising call, in seconds."""
    return statistics.median(g.per_call_ms for g in sync_gaps()) / 1e3


def main(argv: list[str] | None = None) -> None:
    from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

    args = parse_experiment_args(experiment_parser(__doc__, figures=False,
                                                   fast_help="no effect: the table is instant"), argv)
    record_output(args.out, "p2p_sync_overhead.txt")
    print(f"{'model':<10}{'schedule':<13}{'slope ms':>10}{'profiled ms':>13}{'calls':>7}{'gap/call ms':>13}")
    for g in sync_gaps():
        print(f"{g.model:<10}{g.schedule:<13}{g.slope_ms:>10.2f}{g.profiled_ms:>13.2f}{g.calls:>7}"
              f"{g.per_call_ms:>13.2f}")
    print(f"\nmedian per call: {derived_overhead() * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
