"""How large a synthesis problem each method solves in how long, and the heuristic's gap to the optimum.

Costs: the paper's 6.2B profile (Qi et al. 2024, Table 9: T_F 29.718, T_B 29.444, T_W 19.927, T_comm 0.527 ms),
limit 2p·M_B. For each (pp, m): seconds of the greedy policies (+ built-ins), of local search on top, and of
CP-SAT (2 workers, --exact-seconds limit) where the problem has at most 300 passes; the heuristic's gap is
(heuristic span − CP-SAT span) / CP-SAT span, "optimal" when CP-SAT proved it. ``--fast``: two tiny sizes.
"""

from __future__ import annotations

import time

from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.program.ir import PipelineShape
from pipesim.synth.exact import solve_exact
from pipesim.synth.paper import PAPER_ROWS
from pipesim.synth.problem import SynthesisProblem
from pipesim.synth.search import Method, synthesize

SIZES = [(2, 4), (3, 6), (4, 4), (4, 8), (8, 16), (8, 64), (16, 128), (32, 256)]


def main() -> None:
    parser = experiment_parser(__doc__, figures=False, fast_help="the two smallest sizes")
    parser.add_argument("--exact-seconds", type=float, default=60.0, help="CP-SAT's time limit per size (default 60)")
    args = parse_experiment_args(parser)
    record_output(args.out, "synth_scaling.md")
    costs = PAPER_ROWS[3].costs()
    print("| pp | m | passes | greedy s | + local s | CP-SAT s | heuristic gap to CP-SAT |")
    print("|---|---|---|---|---|---|---|")
    for pp, m in SIZES[:2] if args.fast else SIZES:
        problem = SynthesisProblem.from_costs(PipelineShape(pp, m), costs, 2.0 * pp)
        clock = time.perf_counter()
        greedy = synthesize(problem, Method.GREEDY)
        t_greedy = time.perf_counter() - clock
        clock = time.perf_counter()
        local = synthesize(problem, Method.LOCAL)
        t_local = time.perf_counter() - clock
        passes = 3 * pp * m
        exact_cell, gap_cell = "—", "—"
        if passes <= 300:
            clock = time.perf_counter()
            exact = solve_exact(problem, local.orders, seconds=args.exact_seconds)
            t_exact = time.perf_counter() - clock
            if exact is not None:
                best = min(exact.evaluation.max_span, local.evaluation.max_span)
                gap = (local.evaluation.max_span - best) / best
                exact_cell = f"{t_exact:.1f}"
                gap_cell = f"{100 * gap:.2f}% ({'optimal' if exact.optimal else 'time limit'})"
        print(f"| {pp} | {m} | {passes} | {t_greedy:.2f} | {t_local:.2f} | {exact_cell} | {gap_cell} |", flush=True)
        del greedy


if __name__ == "__main__":
    main()
