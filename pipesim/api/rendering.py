"""How results read: the summary of one simulation as text for a person and as a dict for JSON, and the plan's
header, counts and ranking. The CLI prints exactly these; the result objects render themselves with them."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np

from pipesim.program.build import BuiltProgram
from pipesim.sim.closed_forms import AnalyticBubble
from pipesim.sim.costs import ACTIVATION_UNIT, TimeUnit
from pipesim.sim.simulator import SimulationResult


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _convention(shape) -> str:
    share = "per microbatch through one rank's share of the model"
    if shape.pipelines > 1:  # DualPipe: a microbatch passes one of the rank's two chunks, each a whole share
        return (f"{share}; each chunk is a whole share, one per model copy, and half the microbatches pass "
                "each copy")
    chunks = shape.chunks
    return share if chunks == 1 else f"{share}; each of the v={chunks} chunks takes 1/{chunks}"


def summary_dict(built: BuiltProgram, result: SimulationResult, analytic: AnalyticBubble | None) -> dict:
    shape = built.program.shape
    metrics = result.metrics
    memory = result.memory
    return {
        "config": {
            "schedule": built.name,
            "schedule_path": str(built.source.path),
            "pp": shape.pp,
            "microbatches": shape.microbatches,
            "chunks": shape.chunks,
            "placement": shape.placement.value,
            "instructions": built.program.num_instructions,
        },
        "costs": result.costs.to_dict(),
        "time_unit": result.costs.time_unit.value,
        "metrics": metrics.to_dict(),
        "analytic": asdict(analytic) if analytic else None,
        "memory": {
            "unit": ACTIVATION_UNIT,
            "peak_activations": list(memory.peak_activations),
            "peak_bytes": list(memory.peak_bytes) if memory.peak_bytes else None,
        },
    }


def summary_text(built: BuiltProgram, result: SimulationResult, analytic: AnalyticBubble | None) -> str:
    shape = built.program.shape
    costs = result.costs
    m = result.metrics
    memory = result.memory
    unit = "units" if costs.time_unit is TimeUnit.UNIT else costs.time_unit.value
    d = costs.default
    cost_text = (
        f"F={_fmt(d.forward)} B={_fmt(d.backward)}"
        + (f" I={_fmt(d.backward_input)} W={_fmt(d.backward_weight)}" if built.schedule.split_backward else "")
        + (f" a2a F={_fmt(d.a2a_forward)} B={_fmt(d.a2a_backward)} overlap slowdown={_fmt(d.overlap_slowdown)}"
           if d.a2a_forward or d.a2a_backward or d.overlap_slowdown else "")
        + f" p2p latency={_fmt(costs.p2p_latency)}"
        + (f", {len(costs.overrides)} stage override(s)" if costs.overrides else "")
    )
    lines = [
        f"schedule {built.name}: pp={shape.pp} microbatches={shape.microbatches} chunks={shape.chunks} "
        f"({shape.placement.value} placement, {shape.num_stages} stages)",
        f"costs [{unit}]: {cost_text} ({_convention(shape)})",
        *([f"overlapped F-and-B pairs: {pairs} (each F runs together with a B/I; docs/overlap.md)"]
          if (pairs := int(np.count_nonzero(result.table.overlap_mask))) else []),
        f"makespan {_fmt(m.makespan)} {unit}   ideal {_fmt(m.ideal)} {unit} (busiest rank's compute)",
    ]
    rows = [
        ("bubble_fraction", "1 − Σbusy/(pp·T)", m.bubble_fraction, analytic.bubble_fraction if analytic else None),
        ("bubble_overhead", "(T − ideal)/ideal", m.bubble_overhead, analytic.bubble_overhead if analytic else None),
    ]
    if analytic and analytic.span_bubble is not None:  # zero-bubble schedules: the paper's own convention
        worst = max((r.span_bubble for r in m.ranks), default=0.0)
        rows.append(("span_bubble", "max span − busy_r", worst, analytic.span_bubble))
    for name, convention, simulated, closed in rows:
        text = f"{name:<16} = {convention:<18} simulated {simulated:.4f}"
        if closed is not None:
            text += f"   analytic {closed:.4f}"
        lines.append(text)
    if analytic:
        note = "" if costs.is_uniform() else " — costs are not uniform, so it is only a reference"
        lines.append(f"analytic values: {analytic.source}{note}")
    has_bytes = memory.peak_bytes is not None
    header = f"{'rank':>4} {'busy':>10} {'idle':>10} {'span':>10} {'peak act':>9}" + (
        f" {'peak MiB':>10}" if has_bytes else ""
    )
    lines.append(header)
    for rank_metrics in m.ranks:
        r = rank_metrics.rank
        line = (
            f"{r:>4} {_fmt(rank_metrics.busy):>10} {_fmt(rank_metrics.idle):>10} {_fmt(rank_metrics.span):>10} "
            f"{_fmt(memory.peak_activations[r]):>9}"
        )
        if has_bytes:
            line += f" {memory.peak_bytes[r] / 2**20:>10.1f}"
        lines.append(line)
    lines.append(f"peak act: activations held at once, in {ACTIVATION_UNIT}; idle = T − busy")
    return "\n".join(lines)
