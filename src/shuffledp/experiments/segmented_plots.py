"""Old import path of :mod:`shuffledp.experiments.segmented.plots`, kept for existing imports."""

from shuffledp.experiments.segmented.plots import plot_segmented

__all__ = ["plot_segmented"]
