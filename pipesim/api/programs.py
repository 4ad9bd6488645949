"""Schedules and Programs: the built-in listing, building a checked Program, and validating one
(``pipesim schedules``, ``pipesim lower``, ``pipesim validate``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pipesim.api.defaults import DEFAULT_SCHEDULE
from pipesim.program.build import BuiltProgram, build_program
from pipesim.program.grouped import P2PLowering
from pipesim.program.ir import Program
from pipesim.program.validate import CommSemantics

__all__ = ["ExportFormat", "Validation", "build_program", "export", "load_program", "schedules", "validate"]


class ExportFormat(enum.Enum):
    """What ``pipesim export`` writes."""

    TORCH_CSV = "torch-csv"  # torch.distributed.pipelining's action CSV
    PROGRAM = "program"  # the text of ``pipesim lower``


def schedules() -> pd.DataFrame:
    """The built-in schedules (``pipesim schedules``): columns ``name`` and ``summary``, in listing order."""
    from pipesim.program.loader import builtin_names, load_schedule

    names = builtin_names()
    return pd.DataFrame({"name": names, "summary": [load_schedule(n).summary for n in names]})


def load_program(schedule: str = DEFAULT_SCHEDULE, pp: int | None = None, mb: int | None = None,
                 chunks: int | None = None, *, p2p: str | P2PLowering = P2PLowering.EAGER,
                 memory_limit: float | None = None) -> Program:
    """The lowered, validated Program of ``schedule`` (what ``pipesim lower`` prints as text).

    ``schedule`` is a built-in name, a schedule ``.py`` file, a PyTorch action ``.csv`` or Program text
    (from ``pipesim lower -o`` or ``synthesize -o``); ``pp``/``mb`` default to 4 and 8 (a .csv or Program
    text fixes them); ``chunks`` to the schedule's own. ``p2p="grouped"``: the grouped-safe lowering the
    executor runs on NCCL. For the schedule and its source too, use :func:`build_program`.
    """
    return build_program(schedule, pp, mb, chunks, p2p=P2PLowering(p2p), memory_limit=memory_limit).program


def export(schedule: str = DEFAULT_SCHEDULE, pp: int | None = None, mb: int | None = None,
           chunks: int | None = None, *, format: str | ExportFormat = ExportFormat.TORCH_CSV,
           with_comms: bool = False, memory_limit: float | None = None) -> str:
    """A schedule's per-rank actions as a PyTorch action CSV (cells like ``0F0``, ``1I3``; global stage indices)
    or as Program text (``pipesim export``). ``with_comms`` adds SEND/RECV and REDUCE_GRAD cells (PyTorch's
    compute_comms format)."""
    from pipesim.io.torch_csv import CsvFormat, export_rows, rows_to_text

    program = load_program(schedule, pp, mb, chunks, memory_limit=memory_limit)
    if ExportFormat(format) is ExportFormat.PROGRAM:
        return program.to_text()
    return rows_to_text(export_rows(program, CsvFormat.COMPUTE_COMMS if with_comms else CsvFormat.COMPUTE_ONLY))


@dataclass(frozen=True)
class Validation:
    """A Program proven complete, ordered, FIFO-consistent and deadlock-free under ``semantics``."""

    what: str
    program: Program
    semantics: CommSemantics
    p2p: P2PLowering

    def text(self) -> str:
        """What ``pipesim validate`` prints."""
        shape, what = self.program.shape, self.what
        if self.p2p is P2PLowering.GROUPED:
            what += " (grouped lowering)"
        return (f"ok: {what} is valid for pp={shape.pp} microbatches={shape.microbatches} chunks={shape.chunks} "
                f"({self.program.num_instructions} instructions, {self.semantics.value} sends, no deadlock)")

    def __str__(self) -> str:
        return self.text()


def validate(schedule: str | Program | Path = DEFAULT_SCHEDULE, pp: int | None = None, mb: int | None = None,
             chunks: int | None = None, *, program: str | Path | None = None,
             semantics: str | CommSemantics = CommSemantics.BUFFERED, p2p: str | P2PLowering = P2PLowering.EAGER,
             memory_limit: float | None = None) -> Validation:
    """Prove a schedule (or Program text file, or Program) valid under ``semantics`` (``pipesim validate``).

    Args:
        schedule: a schedule as :func:`load_program` takes it, or a :class:`~pipesim.program.ir.Program`.
        program: a Program text file to validate instead (``validate --program``).
        semantics: ``"buffered"`` (gloo, default), ``"rendezvous"`` or ``"grouped"`` (NCCL groups).
        p2p: ``"eager"`` (default) or ``"grouped"`` lowering.

    Raises:
        PipesimError: the fault, or the cycle of waiting instructions, in one line.
    """
    from pipesim.io.program_text import read_program_file
    from pipesim.program.grouped import grouped_program
    from pipesim.program.validate import validate as prove

    semantics, p2p = CommSemantics(semantics), P2PLowering(p2p)
    if program is not None or isinstance(schedule, Program):
        checked = schedule if program is None else read_program_file(program, flag="--program")
        if p2p is P2PLowering.GROUPED:
            checked = grouped_program(checked)
        prove(checked, semantics)
        what = f"program {program}" if program is not None else f"program {checked.name}"
        return Validation(what, checked, semantics, p2p)
    built: BuiltProgram = build_program(str(schedule), pp, mb, chunks, semantics, p2p, memory_limit=memory_limit)
    return Validation(f"schedule {built.name}", built.program, semantics, p2p)
