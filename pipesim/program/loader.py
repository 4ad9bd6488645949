"""Finding and loading schedules: by built-in name (``1f1b``) or from any file that follows the contract.

The contract of a schedule file (see ``schedules/1f1b.py``):

- ``build(pp: int, microbatches: int, chunks: int) -> pipesim.program.ir.Schedule`` — the compute order per rank;
- optional keyword-only ``costs`` and/or ``memory_limit`` parameters of ``build`` — a schedule that adapts to
  the cost model (a :class:`~pipesim.sim.costs.CostModel`) and to a per-rank activation limit (units of one
  microbatch-stage's activations) receives them; files without them are called exactly as before;
- optional ``DEFAULT_CHUNKS: int`` (1 when absent);
- optional ``LIMITS: pipesim.program.limits.ScheduleLimits`` — the chunk counts and microbatch counts it
  builds (one chunk, any microbatches when absent), which tests and tools read instead of knowing names;
- optional ``analytic_bubble(pp, microbatches, chunks, costs: StageCosts) -> AnalyticBubble`` — the closed
  form on uniform costs, printed beside the simulated value.

Every failure — missing file, syntax error, exception inside ``build``, wrong return type, a microbatch id
that is not an int in range, ``sys.exit``, an import or ``build`` that does not finish in time
(:mod:`pipesim.program.user_code`) — becomes a one-line :class:`ScheduleError` naming the file and the fix.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import chain
from pathlib import Path
from types import ModuleType

import numpy as np

from pipesim.errors import PipesimError, ScheduleError
from pipesim.program.ir import Instruction, Schedule
from pipesim.program.limits import ScheduleLimits
from pipesim.program.user_code import run_user_code
from pipesim.sim.closed_forms import AnalyticBubble
from pipesim.sim.costs import StageCosts

BUILD_OPTIONS = ("costs", "memory_limit")


@dataclass(frozen=True)
class ScheduleSource:
    """A loaded schedule file: what it is called, where it lives, and its hooks."""

    name: str
    path: Path
    module: ModuleType
    #: A schedule shipped with pipesim: tested to finish, so its build runs without the time bound that a user's
    #: file gets (arming it costs a thread and two timers per build, a tenth of a small sweep point).
    builtin: bool = False

    @property
    def fixed_shape(self):
        """The PipelineShape a file pins (a PyTorch CSV), or None when pp and microbatches are free."""
        return getattr(self.module, "FIXED_SHAPE", None)

    @property
    def default_chunks(self) -> int:
        return int(getattr(self.module, "DEFAULT_CHUNKS", 1))

    @property
    def limits(self) -> ScheduleLimits:
        return getattr(self.module, "LIMITS", ScheduleLimits())

    @property
    def summary(self) -> str:
        doc = (self.module.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else self.name

    @cached_property
    def build_options(self) -> frozenset[str]:
        """Which of the optional keyword-only build options (``costs``, ``memory_limit``) the file's build takes."""
        try:
            params = inspect.signature(self.module.build).parameters
        except (TypeError, ValueError):
            return frozenset()
        return frozenset(
            name for name in BUILD_OPTIONS
            if name in params and params[name].kind is inspect.Parameter.KEYWORD_ONLY
        )

    def build(self, pp: int, microbatches: int, chunks: int | None = None, *, costs=None,
              memory_limit: float | None = None) -> Schedule:
        """Call the file's ``build`` and check what comes back.

        ``costs`` reaches a build that takes it and is otherwise ignored (every schedule is simulated under
        costs); ``memory_limit`` is an error for a schedule that cannot honour it.
        """
        chunks = self.default_chunks if chunks is None else chunks
        for flag, value in (("--pp", pp), ("--mb", microbatches), ("--chunks", chunks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PipesimError(f"{flag} {value} must be a positive integer")
        accepted = self.build_options
        if memory_limit is not None and "memory_limit" not in accepted:
            raise PipesimError(
                f"schedule {self.name} has a fixed order and takes no --memory-limit; use --schedule zb-auto "
                "to synthesise one for the limit"
            )
        options = {k: v for k, v in (("costs", costs), ("memory_limit", memory_limit))
                   if k in accepted and v is not None}
        call = f"build(pp={pp}, microbatches={microbatches}, chunks={chunks})"
        try:
            if self.builtin:
                schedule = self.module.build(pp, microbatches, chunks, **options)
            else:
                schedule = run_user_code(lambda: self.module.build(pp, microbatches, chunks, **options),
                                         f"schedule {self.path}: {call}")
        except PipesimError:
            raise
        except Exception as err:  # a researcher's file: report, never show a traceback
            raise ScheduleError(
                f"schedule {self.path} raised {type(err).__name__} in build(pp={pp}, microbatches="
                f"{microbatches}, chunks={chunks}): {_one_line(err)}"
            ) from None
        _check_built(self, schedule, pp, microbatches, chunks)
        return schedule

    def analytic(self, pp: int, microbatches: int, chunks: int, costs: StageCosts) -> AnalyticBubble | None:
        hook: Callable | None = getattr(self.module, "analytic_bubble", None)
        return hook(pp, microbatches, chunks, costs) if hook else None


def builtin_names() -> list[str]:
    """Built-in schedule names as users type them: file ``zb_h1.py`` is ``zb-h1``."""
    return list(_builtin_names())


@cache
def _builtin_names() -> tuple[str, ...]:
    # Read once per process: the installed package does not change under a running pipesim, and sweeps
    # resolve a name per point.
    folder = importlib.resources.files("schedules")
    return tuple(sorted(
        p.name[:-3].replace("_", "-") for p in folder.iterdir() if p.name.endswith(".py") and not p.name.startswith("_")
    ))


def load_schedule(spec: str) -> ScheduleSource:
    """Resolve ``spec`` — a built-in name, a ``.py`` schedule file, a PyTorch ``.csv`` or a program text file
    (``pipesim lower -o`` / ``synthesize -o``, recognised by its first line) — into a source."""
    if spec.lower().endswith(".csv"):  # a torch.distributed.pipelining action CSV: its shape is fixed
        from pipesim.io.torch_csv import csv_module

        path = Path(spec)
        return ScheduleSource(path.stem, path, csv_module(path))
    if not spec.lower().endswith(".py") and Path(spec).is_file():  # program text: pipesim lower/synthesize -o
        from pipesim.io.program_text import is_program_text, program_module

        if is_program_text(Path(spec)):
            path = Path(spec)
            return ScheduleSource(path.stem, path, program_module(path))
    looks_like_path = spec.endswith(".py") or "/" in spec or "\\" in spec
    if looks_like_path:
        path = Path(spec)
        if not path.is_file():
            raise ScheduleError(f"schedule file {spec} does not exist; check the path or use a built-in name")
        return ScheduleSource(path.stem, path, _import_file(path))
    name = spec.strip().lower().replace("_", "-")
    if name not in builtin_names():
        raise ScheduleError(
            f"unknown schedule {spec!r}: use one of {', '.join(builtin_names())}, or a path to a .py file"
        )
    return _builtin_source(name)


@cache
def _builtin_source(name: str) -> ScheduleSource:
    """One source per built-in and process (the module is imported once anyway): its hooks are read once."""
    path = Path(str(importlib.resources.files("schedules") / f"{name.replace('-', '_')}.py"))
    return ScheduleSource(name, path, _import_file(path), builtin=True)


def source_version(spec: str) -> str | None:
    """The content digest of the file ``spec`` names (a schedule ``.py``, a PyTorch CSV, program text), or None
    for a built-in name. What is built from a file is cached with it, so a file edited between two calls in one
    process (a notebook iterating on its own schedule) is read again, not answered from the copy it replaced."""
    path = Path(spec)
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None  # unreadable: load_schedule says so in one line


def _import_file(path: Path) -> ModuleType:
    # one module per file and content: an edited file imports again (a built-in's never changes under a process)
    module_name = f"pipesim_schedule_{abs(hash(path.resolve()))}_{source_version(str(path))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ScheduleError(f"schedule file {path} cannot be imported; it must be a Python file ending in .py")
    module = importlib.util.module_from_spec(spec)
    try:
        run_user_code(lambda: spec.loader.exec_module(module), f"schedule file {path} (on import)")
    except PipesimError:
        raise
    except SyntaxError as err:
        raise ScheduleError(f"schedule file {path} has a syntax error at line {err.lineno}: {err.msg}") from None
    except Exception as err:
        raise ScheduleError(f"schedule file {path} raised {type(err).__name__} on import: {_one_line(err)}") from None
    if not callable(getattr(module, "build", None)):
        raise ScheduleError(
            f"schedule file {path} defines no build(pp, microbatches, chunks) function; see schedules/1f1b.py"
        )
    sys.modules[module_name] = module
    return module


def _check_built(source: ScheduleSource, schedule: object, pp: int, microbatches: int, chunks: int) -> None:
    where = f"schedule {source.path}: build(pp={pp}, microbatches={microbatches}, chunks={chunks})"
    if not isinstance(schedule, Schedule):
        raise ScheduleError(
            f"{where} returned {type(schedule).__name__}, expected pipesim.program.ir.Schedule "
            "(use Schedule.from_orders(name, orders, microbatches=...))"
        )
    shape = schedule.shape
    if (shape.pp, shape.microbatches, shape.chunks) != (pp, microbatches, chunks):
        raise ScheduleError(
            f"{where} returned a schedule for pp={shape.pp}, microbatches={shape.microbatches}, "
            f"chunks={shape.chunks}; it must honour the arguments"
        )
    if schedule.held_as_columns:  # built from blocks: the same demands, on the columns
        columns = schedule.columns  # compute ops only (Schedule.from_blocks refuses others)
        if _in_range(columns.microbatch, microbatches).all() and _in_range(columns.chunk, chunks).all():
            return
    else:
        try:  # Schedules repeat a few interned objects thousands of times: check each distinct one (sweeps build
            flat = list(chain.from_iterable(schedule.orders))  # thousands of schedules); the loop names the culprit
        except TypeError:
            flat = [None]
        distinct = dict(zip(map(id, flat), flat, strict=True)).values()
        if all(_sound(ins, microbatches, chunks) for ins in distinct):
            return
    for rank, order in enumerate(schedule.orders):
        for ins in order:
            if not isinstance(ins, Instruction):
                raise ScheduleError(f"{where}: rank {rank} holds {ins!r}; use F(mb, chunk), B(...), I(...), W(...)")
            # Identifiers are ints in range: a float or string id would be truncated, compared wrongly or
            # overflow a fixed-width table later, far from the line that wrote it.
            if not ins.op.is_compute:
                continue  # lowering and validation name a comm op in a compute order
            for field, value, count in (("microbatch", ins.mb, microbatches), ("chunk", ins.chunk, chunks)):
                if type(value) is not int or not 0 <= value < count:
                    raise ScheduleError(
                        f"{where}: rank {rank} holds {ins.op.value}({ins.mb!r}, {ins.chunk!r}) whose {field} "
                        f"{value!r} is not an int in 0..{count - 1}; number each {field} 0..{count - 1} with a "
                        "Python int"
                    )


def _sound(ins: object, microbatches: int, chunks: int) -> bool:
    """What the loop of :func:`_check_built` demands of one entry of a compute order."""
    if not isinstance(ins, Instruction):
        return False
    if not ins.op.is_compute:
        return True
    return (type(ins.mb) is int and 0 <= ins.mb < microbatches and type(ins.chunk) is int
            and 0 <= ins.chunk < chunks)


def _in_range(column: np.ndarray, count: int) -> np.ndarray:
    return (column >= 0) & (column < count)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
