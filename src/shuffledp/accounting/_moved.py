"""Old import paths of the accountant's modules, kept working after the regrouping.

Until version 0.3 the accountant's modules sat side by side
(``shuffledp.accounting.krr``, ``shuffledp.accounting.two_counts``, …). They now
live in groups by kind of argument (``numerics``, ``published``,
``certificates``, ``reproductions``, ``composition``). An old path still
imports, with a :class:`DeprecationWarning` naming the new one: a module that
moved whole is the new module itself; one whose functions were split between
groups is a read-only view that finds each name in its new home. Nothing is
imported until an old path is asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

__all__ = ["MOVED", "install"]

_A = "shuffledp.accounting."

#: Old module path → the modules its names now live in (the first is the main one).
MOVED: dict[str, tuple[str, ...]] = {
    _A + "_binomial": (_A + "numerics.binomial",),
    _A + "hockey_stick": (_A + "numerics.hockey_stick",),
    _A + "two_counts": (_A + "numerics.two_counts",),
    _A + "mixture": (_A + "numerics.mixture",),
    _A + "iid_blanket": (_A + "numerics.iid_blanket",),
    _A + "generic_bounds": (
        _A + "published.generic_bounds",
        _A + "reproductions.bbgn2019_bennett",
    ),
    _A + "variation_ratio": (_A + "published.variation_ratio",),
    _A + "biswas": (_A + "reproductions.biswas",),
    _A + "flip_paper": (_A + "reproductions.flip_paper",),
    _A + "correlated_paper": (_A + "reproductions.correlated_paper",),
    _A + "krr": (_A + "certificates.krr",),
    _A + "flip": (_A + "certificates.flip",),
    _A + "poisson": (_A + "certificates.poisson", _A + "reproductions.poisson_lemma3"),
    _A + "segmented": (
        _A + "certificates.segmented",
        _A + "segmented_parameters",
        _A + "reproductions.segmented_eq7",
    ),
    _A + "per_user": (
        _A + "certificates.per_user",
        _A + "per_user_epsilons",
        _A + "reproductions.per_user_appendix_c",
    ),
    _A + "correlated": (_A + "certificates.correlated",),
    _A + "augmented": (_A + "certificates.augmented", _A + "reproductions.augmented_paper"),
    _A + "pld": (_A + "composition.pld",),
    _A + "compose": (_A + "composition.compose",),
}


class _SplitModule(types.ModuleType):
    """An old module path whose names now live in several modules (read-only)."""

    _homes: Sequence[types.ModuleType] = ()

    def __getattr__(self, name: str) -> object:
        for home in self._homes:
            if hasattr(home, name):
                return getattr(home, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        names = set(self.__dict__) - {"_homes"}  # __name__, __doc__, __all__, … as any module
        for home in self._homes:
            names.update(getattr(home, "__all__", dir(home)))
        return sorted(names)


class _OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves the old paths in :data:`MOVED`; every other name is left to the usual finders."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _SplitModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        targets = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {' and '.join(targets)}; the old path will be "
            "removed in shuffledp 0.4",
            DeprecationWarning,
            stacklevel=2,
        )
        homes = [importlib.import_module(t) for t in targets]
        if len(homes) == 1:
            # The import system returns what sys.modules holds after exec_module:
            # the new module itself, with its own name and spec untouched.
            sys.modules[module.__name__] = homes[0]
            return
        assert isinstance(module, _SplitModule)
        module._homes = tuple(homes)
        module.__doc__ = f"Old path of {', '.join(targets)} (deprecated)."
        module.__all__ = sorted(  # type: ignore[attr-defined]
            {n for home in homes for n in getattr(home, "__all__", ())}
        )


_FINDER = _OldPathFinder()


def install() -> None:
    """Put the old-path finder on :data:`sys.meta_path` once."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
