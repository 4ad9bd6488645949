"""What PyTorch's pipelining runtime requires of an action CSV beyond what pipesim's importer checks.

``torch.distributed.pipelining.schedules._PipelineScheduleRuntime._load_csv`` (torch 2.13) takes two formats:

- ``compute_only`` (what torchtitan's ``pipeline_parallel_schedule_csv`` loads): only F, B, I, W (and
  ``(…)OVERLAP_F_B``) cells; torch's own lowering adds UNSHARD/RESHARD, a REDUCE_GRAD after each stage's
  last backward, and the sends and receives. Any other cell (communication, UNSHARD/RESHARD) is refused by torch.
- ``compute_comms``: the cells are run exactly as written, no lowering and no check. Gradients are scaled by
  1/microbatches only inside ``REDUCE_GRAD``, so a file without a stage's ``REDUCE_GRAD`` trains with m×
  too large gradients, silently.

The rest torch checks (a stage on one rank, F once per microbatch, W after its I, the backward count) pipesim's
importer and ``validate()`` already hold. :func:`check_torch_runtime_order` is what ``executors.torch_runtime``
applies before any process group starts; :func:`torchtitan_note` the line ``pipesim export -o`` prints. No
torch import.
"""

from __future__ import annotations

from pipesim.errors import ScheduleError
from pipesim.io.torch_csv import CsvFormat, parse_cells
from pipesim.program.ir import PipelineShape, Placement

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


# --- torchtitan: what its config must say for an order (torchtitan/distributed/pipeline_parallel.py) -------------
#
# torchtitan builds its stages *before* it reads the CSV, from two settings: how many stages per rank (1 for a
# single-stage schedule name, else 2, or what ``pipeline_parallel_layers_per_stage`` /
# ``module_fqns_per_model_part`` make of the model) and where each stage lives (V-style only for the names
# ZBVZeroBubble and DualPipeV, looped for every other name). Then ``_PipelineScheduleRuntime._load_csv(path)``
# reads the CSV as compute_only and takes its stage→rank map from the rows; a rank that holds a stage the rows
# give to another rank makes the run fail (or wait on a peer until the timeout). So the schedule name must be
# chosen for the order's placement.


def torchtitan_schedule_name(shape: PipelineShape) -> str:
    """The ``pipeline_parallel_schedule`` under which torchtitan places stages as ``shape`` does."""
    if shape.placement is Placement.V:
        return "ZBVZeroBubble"  # V-style placement, two stages per rank (DualPipeV would do the same)
    return "PipelineScheduleSingle" if shape.chunks == 1 else "PipelineScheduleMulti"


def torchtitan_note(shape: PipelineShape, fmt: CsvFormat, csv_name: str) -> str:
    """One line for ``pipesim export``: the torchtitan settings that run this CSV, or why none does."""
    if fmt is CsvFormat.COMPUTE_COMMS:
        return ("warning: --with-comms writes PyTorch's compute_comms format, which "
                "_PipelineScheduleRuntime._load_csv(path, format=\"compute_comms\") runs as written; torchtitan's "
                "pipeline_parallel_schedule_csv loads compute_only only: export without --with-comms for torchtitan")
    stages = ""
    if shape.placement is Placement.LOOP and shape.chunks > 2:
        stages = (f", and module_fqns_per_model_part with {shape.num_stages} lists ({shape.chunks} stages per rank; "
                  "torchtitan's default for a multi-stage name is 2)")
    return (f"note: torchtitan: [parallelism] pipeline_parallel_degree = {shape.pp}, num_pp_microbatches = "
            f"{shape.microbatches}, pipeline_parallel_schedule = \"{torchtitan_schedule_name(shape)}\" (places "
            f"stages {shape.placement.value}-style as this order does), pipeline_parallel_schedule_csv = "
            f"\"{csv_name}\"{stages}; see docs/torch-runtime.md")
