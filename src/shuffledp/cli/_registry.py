"""Find the command modules of a package: every public module or sub-package in it."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import cast

from shuffledp.cli._common import CommandModule

__all__ = ["command_modules"]


def command_modules(package: ModuleType) -> list[CommandModule]:
    """Return the modules of ``package`` whose names do not start with ``_``, sorted by name.

    Each must define ``NAME``, ``HELP`` and ``add_arguments(parser)``.
    """
    infos = pkgutil.iter_modules(package.__path__)
    found = sorted(info.name for info in infos if not info.name.startswith("_"))
    modules = [importlib.import_module(f"{package.__name__}.{name}") for name in found]
    return [cast(CommandModule, module) for module in modules]
