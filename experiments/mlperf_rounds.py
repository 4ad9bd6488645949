"""pipesim against MLPerf Training's H100/H200 logs, round by round: one framework's releases side by side.

NVIDIA's NeMo code ran GPT-3 175B in MLPerf v3.0 to v4.1 and Llama 3.1 405B in v5.0 (pipesim/validation/sources/
mlperf_*.py: every setting from the submissions' configs, the step from their logs). pipesim models one software;
the signed error per round shows what each half year of the framework changed. NeMo 24.07's performance summary
(in sample: the constants were chosen looking at it) is drawn beside them.

Run: ``python experiments/mlperf_rounds.py [--out DIR | --update-docs]`` (a few seconds; ``--fast`` changes
nothing). Prints each round's rows and mean signed error and draws ``mlperf_rounds.png``.
"""

from __future__ import annotations

from statistics import mean

from pipesim.plots.figures import COLUMN_WIDTH_IN, experiment_args, save_pdf_png
from pipesim.plots.gantt import plt
from pipesim.validation.runs import PublishedRun, predict
from pipesim.validation.sources import rows_of

# (label on the axis, source module, which of its rows): in the order the software was released
ROUNDS: list[tuple[str, str, str]] = [
    ("v3.0\nNeMo 23.04", "mlperf_v30_gpt3", ""),
    ("v3.1\nNeMo 23.09", "mlperf_v31_gpt3", ""),
    ("v4.0\nNeMo 24.04", "mlperf_v4_gpt3", "v4.0"),
    ("summary\nNeMo 24.07", "nemo2407", ""),
    ("v4.1\nNeMo 24.09", "mlperf_v4_gpt3", "v4.1"),
    ("v5.0\nNeMo 25.01", "mlperf_v50_llama405b", ""),
    ("v5.1\nreference", "mlperf_v51_llama8b", ""),
]


SUMMARY = "nemo2407"  # NeMo 24.07's performance summary: in sample, drawn hollow


def rows_of_round(module: str, note_prefix: str) -> list[PublishedRun]:
    """The rows of ``module`` whose note (the platform, prefixed with the round where a module holds two)
    starts with ``note_prefix``."""
    return [r for r in rows_of(module) if r.note.startswith(note_prefix)]


def main() -> None:
    args = experiment_args(__doc__.splitlines()[0])
    models = sorted({r.model for _, module, prefix in ROUNDS if module != SUMMARY
                     for r in rows_of_round(module, prefix)})
    colour = {m: f"C{i}" for i, m in enumerate(models)}
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN * 1.6, COLUMN_WIDTH_IN * 1.25))
    seen: set[str] = set()
    for x, (label, module, prefix) in enumerate(ROUNDS):
        errors = []
        print(label.replace("\n", " "))
        rows = rows_of_round(module, prefix)
        for i, run in enumerate(rows):
            error = predict(run).step_error
            errors.append(error)
            print(f"  {run.label:<58} {run.note:<22} {error:+.1%}")
            jitter = (i - (len(rows) - 1) / 2) * 0.5 / max(len(rows), 1)
            if module == SUMMARY:  # in sample: hollow, one legend entry
                name, style = "NeMo 24.07 summary (in sample)", {"facecolors": "none", "edgecolors": "0.4"}
            else:
                name, style = run.model, {"color": colour[run.model]}
            ax.scatter(x + jitter, 100 * error, s=14, label=name if name not in seen else None, **style)
            seen.add(name)
        print(f"  mean signed {mean(errors):+.1%} over {len(errors)} rows")
        ax.plot([x - 0.3, x + 0.3], [100 * mean(errors)] * 2, color="0.3", lw=1)
    ax.axhline(0, color="0.6", lw=0.8, ls="--")
    ax.set_xticks(range(len(ROUNDS)), [label for label, _, _ in ROUNDS], fontsize=6)
    ax.set_ylabel("pipesim step time vs measured (%)")
    ax.set_title("MLPerf Training on H100/H200, NVIDIA's NeMo code, round by round", fontsize=7)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, frameon=False)
    save_pdf_png(fig, args.out, "mlperf_rounds")


if __name__ == "__main__":
    main()
