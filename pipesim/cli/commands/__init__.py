"""Every ``pipesim`` command, one module each. A command module defines ``NAME``, ``register(sub)`` (adds its
subparser, with ``func=run``) and ``run(args) -> int``. To add a command, write its module and list it here:
``COMMANDS`` is the one registry, in the order ``pipesim --help`` shows them.
"""

from pipesim.cli.commands import (
    calibrate,
    chips,
    export,
    lower,
    models,
    overlay,
    plan,
    plot,
    profile,
    schedules,
    simulate,
    sweep,
    synthesize,
    topology,
    validate,
)

COMMANDS = (simulate, validate, lower, schedules, models, chips, export, topology, sweep, plot, calibrate, overlay,
            plan, synthesize, profile)
