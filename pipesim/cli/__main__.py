"""``python -m pipesim.cli``: the same as the ``pipesim`` console script."""

from pipesim.cli.main import main

raise SystemExit(main())
