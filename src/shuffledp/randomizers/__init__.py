"""Client-side randomizers, one module per family.

The names below are re-exported lazily (PEP 562), so that importing one family
(``shuffledp.randomizers.bitflip`` for FLIP) does not load the others (the
correlated randomizer's certificate imports scipy.signal).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shuffledp.randomizers.bitflip import FlipRandomizer, bernoulli_positions
    from shuffledp.randomizers.correlated import CorrelatedRandomizer
    from shuffledp.randomizers.krr import KRRRandomizer
    from shuffledp.randomizers.laplace import HistogramLaplaceRandomizer
    from shuffledp.randomizers.poisson import PoissonSetRandomizer

__all__ = [
    "CorrelatedRandomizer",
    "FlipRandomizer",
    "HistogramLaplaceRandomizer",
    "KRRRandomizer",
    "PoissonSetRandomizer",
    "bernoulli_positions",
]

#: Where each re-exported name lives, imported on first use.
_LAZY: dict[str, str] = {
    "CorrelatedRandomizer": "shuffledp.randomizers.correlated",
    "FlipRandomizer": "shuffledp.randomizers.bitflip",
    "HistogramLaplaceRandomizer": "shuffledp.randomizers.laplace",
    "KRRRandomizer": "shuffledp.randomizers.krr",
    "PoissonSetRandomizer": "shuffledp.randomizers.poisson",
    "bernoulli_positions": "shuffledp.randomizers.bitflip",
}


def __getattr__(name: str) -> Any:
    """Return a re-exported name, importing its module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shuffledp.randomizers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """List the public names, the lazily imported ones included."""
    return sorted({*globals(), *__all__})
