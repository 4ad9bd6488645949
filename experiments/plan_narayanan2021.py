"""Sanity of ``pipesim plan`` against published practice: Narayanan et al. 2021, Table 1 (Megatron-LM, A100s).

For each row (model, GPUs, global batch), the planner searches only what that paper had: 1F1B and interleaved
1F1B, full activation recomputation, no sequence parallelism (Korthikanti et al. 2023 came later), no
ZeRO, BF16, no context parallelism, unfused attention, blocking pipeline sends (no P2P overlap yet), A100 80 GB.
The table gives the published (tp, pp), the planner's winner, and where the best configuration with the
published (tp, pp) ranks among every configuration that fits (configurations that tie on step time with a
leaner one are not counted, as in ``pipesim plan``'s list).
Run: ``python experiments/plan_narayanan2021.py [--fast]`` (``--fast``: the three smallest rows).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import the sibling table

from pipesim.analytic.chip_presets import CHIP_PRESETS
from pipesim.analytic.layout import AttentionKernel, Precision, Recompute, ZeroStage
from pipesim.analytic.model_presets import MODEL_PRESETS
from pipesim.plan.ranking import distinct_top
from pipesim.plan.search import run_plan
from pipesim.plan.space import PlanRequest
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.validation.sources import PUBLISHED_RUNS
from pipesim.validation.sources.narayanan2021 import SOURCE as NARAYANAN

EVERY = 10**9  # rank every configuration: no pruning by time, so the rank of the published one is exact


def plan_row(name: str, gpus: int, batch: int):
    request = PlanRequest(MODEL_PRESETS[name], CHIP_PRESETS["a100-80gb"], gpus, batch,
                          schedules=("1f1b", "interleaved"), recompute=(Recompute.FULL,), sequence_parallel=(False,),
                          zero=(ZeroStage.NONE,), precision=(Precision.BF16,), context_parallel=(1,),
                          attention=AttentionKernel.UNFUSED, overlap_p2p=False)  # 2021: no P2P overlap yet
    ranked, _ = distinct_top(run_plan(request, top=EVERY).fitting(), EVERY)
    return ranked


def main() -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="only the three smallest rows")
    table1 = [(r.model, r.tp, r.pp, r.gpus, r.global_batch) for r in PUBLISHED_RUNS if r.source == NARAYANAN]
    args = parse_experiment_args(parser)
    record_output(args.out, "plan_narayanan2021.md")
    rows = table1[:3] if args.fast else table1
    print("| model | GPUs | batch | published (tp, pp) | planner #1 | its step s | rank of published (tp, pp) | "
          "step s at published | slower than #1 | ranked | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, tp, pp, gpus, batch in rows:
        start = time.perf_counter()
        ranked = plan_row(name, gpus, batch)
        seconds = time.perf_counter() - start
        best = ranked[0]
        published = next(((i, o) for i, o in enumerate(ranked, 1) if (o.candidate.tp, o.candidate.pp) == (tp, pp)),
                         None)
        if published:
            rank, time_at = published[0], published[1].evaluation.step_time
            cells = f"{rank} | {time_at:.2f} | {time_at / best.evaluation.step_time - 1:+.1%}"
        else:
            cells = "does not fit | – | –"
        print(f"| {name} | {gpus} | {batch} | ({tp}, {pp}) | {best.candidate.label()} | "
              f"{best.evaluation.step_time:.2f} | {cells} | {len(ranked)} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
