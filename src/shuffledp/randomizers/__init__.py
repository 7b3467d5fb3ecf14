"""Client-side randomizers, one module per family.

The names below are re-exported lazily (PEP 562), so that importing one family
(``shuffledp.randomizers.bitflip`` for FLIP) does not load the others (the
correlated randomizer's certificate imports scipy.signal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
