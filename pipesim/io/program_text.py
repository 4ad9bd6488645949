"""Program text files (``pipesim lower -o``): read, parsed, and bounded before anything iterates over them."""

from __future__ import annotations

from pathlib import Path

from pipesim.errors import ScheduleError
from pipesim.io.text_files import read_text_file
from pipesim.program.ir import Program


def read_program_file(path: str | Path, flag: str = "--program") -> Program:
    """Parse a program text file; its header must fit its instructions.

    Every microbatch needs a forward on every stage, so a Program of ``n`` instructions has at most ``n``
    microbatches and ``n`` chunks per rank: a header claiming more is refused here, before a checker allocates
    per-microbatch tables for it. Every ``mb``, ``chunk`` and ``peer`` lies inside the header's ranges (absurd
    integers never reach the fixed-width arrays of the checkers).
    """
    text = read_text_file(path, f"{flag} file")
    try:
        program = Program.from_text(text)
    except ScheduleError as err:
        raise ScheduleError(f"{flag} {path}: {err}") from None
    count = program.num_instructions
    shape = program.shape
    for key, value in (("microbatches", shape.microbatches), ("chunks", shape.chunks)):
        if value > max(count, 1):
            raise ScheduleError(f"{flag} {path}: header says {key}: {value}, but the file holds only {count} "
                                f"instruction(s); each of the {key} needs its own, so fix the header")
    limits = {"mb": shape.microbatches, "chunk": shape.chunks, "peer": shape.pp}
    for rank, instructions in enumerate(program.ranks):
        for ins in instructions:
            for key, limit in limits.items():
                value = getattr(ins, key)
                if value is not None and not 0 <= value < limit:
                    raise ScheduleError(f"{flag} {path}: rank {rank} instruction '{ins}' has {key}={value}, outside "
                                        f"0..{limit - 1} of the header; fix the instruction or the header")
    return program


#: The first line :meth:`Program.to_text` writes; how the loader tells program text from other files.
PROGRAM_TEXT_HEADER = "# pipesim program v1"


def is_program_text(path: Path) -> bool:
    """Whether ``path`` is a file that starts like program text (``pipesim lower -o``, ``synthesize -o``)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(len(PROGRAM_TEXT_HEADER)).decode("utf-8", "replace") == PROGRAM_TEXT_HEADER
    except OSError:
        return False


def program_module(path: Path):
    """A module with the schedule-file contract (``build``) for :func:`pipesim.program.loader.load_schedule`.

    Program text is a lowered Program; what a schedule source gives is its compute order, which every command
    lowers again. So the file's SEND/RECV must be what :func:`~pipesim.program.lowering.lower` derives from
    that order (true of every file pipesim writes with the default eager lowering); a hand-edited or grouped
    communication order is refused here rather than silently replaced (``validate --program`` checks it as is).
    Like a torch CSV, the file fixes pp, microbatches and chunks.
    """
    from pipesim.program.fixed_order import fixed_order_module
    from pipesim.program.ir import Schedule
    from pipesim.program.lowering import lower

    program = read_program_file(path, flag="schedule")
    shape = program.shape
    orders = tuple(tuple(ins for ins in rank if ins.op.is_compute) for rank in program.ranks)
    schedule = Schedule(program.name, shape, orders)
    if lower(schedule).ranks != program.ranks:
        raise ScheduleError(f"program text {path}: its communication is not what pipesim lowers from its compute "
                            "order (hand-edited, or lowered with --p2p grouped); write it with 'pipesim lower' "
                            "(default --p2p) or 'pipesim synthesize -o', or check it as is with validate --program")
    return fixed_order_module(schedule, f"pipesim_program_text_{path.stem}",
                              f"Program text {path.name} ({shape.placement.value} placement)", f"program text {path}")
