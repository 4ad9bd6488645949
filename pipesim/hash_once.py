"""A frozen dataclass's hash computed once per instance, and caches kept beside its fields left out of its pickles.

The planner keys its caches by :class:`~pipesim.analytic.layout.Layout` and
:class:`~pipesim.analytic.model_spec.ModelSpec` (about fifty and thirty fields, many of them enums, whose hash is a
Python-level call). A dataclass's own ``__hash__`` hashes every field again on each lookup: ten million enum hashes
in one ``plan`` of a 70B model over 1,024 GPUs, about a fifth of its time. Both classes are frozen, so the hash
cannot change after ``__init__`` and is kept in the instance's ``__dict__`` beside the other derived values they
keep there. A string's hash differs between processes (``PYTHONHASHSEED``), so no kept value may travel in a
pickle to the planner's worker processes: :func:`fields_only_state` gives pickle the fields alone.

Assign both in the class body (``__hash__ = hash_once``): ``dataclass`` keeps a ``__hash__`` the class defines
itself and would replace one it inherits.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any

_KEY = "_hash_once"


@functools.cache
def _hashed_field_names(cls: type) -> tuple[str, ...]:
    """The fields ``dataclass`` itself hashes: those compared, unless a field says otherwise."""
    return tuple(f.name for f in fields(cls) if (f.compare if f.hash is None else f.hash))


def hash_once(self: Any) -> int:
    """The hash ``dataclass`` would give ``self`` (its hashed fields, as a tuple), computed on the first call."""
    try:
        return self.__dict__[_KEY]
    except KeyError:
        known = self.__dict__[_KEY] = hash(tuple(getattr(self, name) for name in _hashed_field_names(type(self))))
        return known


def fields_only_state(self: Any) -> dict[str, Any]:
    """The instance's fields, without the values it keeps beside them (its hash and other derived caches)."""
    return {f.name: self.__dict__[f.name] for f in fields(self) if f.name in self.__dict__}
