"""Within-model ranking: pipesim's order of the layouts of one job against the published order, per comparison
group (same source, model, chip and sequence; see pipesim/validation/ranking.py).

Run: ``python experiments/rank_correlation.py [--fast] [--out DIR | --update-docs]`` (``--fast`` leaves out the
rows whose order is synthesised). Prints each group's Spearman correlation and pair accuracy and draws
``rank_correlation.png``: predicted against published throughput, each normalised by its group's fastest.
"""

from __future__ import annotations

from pipesim.plots.figures import COLUMN_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import plt
from pipesim.validation.loso import synthesised
from pipesim.validation.ranking import APART, rankings, summarise
from pipesim.validation.runs import predict
from pipesim.validation.sources import PUBLISHED_RUNS


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    runs = [r for r in PUBLISHED_RUNS if not (args.fast and synthesised(r))]
    groups = rankings([predict(r) for r in runs])
    for g in groups:
        right, total = g.pairs
        print(f"{' '.join(map(str, g.key[:3]))} seq={g.key[3]}: {len(g.labels)} layouts, "
              f"Spearman {g.spearman:+.2f}, pairs {right}/{total}")
    s = summarise(groups)
    print(f"\n{s.groups} groups, {s.rows} rows: mean Spearman {s.mean_spearman:+.2f}, median {s.median_spearman:+.2f}, "
          f"pairs ordered as measured {s.pairs_right}/{s.pairs} ({s.pair_accuracy:.0%}); of those published "
          f"more than {APART:.0%} apart {s.apart_right}/{s.apart} ({s.apart_accuracy:.0%})")
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN * 1.2, COLUMN_WIDTH_IN * 1.2))
    sources = sorted({g.key[0] for g in groups})
    for i, source in enumerate(sources):
        xs, ys = [], []
        for g in (g for g in groups if g.key[0] == source):
            xs += [p / max(g.published) for p in g.published]
            ys += [p / max(g.predicted) for p in g.predicted]
        ax.scatter(xs, ys, s=12, label=source, color=f"C{i}", alpha=0.8)
    ax.plot([0, 1.05], [0, 1.05], color="0.6", lw=0.8, ls="--")
    low = min(min(p / max(g.published) for p in g.published) for g in groups) - 0.05
    ax.set_xlim(low, 1.02)
    ax.set_ylim(low, 1.02)
    ax.set_xlabel("published throughput / group's fastest")
    ax.set_ylabel("pipesim throughput / group's fastest")
    ax.set_title(f"{s.groups} groups: mean Spearman {s.mean_spearman:+.2f}, pairs {s.pair_accuracy:.0%}", fontsize=8)
    ax.legend(fontsize=6, loc="lower right")
    save_pdf_png(fig, args.out, "rank_correlation")


if __name__ == "__main__":
    main()
