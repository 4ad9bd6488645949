"""The planner's answer as one hash: the top list and the Pareto front of a search, every field of every row.

A speed-up of the search must leave its answer identical (docs/speed.md): run this before and after and compare
the printed hashes. ``python experiments/plan_fingerprint.py`` searches Llama 2 70B on 1,024 H100s (the
command of issue 22); ``--top N`` lists more rows than the user's top 5, so ties at the edge show too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

from pipesim.api.planning import plan


def fingerprint(result, top: int) -> tuple[str, list[dict]]:
    """sha256 over the top ``top`` fitting rows and the front (label, evaluation, exact memory), in order."""
    search = result.search
    rows = [
        {"label": o.candidate.label(), "m": o.candidate.microbatches, **o.evaluation.to_dict()}
        for o in search.fitting()[:top]
    ]
    rows += [
        {"front": o.candidate.label(), "m": o.candidate.microbatches, **o.evaluation.to_dict()} for o in search.pareto()
    ]
    text = json.dumps(rows, sort_keys=True)  # floats print exactly (repr), so equal text means equal values
    return hashlib.sha256(text.encode()).hexdigest(), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama2-70b")
    parser.add_argument("--hardware", default="h100-sxm")
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--global-batch", type=int, default=1024)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    clock = time.perf_counter()
    result = plan(args.model, args.gpus, args.global_batch, top=args.top, hardware=args.hardware)
    seconds = time.perf_counter() - clock
    digest, rows = fingerprint(result, args.top)
    search = result.search
    print(
        f"{digest}  top {args.top} + front {len(rows) - args.top} rows; simulated "
        f"{search.count(type(search.outcomes[0].status).SIMULATED)}; {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
