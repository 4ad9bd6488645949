"""Import and export of ``torch.distributed.pipelining`` action CSVs: PyTorch's schedule format, in pipesim's IR.

PyTorch writes one row per rank and one cell per action (``_PipelineScheduleRuntime._dump_csv``, format of
``_Action.__repr__``): ``{stage}{kind}{microbatch}`` — ``0F0``, ``1I3``, ``1W3``, ``0B0``,
``3SEND_F2``, ``2RECV_B1``, ``1REDUCE_GRAD`` (no microbatch) — and an empty cell where the rank idles. The
number in front is the *global stage index*, not the local chunk; a communication action carries the stage
of the rank that holds it (a ``RECV_F`` names the receiving stage), as pipesim's comm instructions do.

Import reads the compute actions into a :class:`~pipesim.program.ir.Schedule` (stage → rank and chunk from which row
holds each stage; the placement, loop or V, from that mapping) and lowers it with :func:`lower`. When the
CSV also holds communication (PyTorch's ``compute_comms`` format), each rank's sends, receives and gradient
reductions must be exactly the ones ``lower()`` derives, or the import fails naming the first difference.
Their *positions* are not copied: ``lower()`` places them by pipesim's own rules (docs/architecture.md,
"Communication semantics") — a send right after the compute that produces its tensor, a ``RECV`` that *posts*
the receive in the sender's order on its link, with the consuming compute waiting for the data — which is
what PyTorch's runtime does with its ``irecv``s too, but the cell where each lands may differ.
``UNSHARD``/``RESHARD`` (FSDP prefetch) are skipped — pipesim models no FSDP. ``(0F3;1B1)OVERLAP_F_B``, a
forward and a backward (B or I) run together, is read as pipesim's overlapped pair
(:func:`~pipesim.program.ir.overlap`) and written back the same way. Any other kind is an error naming the
cell. No torch import.
"""

from __future__ import annotations

import csv
import enum
import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pipesim.errors import ScheduleError
from pipesim.program.fixed_order import fixed_order_module
from pipesim.program.ir import (
    OVERLAP_NAME,
    Instruction,
    Op,
    PipelineShape,
    Placement,
    Program,
    Schedule,
    instruction,
    overlap,
)
from pipesim.program.lowering import lower


class CsvFormat(enum.Enum):
    """Which actions a CSV holds (PyTorch's ``format`` argument of ``_dump_csv``/``_load_csv``)."""

    COMPUTE_ONLY = "compute_only"
    COMPUTE_COMMS = "compute_comms"


_CELL = re.compile(r"^(\d+)(UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B|F|I|B|W)(\d*)$")
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")
_COMPUTE = {"F": Op.F, "B": Op.B, "I": Op.I, "W": Op.W}
_COMM = {"SEND_F": Op.SEND_F, "RECV_F": Op.RECV_F, "SEND_B": Op.SEND_B, "RECV_B": Op.RECV_B}
_SKIPPED = {"UNSHARD", "RESHARD"}  # FSDP parameter prefetch/free: nothing pipesim simulates


@dataclass(frozen=True)
class CsvAction:
    """One action of one cell: the global stage, PyTorch's kind, the microbatch (None for REDUCE_GRAD)."""

    stage: int
    kind: str
    mb: int | None
    rank: int
    column: int  # 0-based column of the cell in its row
    overlapped: bool = False  # the backward half of an OVERLAP_F_B cell (its forward is the action before)

    @property
    def where(self) -> str:
        return f"rank {self.rank} (row {self.rank + 1}), column {self.column + 1}"


@dataclass(frozen=True)
class ImportedCsv:
    """A CSV read back: the compute Schedule, its lowered Program, and which format the file was in."""

    schedule: Schedule
    program: Program
    format: CsvFormat


def parse_cells(rows: list[list[str]], source: str) -> list[list[CsvAction]]:
    """Parse every cell; an unknown action is a one-line error naming the cell and the kinds PyTorch writes."""
    parsed: list[list[CsvAction]] = []
    # Each stage runs, and each microbatch is forwarded, in some cell: an index beyond the count of cells can
    # only be a typo, and taking it as a size would allocate for it.
    limit = sum(1 for row in rows for raw in row if raw.strip())
    for rank, row in enumerate(rows):
        actions: list[CsvAction] = []
        for column, raw in enumerate(row):
            text = raw.strip()
            if not text:
                continue  # an idle slot
            overlap = _OVERLAP.match(text)
            parts = [p.strip() for p in overlap.group(1).split(";") if p.strip()] if overlap else [text]
            if overlap:
                parts = _pair_parts(parts, text, rank, column, source)
            for index, part in enumerate(parts):
                match = _CELL.match(part)
                if not match:
                    raise ScheduleError(
                        f"{source}: cell {_clip(text)} at rank {rank} (row {rank + 1}), column {column + 1} is not a "
                        "PyTorch action; use {stage}{F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B}{microbatch}, "
                        "{stage}REDUCE_GRAD or (…)OVERLAP_F_B"
                    )
                stage, kind, mb = match.groups()
                needs_mb = kind in _COMPUTE or kind in _COMM
                if needs_mb != bool(mb):
                    what = "needs a microbatch number" if needs_mb else "takes no microbatch number"
                    raise ScheduleError(
                        f"{source}: cell {_clip(text)} at rank {rank}, column {column + 1}: {kind} {what}"
                    )
                for what, digits in (("stage", stage), ("microbatch", mb)):
                    if digits and (len(digits) > 9 or int(digits) >= limit):
                        raise ScheduleError(
                            f"{source}: cell {_clip(text)} at rank {rank}, column {column + 1} names {what} "
                            f"{_clip(digits)}, but the file holds only {limit} action(s); number the {what} "
                            "indices from 0 without gaps"
                        )
                actions.append(CsvAction(int(stage), kind, int(mb) if mb else None, rank, column,
                                         overlapped=bool(overlap) and index == 1))
        parsed.append(actions)
    return parsed


def _pair_parts(parts: list[str], text: str, rank: int, column: int, source: str) -> list[str]:
    """An OVERLAP_F_B cell's two actions, forward first: one F and one B or I, as torch pairs them."""
    kinds = [m.group(2) if (m := _CELL.match(p)) else None for p in parts]
    if len(parts) == 2 and sorted(kinds, key=str) in (["B", "F"], ["F", "I"]):
        return parts if kinds[0] == "F" else parts[::-1]
    raise ScheduleError(f"{source}: cell {_clip(text)} at rank {rank} (row {rank + 1}), column {column + 1}: an "
                        "OVERLAP_F_B cell holds one forward and one backward, e.g. (0F3;1B1)OVERLAP_F_B")


def _clip(text: str, width: int = 24) -> str:
    """A cell as quoted in an error: whole when short, its start and length when not."""
    return repr(text) if len(text) <= width else f"{text[:width]!r}… ({len(text)} characters)"


def _shape_of(actions: list[list[CsvAction]], source: str) -> PipelineShape:
    """pp from the rows, stages and placement from which row runs each stage, microbatches from the largest."""
    pp = len(actions)
    rank_of: dict[int, CsvAction] = {}
    for rank_actions in actions:
        for a in rank_actions:
            if a.kind not in _COMPUTE:
                continue
            first = rank_of.setdefault(a.stage, a)
            if first.rank != a.rank:
                raise ScheduleError(
                    f"{source}: stage {a.stage} runs on rank {first.rank} ({first.where}) and on rank {a.rank} "
                    f"({a.where}); a stage lives on one rank"
                )
    if not rank_of:
        raise ScheduleError(f"{source}: no compute action (F, B, I, W) in any cell")
    num_stages = max(rank_of) + 1
    missing = sorted(set(range(num_stages)) - set(rank_of))
    if missing or num_stages % pp:
        raise ScheduleError(
            f"{source}: stages {sorted(rank_of)} on {pp} ranks — expected stages 0..S−1 with S a multiple of the "
            f"{pp} rows" + (f" (stage {missing[0]} never runs)" if missing else "")
        )
    chunks = num_stages // pp
    microbatches = 1 + max(a.mb for row in actions for a in row if a.mb is not None)
    observed = {stage: a.rank for stage, a in rank_of.items()}
    for placement in (Placement.LOOP, Placement.V):
        shape = PipelineShape(pp, microbatches, chunks, placement)
        if all(shape.rank_of(s) == r for s, r in observed.items()):
            return shape
    listing = ", ".join(f"{s}→{r}" for s, r in sorted(observed.items()))
    raise ScheduleError(
        f"{source}: stage→rank mapping {listing} is neither loop (stage = chunk·pp + rank) nor V placement; "
        "pipesim supports those two"
    )


def _check_microbatches(actions: list[list[CsvAction]], shape: PipelineShape, source: str) -> None:
    """Every stage must forward microbatches 0..m−1 once; name the stage that does not, against the others."""
    forwards: dict[int, list[int]] = {s: [] for s in range(shape.num_stages)}
    for row in actions:
        for a in row:
            if a.kind == "F":
                forwards[a.stage].append(a.mb)
    expected = list(range(shape.microbatches))
    lists = {s: tuple(sorted(mbs)) for s, mbs in forwards.items()}
    usual, _ = Counter(lists.values()).most_common(1)[0]  # what most stages do: the odd one out is the error
    for stage, got in lists.items():
        if got == usual:
            continue
        others = ", ".join(str(s) for s, g in lists.items() if g == usual)
        raise ScheduleError(
            f"{source}: stage {stage} (rank {shape.rank_of(stage)}) forwards microbatches {_describe(got)}, but "
            f"stage(s) {others} forward {_describe(usual)}; every stage must run F once for each microbatch"
        )
    if list(usual) != expected:
        raise ScheduleError(
            f"{source}: the stages forward microbatches {_describe(usual)}; number them 0..{len(usual) - 1}"
        )


def _describe(mbs) -> str:
    mbs = list(mbs)
    if mbs and mbs == list(range(mbs[0], mbs[-1] + 1)):
        return f"{mbs[0]}..{mbs[-1]}"
    return "{" + ", ".join(map(str, mbs)) + "}"


def import_rows(rows: list[list[str]], *, source: str = "torch CSV", name: str = "torch-csv") -> ImportedCsv:
    """Build the Schedule and Program of PyTorch action rows (see the module docstring for the rules)."""
    actions = parse_cells(rows, source)
    shape = _shape_of(actions, source)
    _check_microbatches(actions, shape, source)
    orders: list[list[Instruction]] = []
    csv_comms: list[Counter] = []
    for rank_actions in actions:
        order, comms = [], Counter()
        for a in rank_actions:
            if a.kind in _COMPUTE and a.overlapped:
                forward = order.pop()
                try:
                    order.extend(overlap(forward, instruction(_COMPUTE[a.kind], a.mb, shape.chunk_of(a.stage))))
                except ScheduleError as err:
                    raise ScheduleError(f"{source}: {a.where}: {err}") from None
            elif a.kind in _COMPUTE:
                order.append(instruction(_COMPUTE[a.kind], a.mb, shape.chunk_of(a.stage)))
            elif a.kind in _COMM:
                comms[(_COMM[a.kind], a.mb, shape.chunk_of(a.stage))] += 1
            elif a.kind == "REDUCE_GRAD":
                comms[(Op.REDUCE_GRAD, None, shape.chunk_of(a.stage))] += 1
            # UNSHARD/RESHARD: skipped (FSDP)
        orders.append(order)
        csv_comms.append(comms)
    schedule = Schedule(name, shape, tuple(tuple(o) for o in orders))
    program = lower(schedule)
    has_comms = any(op.is_comm for c in csv_comms for op, _, _ in c)
    if has_comms:
        _check_comms_agree(program, csv_comms, source)
    return ImportedCsv(schedule, program, CsvFormat.COMPUTE_COMMS if has_comms else CsvFormat.COMPUTE_ONLY)


def _check_comms_agree(program: Program, csv_comms: list[Counter], source: str) -> None:
    shape = program.shape
    for rank, instructions in enumerate(program.ranks):
        derived = Counter(
            (ins.op, ins.mb, ins.chunk) for ins in instructions if ins.op.is_comm or ins.op is Op.REDUCE_GRAD
        )
        if not any(op is Op.REDUCE_GRAD for op, _, _ in csv_comms[rank]):
            derived = Counter({k: v for k, v in derived.items() if k[0] is not Op.REDUCE_GRAD})
        for (op, mb, chunk), _count in sorted((csv_comms[rank] - derived).items(), key=str):
            cell = _cell(op, shape.stage(rank, chunk), mb)
            raise ScheduleError(
                f"{source}: rank {rank} lists {cell}, which the compute order does not need (pipesim derives "
                "sends/receives from it); drop the cell or fix the compute order"
            )
        for (op, mb, chunk), _count in sorted((derived - csv_comms[rank]).items(), key=str):
            cell = _cell(op, shape.stage(rank, chunk), mb)
            raise ScheduleError(
                f"{source}: rank {rank} lacks {cell}, which its compute order needs; add it or export the CSV "
                "compute-only"
            )


def _cell(op: Op, stage: int, mb: int | None) -> str:
    return f"{stage}{op.value}{'' if mb is None else mb}"


def export_rows(program: Program, fmt: CsvFormat = CsvFormat.COMPUTE_ONLY) -> list[list[str]]:
    """PyTorch cells per rank. STEP has no PyTorch action (the optimizer runs outside the schedule)."""
    if program.shape.pipelines > 1:
        raise ScheduleError(f"{program.name}: the dual placement (two model copies, half the microbatches each way) "
                            "has no PyTorch action CSV, whose every microbatch passes every stage; export it as "
                            "Program text (--format program)")
    rows = []
    for rank, instructions in enumerate(program.ranks):
        row = []
        for ins in instructions:
            if ins.op is Op.STEP:
                continue
            if fmt is CsvFormat.COMPUTE_ONLY and not ins.op.is_compute:
                continue
            cell = _cell(ins.op, program.shape.stage(rank, ins.chunk), ins.mb)
            if ins.overlap and row:  # the pair's forward is the cell just written (its neighbour in the Program)
                row[-1] = f"({row[-1]};{cell}){OVERLAP_NAME}"
            else:
                row.append(cell)
        rows.append(row)
    return rows


def rows_to_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def read_csv_file(path: Path) -> list[list[str]]:
    """The rows of a torch CSV: UTF-8 text (:func:`read_text_file`) that Python's csv module accepts."""
    from pipesim.io.text_files import read_text_file

    if not path.exists():
        raise ScheduleError(f"torch CSV {path} does not exist; check the path")
    text = read_text_file(path, "torch CSV")
    try:
        return list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as err:  # e.g. a field longer than csv.field_size_limit()
        raise ScheduleError(f"torch CSV {path} is not a readable CSV: {err}") from None


# --- the loader's view: a CSV as a schedule source whose shape is fixed ---------------------------------------


def csv_module(path: Path) -> ModuleType:
    """A module with the schedule-file contract (``build``), for :func:`pipesim.program.loader.load_schedule`."""
    imported = import_rows(read_csv_file(path), source=f"torch CSV {path}", name=path.stem)
    shape = imported.schedule.shape
    return fixed_order_module(imported.schedule, f"pipesim_torch_csv_{path.stem}",
                              f"PyTorch action CSV {path.name} ({imported.format.value}, {shape.placement.value} "
                              "placement)", f"torch CSV {path}")
