"""Import optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from shuffledp._interrupts import caused_by_interrupt
from shuffledp._validation import ShuffleDPError

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ShuffleDPError):
    """An optional dependency is not installed."""


def require(module: str, *, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the pip extra.

    Args:
        module: Dotted module name, e.g. ``"matplotlib.pyplot"``.
        extra: The shuffledp extra that provides it, e.g. ``"plot"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if caused_by_interrupt(exc):  # Ctrl-C inside an extension's init: not a missing extra
            raise KeyboardInterrupt from exc
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{top} is required for this; install it with: pip install 'shuffledp[{extra}]'"
        ) from None
