"""What PyTorch's pipelining runtime requires of an action CSV beyond what pipesim's importer checks.

``torch.distributed.pipelining.schedules._PipelineScheduleRuntime._load_csv`` (torch 2.13) takes two formats:

- ``compute_only`` (what torchtitan's ``pipeline_parallel_schedule_csv`` loads): only F, B, I, W (and
  ``(…)OVERLAP_F_B``) cells; torch's own lowering adds UNSHARD/RESHARD, a REDUCE_GRAD after each stage's
  last backward, and the sends and receives. A communication cell is refused by torch.
- ``compute_comms``: the cells are run exactly as written, no lowering and no check. Gradients are scaled by
  1/microbatches only inside ``REDUCE_GRAD``, so a file without a stage's ``REDUCE_GRAD`` trains with m×
  too large gradients, silently.

No torch import: ``pipesim export`` applies these rules too.
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.io.torch_csv import CsvFormat, parse_cells

_COMMS = {"SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD", "UNSHARD", "RESHARD"}


def check_torch_runtime_order(rows: list[list[str]], fmt: CsvFormat, *, source: str = "torch CSV") -> None:
    """Raise a one-line ScheduleError when torch's runtime would refuse ``rows`` in ``fmt`` or run them wrong."""
    actions = parse_cells(rows, source)
    if fmt is CsvFormat.COMPUTE_ONLY:
        for row in actions:
            for a in row:
                if a.kind in _COMMS:
                    raise ScheduleError(
                        f"{source}: {a.where} holds {a.stage}{a.kind}{'' if a.mb is None else a.mb}, a "
                        "communication cell; torch's compute_only format (torchtitan's schedule CSV) takes F, "
                        "B, I, W only: export without --with-comms, or load it as compute_comms"
                    )
        return
    for rank, row in enumerate(actions):
        stages = {a.stage for a in row if a.kind in ("F", "B", "I", "W")}
        reduced = {a.stage for a in row if a.kind == "REDUCE_GRAD"}
        for stage in sorted(stages - reduced):
            raise ScheduleError(
                f"{source}: rank {rank} (row {rank + 1}) has no {stage}REDUCE_GRAD; torch's compute_comms format "
                "scales gradients by 1/microbatches only there, so this would train with gradients "
                "microbatches× too large: export with pipesim export --with-comms, which writes it"
            )
