"""Lazy re-exports (PEP 562): a package's public names, imported from their modules on first use.

A package lists its names in ``__all__``, maps each re-exported one to its module in
``_LAZY`` and imports them under ``if TYPE_CHECKING:`` for mypy, then ends with::

    __getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

so that importing the package imports none of those modules, and ``from package import
Name`` imports Name's module alone (``tests/unit/test_lazy_packages.py`` keeps the three
lists in step).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of a package that re-exports lazily.

    Args:
        package: The package's name (``__name__``), for the error message.
        where: Each re-exported name's module.
        namespace: The package's ``globals()``: a name, once imported, is kept there, so
            later look-ups do not reach ``__getattr__``.
    """

    def get_attribute(name: str) -> Any:
        """Return a re-exported name, importing its module on first use (PEP 562)."""
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def list_names() -> list[str]:
        """List the public names, the lazily imported ones included."""
        return sorted({*namespace, *namespace.get("__all__", ())})

    return get_attribute, list_names
