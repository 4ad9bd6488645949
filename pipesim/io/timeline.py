"""The Timeline: one row per executed instruction, shared by predicted and measured runs.

Columns (docs/architecture.md, "Timeline schema"): ``rank, stage, chunk, op, microbatch, start, end`` in seconds (or the
cost model's time unit), ``source`` (``predicted``/``measured``), ``bytes``; plus ``step`` (optimizer step
index, 0 for a simulation), ``peer`` (the other rank of a SEND/RECV) and ``seq`` (position of the instruction
in its rank's program). Integer fields that do not apply (the microbatch of STEP, the peer of F) are -1.

Row meaning per op: compute (F, B, I, W, REDUCE_GRAD, STEP) — the rank is busy from start to end; RECV —
start is when the rank began waiting, end when the data was there; SEND — the transfer on its link
(predicted) or the time spent issuing it (measured).
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import pandas as pd

from pipesim.errors import PipesimError
from pipesim.io.atomic import write_text_atomic, write_with
from pipesim.program.ir import COMPUTE_OPS as IR_COMPUTE_OPS
from pipesim.program.ir import OP_ORDER

COLUMNS = ["step", "rank", "stage", "chunk", "op", "microbatch", "peer", "seq", "start", "end", "source", "bytes"]
INT_COLUMNS = ["step", "rank", "stage", "chunk", "microbatch", "peer", "seq"]
COMPUTE_OPS = tuple(op.value for op in OP_ORDER if op in IR_COMPUTE_OPS)  # their names in the op column


class Source(enum.Enum):
    PREDICTED = "predicted"
    MEASURED = "measured"


class TimelineFormat(enum.Enum):
    CSV = ".csv"
    PARQUET = ".parquet"
    CHROME_TRACE = ".json"

    @classmethod
    def of(cls, path: str | Path, flag: str = "--timeline") -> TimelineFormat:
        suffix = Path(path).suffix.lower()
        for fmt in cls:
            if fmt.value == suffix:
                return fmt
        raise PipesimError(f"{flag} {path}: unknown format {suffix or '(none)'}; use .csv, .parquet or .json (trace)")


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
    fmt = TimelineFormat.of(path, flag)
    if fmt is TimelineFormat.CSV:
        write_with(path, lambda tmp: frame.to_csv(tmp, index=False))
    elif fmt is TimelineFormat.PARQUET:
        write_with(path, lambda tmp: frame.to_parquet(tmp, index=False))
    else:
        write_text_atomic(path, json.dumps(chrome_trace(frame)))


def read_timeline(path: str | Path, flag: str = "timeline") -> pd.DataFrame:
    """Read a Timeline written by pipesim (CSV or Parquet) and check its schema."""
    path = Path(path)
    if not path.is_file():
        raise PipesimError(f"{flag} {path} does not exist")
    fmt = TimelineFormat.of(path, flag)
    try:
        if fmt is TimelineFormat.CSV:
            frame = pd.read_csv(path, keep_default_na=False)
        elif fmt is TimelineFormat.PARQUET:
            frame = pd.read_parquet(path)
        else:
            raise PipesimError(f"{flag} {path} is a Chrome trace; read timelines from .csv or .parquet")
    except (ValueError, OSError, pd.errors.ParserError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PipesimError(f"{flag} {path} cannot be read as {fmt.name.lower()}: {first}") from None
    if frame.empty:
        raise PipesimError(f"{flag} {path} holds no rows; write it with pipesim simulate --timeline or the executor")
    missing = [c for c in ("rank", "stage", "chunk", "op", "microbatch", "start", "end") if c not in frame.columns]
    if missing:
        raise PipesimError(f"{flag} {path} is not a pipesim timeline: missing column(s) {', '.join(missing)}")
    return make_frame({c: frame[c] for c in frame.columns if c in COLUMNS})


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
