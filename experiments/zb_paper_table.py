"""zb-auto against Zero Bubble's published ZB-1p / ZB-2p bubble rates (Qi et al., ICLR 2024, Tables 5 and 9).

For every row of the paper's profiled costs, synthesise at the paper's limits (p·M_B and 2p·M_B), time the
order with pipesim's simulator and print the paper's bubble rate ((longest stage span − m·(F+B+W)) / longest
span) beside the published one. ``--fast``: the p = 8 rows only. ``--markdown``: the README table.
"""

from __future__ import annotations

import time

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.program.lowering import lower
from pipesim.sim.simulator import simulate
from pipesim.synth.paper import PAPER_ROWS
from pipesim.synth.search import Method, synthesize


def measure(row, factor: int, method: Method):
    problem = row.problem(factor)
    clock = time.perf_counter()
    result = synthesize(problem, method)
    seconds = time.perf_counter() - clock
    simulated = simulate(lower(result.schedule()), row.costs(), check=False)
    spans = [r.span for r in simulated.metrics.ranks]
    ideal = row.microbatches * (row.forward + row.backward_input + row.backward_weight)
    rate = (max(spans) - ideal) / max(spans)
    peak = max(simulated.memory.peak_activations)
    return rate, peak, seconds, result.origin


def main() -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="only the pp = 8 rows")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--method", choices=[m.value for m in Method], default="local")
    args = parse_experiment_args(parser)
    record_output(args.out, "zb_paper_table.md" if args.markdown else "zb_paper_table.txt")
    rows = [r for r in PAPER_ROWS if r.pp == 8] if args.fast else PAPER_ROWS
    if args.markdown:
        print("| model | p | m | ZB-1p paper | zb-auto p·M_B | ZB-2p paper | zb-auto 2p·M_B "
              "| search s (both limits, wall clock) |")
        print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = []
        total = 0.0
        for factor in (1, 2):
            rate, peak, seconds, origin = measure(row, factor, Method(args.method))
            total += seconds
            assert peak <= factor * row.pp + 1e-9, (row, factor, peak)
            cells.append((row.published(factor), rate, origin))
        if args.markdown:
            (p1, r1, _), (p2, r2, _) = cells
            print(f"| {row.model} | {row.pp} | {row.microbatches} | {p1:.4f} | {r1:.4f} | {p2:.4f} | {r2:.4f} "
                  f"| {total:.1f} |", flush=True)
        else:
            for factor, (published, rate, origin) in zip((1, 2), cells, strict=True):
                verdict = "ok" if rate <= published + 5e-4 else "ABOVE"
                print(f"{row.model:>6} p={row.pp:<3} m={row.microbatches:<4} limit {factor}p: zb-auto {rate:.4f} "
                      f"paper {published:.4f} {verdict}  ({origin})", flush=True)


if __name__ == "__main__":
    main()
