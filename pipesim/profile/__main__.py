"""``torchrun --nproc-per-node N -m pipesim.profile -o chip.yaml ...``: the ``pipesim profile`` command."""

import sys

from pipesim.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["profile", *sys.argv[1:]]))
