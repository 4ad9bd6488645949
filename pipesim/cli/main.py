"""The ``pipesim`` command line: the parser, built from the registry of commands, and the error contract.

Every user error ends as one line on stderr (``pipesim: error: ...``) and exit status 2; files are written
atomically and their paths are checked as the flags are parsed, so a failed run leaves none half-written.
The commands themselves live in :mod:`pipesim.cli.commands`, one module each.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import signal
import sys

from pipesim import __version__
from pipesim.cli.commands import NAMES, command
from pipesim.cli.flag_hints import flags_of, hint_text, subcommand_parser
from pipesim.errors import PipesimError
from pipesim.io.stdout import point_at_devnull, tolerate_leaving_reader

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors on one line, naming the subcommand (and, for an ambiguous flag, the one
    probably meant: :mod:`pipesim.cli.flag_hints`)."""

    def error(self, message: str):  # type: ignore[override]
        ambiguous = re.match(r"ambiguous option: (--[\w-]+)", message)
        hint = hint_text([ambiguous.group(1)], flags_of(self)) if ambiguous else ""
        raise PipesimError(f"{' '.join(message.split())}{hint} (see {self.prog} --help)")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``only`` (a command's name) just that command's: what a command line naming
    it needs, without importing the other commands' modules (and what they import)."""
    parser = _Parser(prog="pipesim", description="Simulate pipeline-parallel training schedules.")
    parser.add_argument("--version", action="version", version=f"pipesim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in NAMES if only is None else (only,):
        command(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: this process's arguments) and return its exit status.

    Called without ``argv`` — the ``pipesim`` script, ``python -m pipesim.cli`` — the process exits right after,
    so the objects it made are frozen out of the garbage collector (:func:`gc.freeze`): the collection that
    interpreter shutdown would run over all of them (numba's compiler alone leaves a few hundred thousand) costs
    0.1–0.3 s of a large ``simulate`` and frees nothing the exit does not. Called with a list (tests, scripts),
    nothing changes.
    """
    status = _run(sys.argv[1:] if argv is None else list(argv))
    if argv is None:
        gc.freeze()
    return status


def _run(argv: list[str]) -> int:
    try:
        # The first word names the command unless it is an option (--version, --help) or a typo, which
        # need every command's parser (the choices argparse lists).
        only = argv[0] if argv and argv[0] in NAMES else None
        parser = build_parser(only)
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            if not getattr(args, "ignore_unknown", False):
                hint = ("; drop them, or add --ignore-unknown for a pasted launch line's training flags"
                        if hasattr(args, "ignore_unknown") else "")
                own = subcommand_parser(parser, getattr(args, "command", None))
                meant = hint_text(unknown, flags_of(own)) if own is not None else ""
                parser.error(f"unrecognized arguments: {' '.join(unknown)}{meant}{hint}")
            # a pasted launch line's training flags (learning rate, data, checkpoints): said, not silently dropped
            print(f"note: ignored (--ignore-unknown; check that none changes the layout or the kernels): "
                  f"{' '.join(unknown)}", file=sys.stderr)
        # the words as typed: a command whose defaults depend on whose spelling its flags use reads them
        # (simulate takes a pasted Megatron-LM line's absent flags as Megatron-LM's defaults)
        args.command_line = tuple(argv)
        # a reader that leaves early (`pipesim plan … -o plan.parquet | head`) must not stop the files being written
        with tolerate_leaving_reader():
            return args.func(args)
    except PipesimError as err:
        print(f"pipesim: error: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # a write past sys.stdout (its buffer) after the reader left: nothing left to write
        point_at_devnull(sys.stdout)
        return 0
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM where a command turns it into an interrupt
        signum = getattr(err, "signum", signal.SIGINT)
        print(f"pipesim: interrupted by {signal.Signals(signum).name}; stopped cleanly", file=sys.stderr)
        return 128 + signum
    except Exception as err:  # a bug in pipesim: still one line, with a way to see the traceback
        if os.environ.get("PIPESIM_DEBUG"):
            raise
        print(f"pipesim: internal error: {type(err).__name__}: {' '.join(str(err).split())} (rerun with "
              "PIPESIM_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
