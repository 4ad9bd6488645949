"""Conventions shared by the scripts in ``experiments/``: their flags (--help, --fast, --out, --update-docs),
what they write (PDF + PNG figures, their printed table as a file in ``--out``).

Every figure is written as vector PDF (for papers) and PNG (for the manual), at column width, with the op
and schedule colours of :mod:`pipesim.plots.gantt` and :mod:`pipesim.plots.sweep_plot`.
"""

from __future__ import annotations

import argparse
import atexit
import io
import sys
from pathlib import Path

from pipesim.io.stdout import point_at_devnull
from pipesim.plots.gantt import plt, save_figure

COLUMN_WIDTH_IN = 3.5  # one column of a two-column paper
PAGE_WIDTH_IN = 7.0

plt.rcParams.update({"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "legend.fontsize": 7,
                     "xtick.labelsize": 7, "ytick.labelsize": 7, "pdf.fonttype": 42, "svg.fonttype": "none"})


DEFAULT_OUT = Path("pipesim-figures")
# The manual's figures live in the checkout; only --update-docs writes there, so running a script leaves
# `git status` clean.
DOCS_FIGURES = Path(__file__).resolve().parents[2] / "docs" / "figures"


def experiment_parser(description: str, *, figures: bool = True,
                      fast_help: str = "tiny sizes: checks the script end to end in seconds"
                      ) -> argparse.ArgumentParser:
    """The flags every script in ``experiments/`` takes: ``--fast``, ``--out DIR`` and, for scripts whose
    figures the manual shows (``figures=True``), ``--update-docs``. A script adds its own flags to the parser
    and then calls :func:`parse_experiment_args`."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fast", action="store_true", help=fast_help)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=DEFAULT_OUT,
                       help=f"folder for the files it writes (default ./{DEFAULT_OUT}, created if missing)")
    if figures:
        where.add_argument("--update-docs", action="store_true",
                           help="regenerate the manual's copies in docs/figures of this checkout")
    return parser


def parse_experiment_args(parser: argparse.ArgumentParser, argv: list[str] | None = None, *,
                          create: bool = True) -> argparse.Namespace:
    """Parse, resolve ``--update-docs`` to docs/figures (refused with ``--fast``), create ``--out`` (unless
    ``create=False``: a script that may find nothing to write leaves it to :func:`record_output`)."""
    args = parser.parse_args(argv)
    if getattr(args, "update_docs", False):
        if args.fast:
            parser.error("--update-docs with --fast would put smoke-test figures into the docs; drop --fast")
        args.out = DOCS_FIGURES
    if create:
        args.out.mkdir(parents=True, exist_ok=True)
    return args


def experiment_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """A figure script with no flags of its own: :func:`experiment_parser` + :func:`parse_experiment_args`."""
    return parse_experiment_args(experiment_parser(description), argv)


def as_percent(frame, columns: list[str]):
    """A copy of ``frame`` for printing with the fraction ``columns`` as signed percentages (``+0.66%``): the
    tables say percent where the manual does; the CSVs keep the fractions."""
    shown = frame.copy()
    for column in columns:
        shown[column] = [f"{v:+.2%}" for v in frame[column]]
    return shown


class _Tee(io.TextIOBase):
    """Writes to every stream; one whose reader has gone (``script | head``) is dropped, so the others (the
    table's file) still get the whole output."""

    def __init__(self, *streams):
        self.streams = list(streams)

    def _each(self, act) -> None:
        for stream in list(self.streams):
            try:
                act(stream)
            except BrokenPipeError:
                self.streams.remove(stream)

    def write(self, text: str) -> int:
        self._each(lambda stream: stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._each(lambda stream: stream.flush())


def record_output(out: Path, name: str) -> Path:
    """From here on, what the script prints also goes to ``out/name`` (its table as a file, beside the
    figures; closed at exit). A table script's one line of setup, so every script's ``--out`` means the same."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    handle = path.open("w", encoding="utf-8")
    terminal = sys.stdout
    sys.stdout = _Tee(terminal, handle)

    def close() -> None:
        sys.stdout.flush()
        sys.stdout = terminal
        handle.close()
        try:
            print(f"wrote {path}")
            sys.stdout.flush()
        except BrokenPipeError:  # the terminal's reader is gone; the file is written
            point_at_devnull(sys.stdout)

    atexit.register(close)
    return path


def save_pdf_png(fig, out: Path, stem: str) -> list[Path]:
    """Write ``stem.pdf`` and ``stem.png`` into ``out``; returns the paths."""
    paths = [out / f"{stem}.pdf", out / f"{stem}.png"]
    for path in paths:
        save_figure(fig, path, close=False)
    plt.close(fig)
    for path in paths:
        print(f"wrote {path}")
    return paths
