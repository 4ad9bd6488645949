"""Flags accepted that change nothing: every switch and choice of ``pipesim simulate``, flipped alone on a few base
layouts, whose resolved layout moves while the step time, the memory and the MFU stay exactly as they were and no
note says the flag changes nothing here. Each such flag is a success that did not do what was asked (ZeRO-2's
``--overlap-grad-reduce`` was one until this script found it) or a pair that means the same (listed below as such).

Run: ``python experiments/inert_flags.py [--fast]`` (about six seconds; ``--fast``: two bases). Prints
each silent flag with the layout fields it moved, and exits 1 if there is one not known to be an equivalent.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from dataclasses import dataclass

from pipesim.cli.main import build_parser
from pipesim.cli.main import main as cli
from pipesim.plots.figures import experiment_parser, parse_experiment_args, record_output

BASES = {
    "dp8 zero1": "--model llama3.2-1b --dp 8 --pp 1 --mb 4 --zero 1",
    "3d tp2 pp4": "--model llama3.1-8b --dp 4 --pp 4 --tp 2 --mb 8 --sequence-parallel --zero 1",
    "dp8 zero0": "--model llama3.2-1b --dp 8 --pp 1 --mb 4",
    "dp8 zero2": "--model llama3.2-1b --dp 8 --pp 1 --mb 4 --zero 2",
    "dp8 zero3": "--model llama3.2-1b --dp 8 --pp 1 --mb 4 --zero 3",
    "interleaved cp2": "--model llama3.1-8b --dp 2 --pp 2 --tp 4 --mb 8 -s interleaved --chunks 2 --zero 1 --cp 2",
    "torchtitan fsdp pp2": "--model llama3.1-8b --dp 4 --pp 2 --tp 2 --mb 8 --framework torchtitan --zero 3",
    "nanotron 3d": "--model llama3.2-1b --dp 4 --pp 2 --tp 2 --mb 8 --framework nanotron",
    "moe ep8": "--model mixtral-8x7b --dp 8 --pp 2 --ep 8 --mb 8 --zero 1",
}
# Flags that spell what the base already runs under another name, or move a field whose two values cost the same by
# the model's own account (each said where it is modelled)
EQUIVALENT = {
    "--distributed-optimizer": "the same ZeRO-1 as --zero 1",
    "--loss nanotron": "Megatron's bytes a logit (kernels.CROSS_ENTROPY_BYTES)",
    "--moe-dispatcher deepep": "inside one node DeepEP's route is NVLink's all-to-all",
    "--moe-token-dispatcher-type flex": "inside one node DeepEP's route is NVLink's all-to-all",
}
NOT_FLIPPED = {"--json", "--sensitivity", "--ignore-unknown", "--timeline", "--trace", "--plot", "--plot-memory",
               "--config", "--costs", "--model", "--hardware", "--train-tokens", "--engine", "--steps"}


def flips() -> list[list[str]]:
    """Every switch (and its --no- form) and every choice of every choice flag of ``simulate``."""
    commands = build_parser("simulate")._subparsers._group_actions[0].choices
    found = []
    for action in commands["simulate"]._actions:
        name = action.option_strings[0] if action.option_strings else None
        if (name is None or name in NOT_FLIPPED or action.help == argparse.SUPPRESS
                or isinstance(action, argparse._HelpAction)):
            continue
        if action.nargs == 0:
            found.append([name])
            if isinstance(action, argparse.BooleanOptionalAction):
                found.append([f"--no-{name[2:]}"])
        elif action.choices:
            found += [[name, str(choice)] for choice in action.choices]
    return found


@dataclass(frozen=True)
class SilentFlag:
    base: str
    flag: str
    moved: dict  # layout field: (before, after)
    equivalent: str | None  # why it costs nothing, where that is known; None: unexplained


def _simulate(argv: list[str]) -> tuple[dict, str] | None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli(["simulate", "--json", "--hardware", "h100-sxm", *argv])
    return (json.loads(out.getvalue())["model_report"], err.getvalue()) if status == 0 else None


def silent_flags(bases: dict[str, str], equivalent: dict[str, str]) -> list[SilentFlag]:
    """Each flag that, flipped alone on a base, moves the resolved layout but not the step time, the memory or the
    MFU, and is not said to change nothing."""
    found = []
    for name, base in bases.items():
        reference = _simulate(base.split())
        for flag in flips():
            flipped = _simulate([*base.split(), *flag])
            if reference is None or flipped is None:
                continue  # a refusal says what it refuses
            (before, _), (after, said) = reference, flipped
            moved = {k: (before["layout"].get(k), v) for k, v in after["layout"].items()
                     if before["layout"].get(k) != v}
            same = all(after[k] == before[k] for k in ("step_time_s", "memory", "mfu"))
            if moved and same and "changes nothing" not in said + json.dumps(after):
                found.append(SilentFlag(name, " ".join(flag), moved, equivalent.get(" ".join(flag))))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = experiment_parser(__doc__, figures=False, fast_help="two base layouts")
    args = parse_experiment_args(parser, argv)
    record_output(args.out, "inert_flags.txt")
    bases = dict(list(BASES.items())[:2]) if args.fast else BASES
    found = silent_flags(bases, EQUIVALENT)
    for f in found:
        print(f"{f.base:20} {f.flag:40} {f.equivalent or 'SILENT'}: {f.moved}")
    unexplained = sum(f.equivalent is None for f in found)
    print(f"{unexplained} flag(s) accepted that changed nothing, unsaid")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
