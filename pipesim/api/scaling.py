"""``pipesim.plan_scaling``: one plan per GPU count at one global batch (``pipesim plan --gpus 256,512,1024``), the
best configuration of each side by side: how throughput per GPU holds as the job grows at the batch the recipe
fixes, and, with a token budget, the days and GPU-hours each count takes (more GPUs finish sooner, for more
GPU-hours once the batch spreads thin).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipesim.api.defaults import PLAN_DEFAULTS
from pipesim.api.model_options import whole_number
from pipesim.api.planning import PlanResult, plan
from pipesim.errors import PipesimError

if TYPE_CHECKING:
    import pandas as pd

    from pipesim.analytic.model_spec import ModelSpec

__all__ = ["ScalingResult", "plan_scaling"]


@dataclass(frozen=True, eq=False)
class ScalingResult:
    """The plans of one job at several GPU counts (fewest first), and the token budget to time them by, if any.

    Attributes:
        plans: each count's :class:`~pipesim.api.planning.PlanResult`, fewest GPUs first.
        train_tokens: the run's token budget (``--train-tokens``), or None.
    """

    plans: tuple[PlanResult, ...]
    train_tokens: float | None = None
    # the counts the job cannot be planned at (the global batch does not split over them, ...) and why
    refused: tuple[tuple[int, str], ...] = ()

    @property
    def gpus(self) -> tuple[int, ...]:
        """Every count asked, planned or refused, fewest first."""
        return tuple(sorted([p.request.gpus for p in self.plans] + [g for g, _ in self.refused]))

    @cached_property
    def rows(self) -> list[dict]:
        """One row per GPU count: its best configuration's step, band, throughput, MFU and peak, its throughput
        per GPU over the fewest GPUs' where both fit (``per_gpu_vs_fewest``: 1 holds the rate, below 1 loses
        it), and the budget's days and GPU-hours with a token budget; a count where nothing fits says why."""
        from pipesim.plan.uncertainty import band_of, held_out_kinds_of_candidate

        fitting = [p for p in self.plans if p.best is not None]
        base = fitting[0].best.evaluation.tokens_per_s_per_gpu if fitting else None
        rows = [{"gpus": g, "configuration": None, "nothing_fits": why} for g, why in self.refused]
        for p in self.plans:
            row: dict = {"gpus": p.request.gpus, "configuration": None, "nothing_fits": p.nothing_fits()}
            if p.best is not None:
                e, c = p.best.evaluation, p.best.candidate
                row |= {"configuration": c.label(), "layout": f"tp{c.tp}" + (f" cp{c.cp}" if c.cp > 1 else "")
                        + f" pp{c.pp} dp{c.dp}", "step_time_s": e.step_time,
                        "step_time_band": band_of(p.best, p.request.chip),
                        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
                        "per_gpu_vs_fewest": e.tokens_per_s_per_gpu / base, "mfu": e.mfu, "peak_gib": e.peak_gib,
                        # issue #24's held-out kinds: a count whose best is of one leans as those runs did
                        "held_out_kinds": sorted(k.value for k in held_out_kinds_of_candidate(p.best, p.request))}
                if self.train_tokens is not None:
                    t = p.training(self.train_tokens)
                    span = t.days_range
                    row |= {"days": t.days, "days_low": None if span is None else span[0],
                            "days_high": None if span is None else span[1], "gpu_hours": t.gpu_hours}
            rows.append(row)
        return sorted(rows, key=lambda r: r["gpus"])

    @property
    def table(self) -> pd.DataFrame:
        """:attr:`rows` as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows)

    def text(self) -> str:
        """What ``pipesim plan --gpus A,B,...`` prints: the job, then a line per GPU count."""
        from pipesim.analytic.held_out_kinds import HeldOutKind, held_out_records
        from pipesim.analytic.training_time import token_count_text
        from pipesim.api.plan_rendering import header

        fewest = next((r["gpus"] for r in self.rows if r["configuration"] is not None), None)
        budget = "" if self.train_tokens is None else f"{'days':>8} {'GPU-hours':>11} "
        lines = [header(self.plans[0].request, gpus=", ".join(str(g) for g in self.gpus)),
                 "the best configuration at each GPU count, one global batch"
                 + ("" if fewest is None else f" (per GPU: throughput per GPU over {fewest} GPUs')")
                 + ("" if self.train_tokens is None else
                    f"; days and GPU-hours to train {token_count_text(self.train_tokens)} tokens, the steps alone"),
                 f"{'gpus':>6} {'step s':>8} {'± band':>6} {'tok/s/GPU':>10} {'per GPU':>7} {'MFU':>6} "
                 f"{'peak GiB':>9} {budget} configuration"]
        for row in self.rows:
            if row["configuration"] is None:
                lines.append(f"{row['gpus']:>6} nothing fits: {row['nothing_fits']}")
                continue
            band = f"{row['step_time_band']:.0%}" if row["step_time_band"] else "–"
            timed = "" if self.train_tokens is None else f"{row['days']:>8.3g} {row['gpu_hours']:>11,.0f} "
            marks = "".join(f" {HeldOutKind(k).mark}" for k in row["held_out_kinds"])
            lines.append(f"{row['gpus']:>6} {row['step_time_s']:>8.4g} {band:>6} {row['tokens_per_s_per_gpu']:>10,.0f} "
                         f"{row['per_gpu_vs_fewest']:>7.0%} {row['mfu']:>6.1%} {row['peak_gib']:>9.1f} {timed} "
                         f"{row['configuration']}{marks}")
        kinds = frozenset(HeldOutKind(k) for row in self.rows for k in row.get("held_out_kinds", ()))
        for held in held_out_records(kinds):
            counts = [str(r["gpus"]) for r in self.rows if held.kind.value in r.get("held_out_kinds", ())]
            lines.append(f"{held.kind.mark}: the best at {', '.join(counts)} GPUs is of this kind; {held.text()}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<ScalingResult {self.plans[0].request.model.name} at {', '.join(map(str, self.gpus))} GPUs>"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self) if cycle else self.text())

    def to_dict(self) -> dict:
        return {"model": self.plans[0].request.model.name, "chip": self.plans[0].request.chip.name,
                "global_batch": self.plans[0].request.global_batch, "train_tokens": self.train_tokens,
                "rows": self.rows}

    def plot(self, path: str | Path) -> None:
        """Throughput per GPU by GPU count with the step's band, and, with a token budget, days and GPU-hours
        (.png/.pdf/.svg)."""
        from pipesim.analytic.training_time import token_count_text
        from pipesim.plots.scaling_plot import plot_scaling

        r = self.plans[0].request
        plot_scaling(self.rows, path, title=f"{r.model.name} on {r.chip.name}, global batch {r.global_batch}",
                     tokens_text=None if self.train_tokens is None else token_count_text(self.train_tokens))

    def write(self, path: str | Path) -> None:
        """Every candidate of every count (.csv or .parquet), with a ``gpus`` column, atomically."""
        import pandas as pd

        from pipesim.io.atomic import write_table

        write_table(pd.concat([p.candidates.assign(gpus=p.request.gpus) for p in self.plans], ignore_index=True),
                    path)


def plan_scaling(
    model: str | ModelSpec | None,
    gpus: Sequence[int],
    global_batch: int | None,
    *,
    train_tokens: float | str | None = None,
    config: str | Path | None = None,
    jobs: int = PLAN_DEFAULTS.jobs,
    cluster: str | None = None,
    progress: Callable[[int], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
    **space: object,
) -> ScalingResult:
    """Plan the job at each of ``gpus`` (``pipesim plan --gpus 256,512,1024``) with the same global batch and search
    space (:func:`pipesim.plan`'s keywords), and put the best configurations side by side.

    Args:
        gpus: the GPU counts, two or more, each planned as :func:`pipesim.plan` plans one.
        train_tokens: a token budget (``2e12`` or ``"2T"``): each count's days and GPU-hours at its best step.
        on_plan: called with each count as its plan starts (a progress bar's label).
        progress: called with k as k more candidates of the current count are decided.

    Returns:
        A :class:`ScalingResult`, fewest GPUs first.
    """
    counts = sorted({whole_number("plan_scaling", "gpus", g) for g in gpus})
    if len(counts) < 2:
        raise PipesimError("plan_scaling compares two or more GPU counts (--gpus A,B); for one, use plan")
    budget = None
    if train_tokens is not None:
        from pipesim.analytic.training_time import parse_tokens

        budget = parse_tokens(str(train_tokens), "train_tokens")
    plans, refused = [], []
    for count in counts:
        if on_plan is not None:
            on_plan(count)
        try:
            plans.append(plan(model, count, global_batch, config=config, top=1, jobs=jobs, cluster=cluster,
                              progress=progress, **space))
        except PipesimError as err:  # this count's (a batch that does not split over it, ...), said on its row
            refused.append((count, str(err)))
    if not plans:  # then it is the job's, not a count's: the first count's own message says what
        raise PipesimError(refused[0][1])
    return ScalingResult(tuple(plans), budget, tuple(refused))
