"""How far a model-based step time can be trusted: the error that validation by source left out measured on
published runs of the same kind (``python experiments/validation_loso.py --update-bands`` writes the table
in :mod:`.validation_bands`).

A kind is the chip family and the GEMM precision: what the fitted constants and the kernels' rates depend on.
The band is the 90th percentile of the absolute left-out step-time error over that kind's published rows, so
about nine runs in ten of a validated kind land inside it. A kind with fewer than ``MIN_ROWS`` rows takes the
band of all rows pooled, and says so; a chip no published run was measured on gets no band, only that remark.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.analytic.layout import Precision

MIN_ROWS = 5
_FAMILIES = {"a100-80gb": "a100", "a100-40gb": "a100", "h100-sxm": "hopper", "h100-96gb-hbm2e": "hopper",
             "h200": "hopper", "h800": "hopper"}


def run_kind(chip_name: str, precision: Precision) -> str | None:
    """``hopper-bf16``, ``a100-bf16``, …; None for a chip no published run validates."""
    family = _FAMILIES.get(chip_name)
    return None if family is None else f"{family}-{precision.value}"


@dataclass(frozen=True)
class ErrorBand:
    relative: float | None  # ± this fraction of the step time; None: unvalidated
    kind: str | None
    rows: int  # published rows the band was measured on
    basis: str  # what it is, in words

    def text(self) -> str:
        if self.relative is None:
            return f"(no band: {self.basis})"
        return f"± {self.relative:.0%} ({self.basis})"

    def to_dict(self) -> dict:
        return {"relative": self.relative, "kind": self.kind, "rows": self.rows, "basis": self.basis}


def error_band(chip_name: str, precision: Precision) -> ErrorBand:
    from pipesim.analytic.validation_bands import BANDS, POOLED

    kind = run_kind(chip_name, precision)
    if kind is None:
        return ErrorBand(None, None, 0, f"no published run on {chip_name} validates it")
    relative, rows = BANDS.get(kind, (None, 0))
    if relative is None or rows < MIN_ROWS:
        relative_all, rows_all = POOLED
        return ErrorBand(relative_all, kind, rows_all,
                         f"left-out error, p90 of all {rows_all} published rows: only {rows} of kind {kind}")
    return ErrorBand(relative, kind, rows, f"left-out error, p90 of {rows} published {kind} runs")
