"""Client-side randomizers, one module per family."""

from shuffledp.randomizers.bitflip import FlipRandomizer, bernoulli_positions
from shuffledp.randomizers.krr import KRRRandomizer
from shuffledp.randomizers.poisson import PoissonSetRandomizer

__all__ = ["FlipRandomizer", "KRRRandomizer", "PoissonSetRandomizer", "bernoulli_positions"]
