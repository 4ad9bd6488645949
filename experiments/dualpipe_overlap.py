"""DualPipe-V's and DualPipe's overlapped F-and-B pairs (DeepSeek-V3 §3.2.1): the same compute order with the
pairs overlapped and run one op at a time, with the expert all-to-all hatched.

DualPipe-V (top two panels: V placement, each of the two chunks half a rank's share) and bidirectional DualPipe
(bottom two: two model copies, each chunk a whole share, half the microbatches each way) on the same pp, m and
costs, so the four makespans compare directly.
Costs per microbatch through one rank's share (pipesim's convention):
F = 1 of which a2a_forward = 0.4 is all-to-all (dispatch + combine), B = 2 of which a2a_backward = 0.8, a
split backward I = W = 1 (the all-to-all is on I's path). A pair lasts
``(c_f + c_b)·(1 + s) + max(0, a2a_f − c_b) + max(0, a2a_b − c_f)`` (:func:`pipesim.sim.costs.pair_duration`,
s = overlap_slowdown = 0 here), so here each pair hides both all-to-alls: 1.8 instead of 3 per microbatch
through the share. A pair is drawn as one box in two lanes, its forward above its backward; the hatched part
of a box is its all-to-all (in a pair, hidden behind the other lane's compute; alone, exposed).
Run: ``python experiments/dualpipe_overlap.py [--fast] [--out DIR | --update-docs]``.
"""

from __future__ import annotations

from matplotlib.patches import Patch

from pipesim.io.timeline import pair_halves
from pipesim.plots.figures import PAGE_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import LANES, draw_gantt, legend_handles, plt, visible_ops
from pipesim.program.build import build_program
from pipesim.program.ir import Schedule, instruction
from pipesim.program.lowering import lower
from pipesim.sim.costs import CostModel, StageCosts, TimeUnit
from pipesim.sim.simulator import simulate

COSTS = CostModel(StageCosts(forward=1.0, backward=2.0, backward_input=1.0, backward_weight=1.0,
                             a2a_forward=0.4, a2a_backward=0.8))
A2A_HATCH = "////"


def sequential(schedule: Schedule) -> Schedule:
    """The same compute order, every pair's halves one after the other."""
    orders = tuple(tuple(instruction(i.op, i.mb, i.chunk) for i in order) for order in schedule.orders)
    return Schedule(f"{schedule.name} (pairs run one op at a time)", schedule.shape, orders)


def hatch_all_to_all(ax, frame, shape) -> None:
    """Hatch each F, B and I box's all-to-all: a forward's at the end of its box (the combine closes it), a
    backward's at the start (the gradient's dispatch opens it), as long as it lasts in time."""
    share = COSTS.shape_costs(shape)[0]  # every stage costs the same here
    halves = pair_halves(frame)
    for index, row in frame[frame["op"].isin(["F", "B", "I"])].iterrows():
        comm = share.a2a_forward if row.op == "F" else share.a2a_backward
        if row.op == "I":
            comm = min(comm, share.backward_input)
        lane = (1 if row.op == "F" else 2) if halves[index] else 0
        offset, height = LANES[lane]
        begin = row.end - comm if row.op == "F" else row.start
        ax.broken_barh([(begin, comm)], (row["rank"] + offset, height), facecolor="none", edgecolor="#333333",
                       linewidth=0, hatch=A2A_HATCH)


SCHEDULES = ("dualpipe-v", "dualpipe")


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    pp, microbatches = (2, 4) if args.fast else (4, 10)
    runs = []
    for name in SCHEDULES:
        built = build_program(name, pp, microbatches)
        runs += [(name, "overlapped pairs", built.program),
                 (name, "one op at a time", lower(sequential(built.schedule)))]
    results = [(name, label, program, simulate(program, COSTS)) for name, label, program in runs]
    end = max(r.metrics.makespan for *_, r in results)
    fig, axes = plt.subplots(len(results), 1, figsize=(PAGE_WIDTH_IN, len(results) * (0.45 * pp + 0.5) + 0.8),
                             sharex=True)
    ops: set[str] = set()
    for ax, (name, label, program, result) in zip(axes, results, strict=True):
        frame = result.timeline
        ops |= set(visible_ops(frame))
        draw_gantt(ax, frame, time_unit=TimeUnit.UNIT, xlim=(0, end))
        hatch_all_to_all(ax, frame, program.shape)
        ax.set_title(f"{name} pp={pp} m={microbatches}, {label}: makespan {result.metrics.makespan:.3g}, "
                     f"bubble {result.metrics.bubble_fraction:.1%}", loc="left")
        print(f"{name}, {label}: makespan {result.metrics.makespan:.4g}, bubble {result.metrics.bubble_fraction:.3f}")
    for ax in axes[:-1]:
        ax.set_xlabel("")
    handles = legend_handles(sorted(ops), chunks=True)
    handles.append(Patch(facecolor="white", edgecolor="#333333", hatch=A2A_HATCH, label="all-to-all"))
    axes[-1].legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=4, frameon=False)
    save_pdf_png(fig, args.out, "dualpipe_overlap")


if __name__ == "__main__":
    main()
