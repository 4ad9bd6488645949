"""Every ``pipesim`` command, one module each. A command module defines ``NAME``, ``register(sub)`` (adds its
subparser, with ``func=run``) and ``run(args) -> int``. To add a command, write its module and list it here:
``NAMES`` is the one registry, in the order ``pipesim --help`` shows them (a module's file name is its NAME).

The modules are imported on demand (:func:`command`): a command line that names one command builds only
that command's parser, so ``pipesim simulate`` does not import the planner, pandas-heavy exports or
matplotlib for the other commands. ``COMMANDS`` (every module) is there for whoever needs them all.
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = ("simulate", "validate", "lower", "schedules", "models", "chips", "frameworks", "export", "topology", "sweep",
         "plot", "calibrate", "fit", "overlay", "plan", "synthesize", "profile")


def command(name: str) -> ModuleType:
    """The module of command ``name`` (one of :data:`NAMES`), imported on first use."""
    module = importlib.import_module(f"{__name__}.{name}")
    assert name == module.NAME, f"command module {name} calls itself {module.NAME}"
    return module


def __getattr__(attribute: str):
    if attribute == "COMMANDS":
        return tuple(command(name) for name in NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
