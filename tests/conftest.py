"""Shared fixtures: built-in schedule programs."""

from __future__ import annotations

import pytest

from pipesim.program.build import build_program


@pytest.fixture
def program_of():
    def make(name: str, pp: int, mb: int, chunks: int | None = None):
        return build_program(name, pp, mb, chunks).program

    return make
