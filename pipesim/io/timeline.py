"""The Timeline: one row per executed instruction, shared by predicted and measured runs.

Columns (docs/architecture.md, "Timeline schema"): ``rank, stage, chunk, op, microbatch, start, end`` in seconds (or the
cost model's time unit), ``source`` (``predicted``/``measured``), ``bytes``; plus ``step`` (optimizer step
index, 0 for a simulation), ``peer`` (the other rank of a SEND/RECV) and ``seq`` (position of the instruction
in its rank's program). Integer fields that do not apply (the microbatch of STEP, the peer of F) are -1.

Row meaning per op: compute (F, B, I, W, REDUCE_GRAD, STEP) — the rank is busy from start to end; RECV —
start is when the rank began waiting, end when the data was there; SEND — the transfer on its link
(predicted) or the time spent issuing it (measured).

``CP_RING`` (measured only, not an instruction): one hop of context parallelism's ring attention inside the
F, B or I whose ``seq``, stage, chunk and microbatch it carries: the time the rank waited for the hop (a K/V
hop is posted before the attention compute it overlaps, so only what that compute did not hide shows; a
dK/dV hop is waited at once, so its row is the whole transfer); ``peer`` is the global rank it was sent to,
``bytes`` what it sent. Under ``--cp-comm-type allgather`` or ``a2a`` each row is the wait for one collective
of the cp group (an all-gather, reduce-scatter or all-to-all), ``peer`` −1 and ``bytes`` its buffer's.
``experiments/cp_ring_share.py`` compares the ring's rows with the simulator's ring cost.
Matching predicted and measured rows (overlay, calibrate) skips them.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.errors import PipesimError
from pipesim.io.atomic import write_table, write_text_atomic
from pipesim.io.text_files import read_text_file
from pipesim.io.timeline_format import TimelineFormat
from pipesim.program.ir import COMPUTE_OPS as IR_COMPUTE_OPS
from pipesim.program.ir import OP_ORDER, Op

COLUMNS = ["step", "rank", "stage", "chunk", "op", "microbatch", "peer", "seq", "start", "end", "source", "bytes"]
INT_COLUMNS = ["step", "rank", "stage", "chunk", "microbatch", "peer", "seq"]
COMPUTE_OPS = tuple(op.value for op in OP_ORDER if op in IR_COMPUTE_OPS)  # their names in the op column
RING_OP = "CP_RING"  # a measured ring-attention hop (module docstring); not an IR op


class Source(enum.Enum):
    PREDICTED = "predicted"
    MEASURED = "measured"


def pair_halves(frame: pd.DataFrame) -> pd.Series:
    """Rows that are a half of an overlapped F-and-B pair in a predicted timeline: an F and a B or I of one
    rank (and step) spanning exactly the same interval, which is how the simulator writes a pair (both halves
    span it). A measured timeline on CPU runs the halves one after the other, so it has none."""
    timed = frame[(frame["end"] > frame["start"]) & frame["op"].isin(["F", "B", "I"])]
    keys = ["step", "rank", "start", "end"] if "step" in frame else ["rank", "start", "end"]
    mask = pd.Series(False, index=frame.index)
    if len(timed):
        mask[timed.index[timed.duplicated(keys, keep=False).to_numpy()]] = True
    return mask


def make_frame(columns: dict) -> pd.DataFrame:
    """Build a Timeline DataFrame with the schema's column order and dtypes."""
    frame = pd.DataFrame(columns)
    missing = [c for c in COLUMNS if c not in frame.columns]
    for column in missing:
        frame[column] = -1 if column in INT_COLUMNS else (0.0 if column == "bytes" else "")
    frame = frame[COLUMNS]
    return frame.astype({**dict.fromkeys(INT_COLUMNS, "int64"), "start": "float64", "end": "float64",
                         "bytes": "float64", "op": "str", "source": "str"})


def write_timeline(frame: pd.DataFrame, path: str | Path, flag: str = "--timeline") -> None:
    """Write CSV, Parquet or (``.json``) a Chrome trace, atomically."""
    if TimelineFormat.of(path, flag) is TimelineFormat.CHROME_TRACE:
        write_text_atomic(path, json.dumps(chrome_trace(frame)))
    else:  # CSV or Parquet, by the name
        write_table(frame, path)


REQUIRED_COLUMNS = ["rank", "stage", "chunk", "op", "microbatch", "start", "end"]
# Smallest value of each integer column: -1 marks a field that does not apply (the microbatch of STEP, the peer
# of F), and rank and step are always real. Largest: a 32-bit index, far beyond any run.
_INT_MINIMUM = {"step": 0, "rank": 0, "stage": -1, "chunk": -1, "microbatch": -1, "peer": -1, "seq": 0}
_INT_MAXIMUM = 2**31 - 1
_OPS = sorted([op.value for op in Op] + [RING_OP])


def read_timeline(path: str | Path, flag: str = "timeline") -> pd.DataFrame:
    """Read a Timeline written by pipesim (CSV or Parquet) and check it against the schema, row by row.

    Schema (module docstring): the columns of ``REQUIRED_COLUMNS``; integer columns hold integers within
    ``_INT_MINIMUM``..2³¹−1 (no empty cell, no fraction); ``op`` is an :class:`~pipesim.program.ir.Op`;
    ``start`` and ``end`` are finite with ``end ≥ start``; ``bytes`` is finite and ≥ 0. A missing ``step``
    is 0, a missing ``seq`` the row order on each rank. Errors name the file, the row and the fix.
    """
    path = Path(path)
    if path.is_dir():
        raise PipesimError(f"{flag} {path} is a folder; give the timeline file inside it")
    if not path.is_file():
        raise PipesimError(f"{flag} {path} does not exist")
    fmt = TimelineFormat.of(path, flag)
    if fmt is TimelineFormat.CHROME_TRACE:
        raise PipesimError(f"{flag} {path} is a Chrome trace; read timelines from .csv or .parquet")
    try:
        if fmt is TimelineFormat.CSV:
            read_text_file(path, flag)  # binary or not UTF-8: say so, rather than what the CSV parser trips on
            frame = pd.read_csv(path, keep_default_na=False, dtype=str)
        else:
            frame = pd.read_parquet(path)
    except PipesimError:
        raise
    except Exception as err:  # pandas and pyarrow raise many types for one cause: not this format
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PipesimError(f"{flag} {path} cannot be read as {fmt.name.lower()}: {first}") from None
    if frame.empty:
        raise PipesimError(f"{flag} {path} holds no rows; write it with pipesim simulate --timeline or the executor")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise PipesimError(f"{flag} {path} is not a pipesim timeline: missing column(s) {', '.join(missing)}")
    where = f"{flag} {path}"
    columns: dict = {}
    for column in INT_COLUMNS:
        if column in frame.columns:
            columns[column] = _integers(frame[column], column, where)
    for column in ("start", "end", "bytes"):
        if column in frame.columns:
            columns[column] = _finite(frame[column], column, where)
    for column in ("rank", "stage"):  # every rank and stage has rows: a larger index is a typo, not a size
        too_big = columns[column] >= len(frame)
        if too_big.any():
            row = _row(too_big)
            raise PipesimError(f"{where} row {row}: {column} {columns[column].iloc[row - 2]} but the file holds only "
                               f"{len(frame)} rows; number {column}s from 0")
    backwards = (columns["end"] < columns["start"]).to_numpy()
    if backwards.any():
        row = int(backwards.argmax())
        raise PipesimError(f"{where} row {row + 2}: end {columns['end'].iloc[row]:g} is before start "
                           f"{columns['start'].iloc[row]:g}; an instruction ends after it starts")
    if "bytes" in columns and (columns["bytes"] < 0).any():
        row = int((columns["bytes"] < 0).to_numpy().argmax())
        raise PipesimError(f"{where} row {row + 2}: bytes {columns['bytes'].iloc[row]:g} must be ≥ 0")
    ops = frame["op"].astype(str).str.strip()
    unknown = ~ops.isin(_OPS)
    if unknown.any():
        row = int(unknown.to_numpy().argmax())
        raise PipesimError(f"{where} row {row + 2}: op {ops.iloc[row][:20]!r} is not one of {', '.join(_OPS)}")
    columns["op"] = ops
    if "source" in frame.columns:
        columns["source"] = frame["source"].astype(str)
    columns.setdefault("step", pd.Series(0, index=frame.index))
    if "seq" not in columns:
        columns["seq"] = pd.DataFrame(columns)[["step", "rank"]].groupby(["step", "rank"]).cumcount()
    return make_frame(columns)


def _row(mask) -> int:
    """The file's row number (header is row 1) of the first true entry."""
    return int(mask.to_numpy().argmax()) + 2


def _integers(values: pd.Series, column: str, where: str) -> pd.Series:
    numbers = pd.to_numeric(values.astype(str).str.strip() if values.dtype == object else values, errors="coerce")
    numbers = numbers.astype("float64")
    bad = numbers.isna() | (numbers != numbers.round()) | (numbers < _INT_MINIMUM[column]) | (numbers > _INT_MAXIMUM)
    if bad.any():
        row = _row(bad)
        raw = values.iloc[row - 2]
        rule = f"an integer from {_INT_MINIMUM[column]}" + (" (-1: does not apply)" if _INT_MINIMUM[column] < 0 else "")
        raise PipesimError(f"{where} row {row}: {column} {str(raw)[:20]!r} must be {rule}")
    return numbers.astype("int64")


def _finite(values: pd.Series, column: str, where: str) -> pd.Series:
    numbers = pd.to_numeric(values.astype(str).str.strip() if values.dtype == object else values, errors="coerce")
    numbers = numbers.astype("float64")
    bad = ~np.isfinite(numbers.to_numpy())
    if bad.any():
        row = int(bad.argmax()) + 2
        raise PipesimError(f"{where} row {row}: {column} {str(values.iloc[row - 2])[:20]!r} must be a finite number")
    return numbers


def chrome_trace(frame: pd.DataFrame) -> dict:
    """Chrome trace-event JSON (opens in Perfetto / chrome://tracing): one thread per rank, times in µs."""
    events: list[dict] = []
    for rank in sorted(frame["rank"].unique()):
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": int(rank),
                       "args": {"name": f"rank {rank}"}})
    for row in frame.itertuples(index=False):
        label = row.op if row.microbatch < 0 else f"{row.op}{row.microbatch}"
        events.append({
            "name": label,
            "cat": row.op,
            "ph": "X",
            "pid": 0,
            "tid": int(row.rank),
            "ts": row.start * 1e6,
            "dur": max(row.end - row.start, 0.0) * 1e6,
            "args": {"stage": int(row.stage), "chunk": int(row.chunk), "microbatch": int(row.microbatch),
                     "peer": int(row.peer), "step": int(row.step), "source": row.source},
        })
    return {"traceEvents": events, "displayTimeUnit": "ms"}
