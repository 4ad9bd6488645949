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
