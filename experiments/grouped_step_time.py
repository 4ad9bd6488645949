"""Table: what running on NCCL's grouped point-to-point semantics costs, per built-in schedule.

For each schedule at (pp, m): the step time with buffered sends (``pipesim simulate``), with grouped
rendezvous sends for lower()'s own Program (``hangs`` where the validator finds a cycle) and for the
Program ``--p2p grouped`` runs (:func:`pipesim.program.grouped.grouped_program`), timed by
:func:`pipesim.sim.grouped_timing.grouped_makespan`. Costs: F = 1, B = 2, I = W = 1 and ``--comm`` per
transfer. Run: ``python experiments/grouped_step_time.py [--comm 0.2] [--fast] [--out DIR]``
(the table also goes to ``DIR/grouped_step_time_comm<comm>.md``).
"""

from __future__ import annotations

from pipesim.errors import DeadlockError
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output
from pipesim.program.build import build_program
from pipesim.program.grouped import grouped_program
from pipesim.program.loader import builtin_names
from pipesim.sim.costs import CostModel
from pipesim.sim.grouped_timing import grouped_makespan
from pipesim.sim.simulator import simulate


def rows(shapes: list[tuple[int, int]], comm: float) -> list[tuple]:
    costs = CostModel(p2p_latency=comm)
    out = []
    for name in builtin_names():
        for pp, m in shapes:
            eager = build_program(name, pp, m).program
            try:
                eager_grouped: float | str = grouped_makespan(eager, costs)
            except DeadlockError:
                eager_grouped = "hangs"
            program = grouped_program(eager, costs)
            out.append((name, pp, m, simulate(eager, costs).metrics.makespan, eager_grouped,
                        grouped_makespan(program, costs), "kept" if program is eager else "reordered"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, figures=False, fast_help="only pp=4, m=8")
    p.add_argument("--comm", type=float, default=0.0, help="time per transfer, in units of F (default 0)")
    args = parse_experiment_args(p, argv)
    record_output(args.out, f"grouped_step_time_comm{args.comm:g}.md")
    shapes = [(4, 8)] if args.fast else [(4, 8), (4, 16), (8, 16)]
    print(f"| schedule | pp | m | buffered | lower() grouped | --p2p grouped | Program |  (comm {args.comm:g})")
    print("|---|---|---|---|---|---|---|")
    for name, pp, m, buffered, eager, grouped, which in rows(shapes, args.comm):
        eager_text = eager if isinstance(eager, str) else f"{eager:.1f}"
        print(f"| {name} | {pp} | {m} | {buffered:.1f} | {eager_text} | {grouped:.1f} | {which} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
