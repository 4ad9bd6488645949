"""``python -m pipesim``: the same as the ``pipesim`` console script (and ``python -m pipesim.cli``)."""

from pipesim.cli.main import main

raise SystemExit(main())
