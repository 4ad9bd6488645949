"""Emulated costs: every built-in schedule run for real at GPU ratios (``--emulate``) against the simulator.

pp = 4 gloo processes, m ∈ {8, 16}; each compute instruction sleeps its cost from one costs file (F = 18 ms,
I = 18 ms, W = 9 ms, fused B = 27 ms, P2P = 0.6 ms per transfer: ratios measured on GPUs), tensors of the
real activation size cross real gloo P2P. The simulator predicts the same Program from the same file. With
compute noise gone, what is left is the model of the runtime itself (receive posting, FIFO links, waits)
plus the emulation's own overheads: sleep wake-up latency and the CPU time of each instruction (Python,
gloo ``isend``), which a loaded machine stretches. Targets: makespan error within 2% and median start error
under 1 ms per schedule.
Run: ``python experiments/emulated_vs_predicted.py [--fast] [--out DIR]``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from executors.harness import spawn
from executors.runtime import RunConfig, plan, run_configs
from pipesim.analysis.overlay import one_step, overlay_errors
from pipesim.plots.figures import PAGE_WIDTH_IN, as_percent, experiment_args, save_pdf_png
from pipesim.plots.gantt import plt
from pipesim.program.loader import builtin_names
from pipesim.sim.costs import CostModel, StageCosts
from pipesim.sim.simulator import simulate
from pipesim.topology import Topology

PP = 4
T_F, T_I, T_W, T_P2P = 0.018, 0.018, 0.009, 0.0006  # seconds, GPU-measured ratios


def gpu_ratio_costs(scale: float = 1.0) -> CostModel:
    return CostModel(
        StageCosts(forward=T_F * scale, backward=(T_I + T_W) * scale, backward_input=T_I * scale,
                   backward_weight=T_W * scale),
        p2p_latency=T_P2P * scale,
        time_unit="s",
    )


def measure(costs: CostModel, microbatches: tuple[int, ...], steps: int) -> pd.DataFrame:
    """One gloo world of PP processes runs every schedule × m; one row of errors per run."""
    runs = [(name, m) for m in microbatches for name in builtin_names()]
    configs = [
        RunConfig(schedule=name, topology=Topology(pp=PP), microbatches=m, steps=steps, emulate=costs)
        for name, m in runs
    ]
    results = spawn(run_configs, PP, configs, timeout=1800)[0]
    rows = []
    for cfg, result in zip(configs, results, strict=True):
        predicted = one_step(simulate(plan(cfg, PP), costs).timeline)
        # Step 0 warms up; each figure is the median over the steps after it (a typical step: one transfer
        # that a busy host delivers late shifts the rest of its step, and that step only).
        per_step = pd.DataFrame([overlay_errors(predicted, one_step(result.timeline, step)).to_dict()
                                 for step in range(1, steps)])
        typical = per_step.median()
        rows.append({
            "schedule": cfg.schedule, "m": cfg.microbatches,
            "predicted (ms)": 1e3 * typical["makespan_predicted"],
            "measured (ms)": 1e3 * typical["makespan_measured"],
            "makespan error": (per_step["makespan_measured"] / per_step["makespan_predicted"] - 1).median(),
            "start error median (ms)": 1e3 * typical["start_error_median"],
            "start error p90 (ms)": 1e3 * typical["start_error_p90"],
            "instructions": int(typical["instructions"]),
        })
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame):
    """Left: measured against predicted makespan, every schedule × m, with the ±2% band. Right: errors."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(PAGE_WIDTH_IN, 3.4))
    names = list(dict.fromkeys(table["schedule"]))
    markers = dict(zip(names, "osD^vP*XhH", strict=False))
    colors = dict(zip(names, plt.get_cmap("tab10").colors, strict=False))
    spans = table[["predicted (ms)", "measured (ms)"]]
    lo, hi = spans.min().min(), spans.max().max()
    line = np.array([lo * 0.95, hi * 1.05])
    left.plot(line, line, color="black", lw=0.8)
    left.fill_between(line, line * 0.98, line * 1.02, color="0.85", label="±2%")
    for _, row in table.iterrows():
        left.scatter(row["predicted (ms)"], row["measured (ms)"], marker=markers[row["schedule"]],
                     color=colors[row["schedule"]], s=18 if row["m"] == table["m"].min() else 34,
                     label=row["schedule"] if row["m"] == table["m"].min() else None)
    left.set_xlabel("predicted makespan (ms)")
    left.set_ylabel("measured makespan (ms)")
    sizes = ", ".join(str(m) for m in sorted(set(table["m"])))
    left.set_title(f"pp={PP}, m ∈ {{{sizes}}} (larger marker: larger m)", fontsize=8)
    left.legend(fontsize=6, ncol=2, frameon=False)
    x = np.arange(len(table))
    right.bar(x, 100 * table["makespan error"], color=[colors[s] for s in table["schedule"]])
    right.axhspan(-2, 2, color="0.85", zorder=0)
    right.set_xticks(x, [f"{s} m={m}" for s, m in zip(table["schedule"], table["m"], strict=True)], rotation=90,
                     fontsize=6)
    right.set_ylabel("makespan error (%, bars)")
    twin = right.twinx()
    twin.plot(x, table["start error median (ms)"], "k.", ms=5)
    twin.set_ylabel("median start error (ms, dots)")
    twin.set_ylim(bottom=0)
    fig.suptitle(f"--emulate at GPU ratios (F={T_F * 1e3:g}, I={T_I * 1e3:g}, W={T_W * 1e3:g}, P2P={T_P2P * 1e3:g} ms)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    if args.fast:
        table = measure(gpu_ratio_costs(0.1), microbatches=(8,), steps=2)
    else:
        table = measure(gpu_ratio_costs(), microbatches=(8, 16), steps=6)
    print(as_percent(table, ["makespan error"]).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    worst = table.loc[table["makespan error"].abs().idxmax()]
    print(f"worst makespan error {worst['makespan error']:+.2%} ({worst['schedule']}, m={worst['m']}); "
          f"largest median start error {table['start error median (ms)'].max():.2f} ms")
    table.to_csv(args.out / "emulated_vs_predicted.csv", index=False)
    save_pdf_png(draw(table), args.out, "emulated_vs_predicted")


if __name__ == "__main__":
    main()
