"""Calibration: a cost model taken from a measured (or any) Timeline.

Per stage, each compute op's duration is a 10%-trimmed mean over microbatches and steps; warm-up steps are
dropped first. Costs files hold a rank's share of the model (:mod:`pipesim.sim.costs`), so a run with v chunks
per rank has its per-chunk means multiplied by v, and the file records the pipeline's pp·v stages and its v
(``chunks``): reused on another pp×v of the same product, each stage — the same slice of the model — takes the
time measured for it.

Trimmed rather than a median: on a shared machine slow-downs are frequent and one-sided, and
a makespan adds durations up, so the typical *sum* (a mean) is what predicts it — the median runs several
percent fast — while trimming the tails still drops the odd preempted instruction. The P2P latency is the
median delay from a send's issue to its data being there, over receives whose consumer waited for it (so
the delay is the transfer, not the receiver's lateness). The result is the costs file ``pipesim simulate
--costs`` reads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipesim.errors import PipesimError
from pipesim.io.timeline import RING_OP, pair_halves
from pipesim.sim.costs import CostModel, StageCosts, TimeUnit

_FIELD_OF_OP = {"F": "forward", "B": "backward", "I": "backward_input", "W": "backward_weight",
                "REDUCE_GRAD": "reduce_grad"}


#: The share of a fused backward B given to the input gradient I when only B was measured (W gets the rest): a
#: layer's input- and weight-gradient GEMMs do the same FLOPs (each as many as the forward: Qi et al. 2024 §2
#: take T_B ≈ T_W), so I = W = B/2. Measure a split-backward run for the real split.
INPUT_GRAD_SHARE = 0.5


def calibrate(frame: pd.DataFrame, *, warmup_steps: int = 1, time_unit: TimeUnit = TimeUnit.SECONDS,
              notes: list[str] | None = None) -> CostModel:
    """Build a :class:`CostModel` from ``frame``. ``warmup_steps`` are dropped when later steps exist.

    A timeline has either fused backwards (B) or split ones (I, W); the passes it lacks are derived, never left
    at 0 (a free backward): from a fused B, I = ``INPUT_GRAD_SHARE``·B and W = B − I; from I and W, B = I + W.
    Each derivation is appended to ``notes`` (``pipesim calibrate`` prints them).
    """
    frame = frame[frame["op"] != RING_OP]  # ring-attention hops already lie inside their F/B/I rows
    steps = sorted(frame["step"].unique())
    if len(steps) > warmup_steps:
        frame = frame[frame["step"] >= steps[warmup_steps]]
    durations = frame.assign(duration=frame["end"] - frame["start"])
    compute = durations[durations["op"].isin(list(_FIELD_OF_OP))]
    halves = pair_halves(compute)
    if halves.any():  # a predicted pair spans F + B together: it says nothing about F or B alone
        compute = compute[~halves]
        if notes is not None:
            notes.append(f"left out {int(halves.sum())} rows of overlapped F-and-B pairs (both halves span the "
                         "pair); F and B come from the instructions that ran alone")
    if compute.empty:
        raise PipesimError("timeline has no compute instructions (F, B, I, W) to calibrate from")
    # A measured chunk is 1/v of its rank's share of the model; costs files hold the rank's share.
    chunks = int(compute["chunk"].max()) + 1
    num_stages = int(compute["stage"].max()) + 1
    slices = dual_slices(compute)
    if slices is not None:  # DualPipe: stage pp+s is a copy of slice s, and a whole rank's share (v = 1)
        compute = compute.assign(stage=compute["stage"] % slices)
        chunks, num_stages = 1, slices
        if notes is not None:
            notes.append(f"two model copies (DualPipe's dual placement): stages s and {slices}+s measured as one "
                         f"slice, {slices} in all")
    means = compute.groupby(["stage", "op"])["duration"].agg(trimmed_mean)
    per_stage: dict[int, dict[str, float]] = {}
    for (stage, op), value in means.items():
        per_stage.setdefault(int(stage), {})[_FIELD_OF_OP[op]] = chunks * float(value)
    derived = _derive_missing_backward(per_stage)
    if derived and notes is not None:
        notes.append(derived)
    # The most common value of each field becomes the default; stages that differ become overrides.
    default_values = {}
    for field in _FIELD_OF_OP.values():
        values = [fields[field] for fields in per_stage.values() if field in fields]
        if values:
            default_values[field] = float(np.median(values))
    default = StageCosts(**{**_zero_unused(default_values), **default_values})
    overrides = {
        stage: {k: v for k, v in fields.items() if v != getattr(default, k)} for stage, fields in per_stage.items()
    }
    overrides = {stage: values for stage, values in overrides.items() if values}
    step_rows = durations[durations["op"] == "STEP"]
    return CostModel(
        default=default,
        overrides=overrides,
        p2p_latency=_p2p_latency(frame),
        optimizer_step=trimmed_mean(step_rows["duration"]) if len(step_rows) else 0.0,
        time_unit=time_unit,
        num_stages=num_stages,
        chunks=chunks,  # so a stage keeps its measured time on another pp×v of the same pp·v
    )


def dual_slices(compute: pd.DataFrame) -> int | None:
    """The model slices of a timeline of the dual placement (bidirectional DualPipe), else None. A timeline
    does not name its placement; the dual one is the only one whose first half of the microbatch ids runs
    exactly the first half of the stages (the down pipeline) and the second half the rest."""
    passes = compute[compute["microbatch"] >= 0]  # F, B, I, W (REDUCE_GRAD has no microbatch)
    stages, microbatches = int(compute["stage"].max()) + 1, int(passes["microbatch"].max()) + 1
    if stages % 2 or microbatches % 2:
        return None
    down = passes["microbatch"] < microbatches // 2
    return stages // 2 if ((passes["stage"] < stages // 2) == down).all() else None


def trimmed_mean(values, cut: float = 0.1) -> float:
    """Mean of ``values`` without the lowest and highest ``cut`` share (at least one value is kept)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    drop = int(len(ordered) * cut)
    kept = ordered[drop : len(ordered) - drop] if len(ordered) > 2 * drop else ordered
    return float(kept.mean())


def _derive_missing_backward(per_stage: dict[int, dict[str, float]]) -> str | None:
    """Fill the backward passes a timeline lacks (module docstring's rule); say what was derived, or None."""
    said = set()
    for values in per_stage.values():
        has_split = "backward_input" in values and "backward_weight" in values
        if "backward" in values and "backward_input" not in values and "backward_weight" not in values:
            values["backward_input"] = INPUT_GRAD_SHARE * values["backward"]
            values["backward_weight"] = values["backward"] - values["backward_input"]
            said.add(f"I and W derived from the fused B (I = {INPUT_GRAD_SHARE:g}·B, W = B − I; the timeline has no "
                     "split backward): split-backward schedules are predicted from that rule, not measured")
        elif has_split and "backward" not in values:
            values["backward"] = values["backward_input"] + values["backward_weight"]
            said.add("B derived as I + W (the timeline has no fused backward)")
    return "; ".join(sorted(said)) or None


def _zero_unused(values: dict[str, float]) -> dict[str, float]:
    """Ops that never ran cost nothing, rather than the unit defaults, in a calibrated model."""
    return {field: 0.0 for field in _FIELD_OF_OP.values() if field not in values}


def _p2p_latency(frame: pd.DataFrame) -> float:
    """Median send-issue → data-available delay, over receives whose consumer really waited for the data.

    A RECV row ends when its data was there for the compute that consumed it. Where that compute had to
    wait (the rank's previous instruction ended before the data arrived), the end is the arrival itself and
    ``end − send start`` is the transfer; elsewhere the data was early and the delay says nothing.
    """
    sends = frame[frame["op"].isin(["SEND_F", "SEND_B"])]
    recvs = frame[frame["op"].isin(["RECV_F", "RECV_B"])]
    if sends.empty or recvs.empty:
        return 0.0
    # Message k on link (a→b) pairs the k-th send on a to b with the k-th receive on b from a, per step.
    sends = sends.assign(src=sends["rank"], dst=sends["peer"]).sort_values(["step", "src", "dst", "seq"])
    recvs = recvs.assign(src=recvs["peer"], dst=recvs["rank"]).sort_values(["step", "src", "dst", "seq"])
    sends = sends.assign(k=sends.groupby(["step", "src", "dst"]).cumcount())
    recvs = recvs.assign(k=recvs.groupby(["step", "src", "dst"]).cumcount())
    pairs = recvs.merge(sends, on=["step", "src", "dst", "k"], suffixes=("_recv", "_send"))
    busy = frame[~frame["op"].isin(["RECV_F", "RECV_B", "SEND_F", "SEND_B"])]
    # For each receive, when its rank last finished a busy instruction before the data was there.
    idle = pd.merge_asof(
        pairs.sort_values("end_recv"), busy[["step", "rank", "end"]].rename(columns={"rank": "dst"}).sort_values("end"),
        left_on="end_recv", right_on="end", by=["step", "dst"], direction="backward",
    )
    scale = float((busy["end"] - busy["start"]).median()) if len(busy) else 0.0
    waited = idle[(idle["end_recv"] - idle["end"].fillna(-np.inf)) > 1e-3 * scale]
    waited = waited[waited["end_recv"] >= waited["start_send"]]
    if waited.empty:
        return 0.0
    return float((waited["end_recv"] - waited["start_send"]).median())
