"""Client-side randomizers, one module per family."""

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
