"""Client-side randomizers, one module per family."""

from shuffledp.randomizers.bitflip import FlipRandomizer, bernoulli_positions

__all__ = ["FlipRandomizer", "bernoulli_positions"]
