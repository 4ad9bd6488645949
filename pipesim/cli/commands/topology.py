"""``pipesim topology``: every process group of a tp × cp × dp × pp layout."""

from __future__ import annotations

import argparse

from pipesim.cli.arg_types import positive_int
from pipesim.errors import PipesimError

NAME = "topology"
# The listing prints one line per rank: beyond this many it is no longer something to read, and a typo such as
# --tp 1000 --pp 1000 would otherwise print for hours.
MAX_LISTED_WORLD = 65_536


def register(sub) -> None:
    topo = sub.add_parser(NAME, help="print the process groups of a tp×cp×dp×pp layout",
                          description="Print every process group (tp fastest, then cp, dp, pp). "
                          f"Worlds of up to {MAX_LISTED_WORLD} ranks.")
    for dim in ("tp", "cp", "dp", "pp"):
        topo.add_argument(f"--{dim}", type=positive_int, default=1, help=f"{dim} degree (default 1)")
    topo.add_argument("--ep", type=positive_int, default=1,
                      help="expert-parallel degree, folded over dp×cp (divides dp·cp; default 1)")
    topo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipesim.topology import Topology

    world = args.tp * args.cp * args.dp * args.pp
    if world > MAX_LISTED_WORLD:
        raise PipesimError(f"tp·cp·dp·pp = {args.tp}·{args.cp}·{args.dp}·{args.pp} = {world} ranks is more than "
                           f"the {MAX_LISTED_WORLD} 'pipesim topology' lists; use smaller degrees")
    print(Topology(args.tp, args.cp, args.dp, args.pp, ep=args.ep).describe())
    return 0
