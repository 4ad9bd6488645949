"""When nothing fits: the smallest change that would make something fit, in one line.

Three levers, each checked by the same exact memory the search uses (schedules built, nothing simulated):
a higher cap (the least memory any candidate needs), recomputation (if the search was told to leave it out),
and more GPUs (the smallest power-of-two multiple of the GPU count, up to 16×, whose split fits).
"""

from __future__ import annotations

from dataclasses import replace

from pipesim.analytic.layout import Recompute
from pipesim.analytic.memory_gib import GIB
from pipesim.analytic.params import total_params
from pipesim.errors import PipesimError
from pipesim.plan.bounds import bounds_keys, memory_bound
from pipesim.plan.evaluate import peak_memory, prepare
from pipesim.plan.space import Candidate, PlanRequest, enumerate_candidates


def least_memory(request: PlanRequest, enough: float | None = None) -> tuple[float, Candidate] | None:
    """The smallest exact peak GiB over every candidate, and which; None if no schedule accepts any shape.

    Candidates are visited by increasing memory bound and the walk stops once the bound exceeds the best
    exact peak found: the bound never exceeds the exact value, so nothing later can need less. With ``enough``
    (GiB), whether anything fits in that much is all that is asked: the walk stops at the first candidate that
    does (its peak, not the least), and at a bound above it (None: nothing fits). The bounds are made once per
    floor key, as the search makes them (:func:`~pipesim.plan.bounds.bounds_keys`): this walk runs for each GPU
    count the advice tries, and a request's candidates share far fewer bounds than they number.
    """
    try:
        candidates = list(enumerate_candidates(request))
    except PipesimError:
        return None
    made: dict[tuple, float | None] = {}
    bounded = []
    for c in candidates:
        key = bounds_keys(request, c)[0]
        if key not in made:
            try:
                made[key] = memory_bound(request, c)
            except PipesimError:
                made[key] = None
        if made[key] is not None:
            bounded.append((made[key], c))
    bounded.sort(key=lambda bc: (bc[0], bc[1].key()))
    best: tuple[float, Candidate] | None = None
    for bound, c in bounded:
        if (best is not None and bound >= best[0]) or (enough is not None and bound > enough):
            break
        model, layout = request.model_of(c), request.layout_of(c)
        try:
            peak, _ = peak_memory(model, request.chip, layout, prepare(model, request.chip, layout, c.schedule))
        except PipesimError:
            continue
        if best is None or peak < best[0]:
            best = (peak, c)
        if enough is not None and peak <= enough:
            break
    if enough is not None and best is not None and best[0] > enough:
        return None
    return best


def nothing_fits_message(request: PlanRequest) -> str:
    cap = request.cap_gib
    parts = []
    least = least_memory(request)
    if least is not None:
        peak, c = least
        parts.append(
            f"the leanest configuration ({c.label()}) needs {peak:.1f} GiB: raise --memory-cap to {_round_up(peak)}"
        )
    if Recompute.FULL not in request.recompute:
        with_full = least_memory(replace(request, recompute=(*request.recompute, Recompute.FULL)), enough=cap)
        if with_full is not None and with_full[0] <= cap:
            parts.append("allow --recompute full")
    for factor in (2, 4, 8, 16):
        more = replace(request, gpus=request.gpus * factor)
        if weights_floor_gib(request, more.gpus) > cap:  # not even the weights, spread over every GPU, would fit
            continue
        found = least_memory(more, enough=cap)
        if found is not None and found[0] <= cap:
            parts.append(f"use --gpus {more.gpus}")
            break
    fixes = "; or ".join(parts) if parts else "no change of cap, recomputation or GPU count up to 16× helps"
    return (
        f"no configuration of {request.model.name} on {request.gpus}× {request.chip.name} fits in {cap:g} GiB "
        f"per GPU: {fixes}"
    )


def weights_floor_gib(request: PlanRequest, gpus: int) -> float:
    """A floor under any candidate's peak on ``gpus`` GPUs, no layout built: every parameter is held somewhere in at
    least two bytes (a 16-bit weight; an FP8 one keeps at least a 16-bit gradient or an FP32 master beside it), so
    the busiest GPU holds at least the average, the parameters' two bytes over the GPUs."""
    return total_params(request.model) * 2 / gpus / GIB


def _round_up(gib: float) -> str:
    return f"{int(gib) + 1}"
