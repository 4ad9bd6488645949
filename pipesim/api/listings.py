"""The model, chip and framework presets as tables (``pipesim models``, ``pipesim chips``,
``pipesim frameworks``)."""

from __future__ import annotations

import pandas as pd

__all__ = ["chips", "frameworks", "models"]


def models() -> pd.DataFrame:
    """Every model preset: one row each, its fields and ``params`` (the parameter count)."""
    from pipesim.analytic.model_presets import MODEL_PRESETS
    from pipesim.analytic.params import total_params

    return pd.DataFrame([m.to_dict() | {"params": total_params(m)} for m in MODEL_PRESETS.values()])


def chips() -> pd.DataFrame:
    """Every chip preset and committed measured chip: name, ``source`` (preset or measured) and the roofline
    fields (measured tables left out)."""
    from pipesim.analytic.chip_load import load_chip
    from pipesim.analytic.chip_presets import CHIP_PRESETS
    from pipesim.analytic.measured_chips import measured_chip_files

    found = [("preset", c) for c in CHIP_PRESETS.values()]
    found += [("measured", load_chip(str(path))) for path in measured_chip_files().values()]
    rows = []
    for source, chip in found:
        data = chip.to_dict()
        data.pop("measured", None)
        data.pop("provenance", None)
        rows.append({"name": data.pop("name"), "source": source} | data)
    return pd.DataFrame(rows)


def frameworks() -> pd.DataFrame:
    """Every training framework ``framework=`` takes: one row each, the flag defaults its code decides
    (:mod:`pipesim.analytic.frameworks`)."""
    from pipesim.analytic.frameworks import KNOBS

    rows = []
    for framework, k in KNOBS.items():
        rows.append({"framework": framework.value, "elementwise": k.elementwise.value, "loss": k.loss.value,
                     "grad_accumulation": k.grad_accumulation.value, "overlap_tp_dgrad": k.overlap_tp_dgrad,
                     "column_input": k.column_input.value, "selective": k.selective.value,
                     "zero2_collectives": k.zero2_collectives.value, "p2p_tensor": k.p2p_tensor.value,
                     "p2p_calls": k.p2p_calls.value,
                     "pipeline_buffers": ("torch,torch-runtime" if k.torch_pipelining
                                          else k.pipeline_buffers("1f1b").value),
                     "mlp_up": k.mlp_up.value,
                     "tp_shards_sequence": k.tp_shards_sequence, "stage_split": k.stage_split.value,
                     "grad_reduce": k.grad_reduce.value, "grad_buckets": k.grad_buckets.value,
                     "distributed_optimizer": k.distributed_optimizer,
                     "overlap_p2p": ",".join(k.overlapped_p2p_schedules) or "none",
                     "cp_kernels": k.cp_kernels.value, "cp_comm_type": k.cp_comm.value,
                     "fp8_linears": k.fp8_linears.value, "fsdp2": k.fsdp2,
                     "repeat_kv": "unfused" if k.unfused_attention_repeats_kv else "none",
                     "precisions": ",".join(p.value for p in k.precisions),
                     "recomputes": ",".join(r.value for r in k.recomputes) + ("" if k.partial_recompute else " (all)")})
    return pd.DataFrame(rows)
