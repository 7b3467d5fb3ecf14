"""Client-side randomizers, one module per family."""

from shuffledp.randomizers.bitflip import FlipRandomizer, bernoulli_positions
from shuffledp.randomizers.krr import KRRRandomizer

__all__ = ["FlipRandomizer", "KRRRandomizer", "bernoulli_positions"]
