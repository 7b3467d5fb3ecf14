"""The parser's copies of choices and defaults (shuffledp.cli._choices) equal their sources."""

from __future__ import annotations

import importlib

import pytest

from shuffledp.cli import _choices


@pytest.mark.parametrize("name", sorted(_choices.SOURCES))
def test_copy_equals_its_source(name: str) -> None:
    module, attribute = _choices.SOURCES[name].split(":")
    source = getattr(importlib.import_module(module), attribute)
    if isinstance(source, dict):  # a registry: its keys are the names
        source = tuple(source)
    assert getattr(_choices, name) == source, f"update shuffledp/cli/_choices.py:{name}"


def test_every_copy_names_its_source() -> None:
    copies = {name for name in _choices.__all__ if name != "SOURCES"}
    assert copies == set(_choices.SOURCES)
