"""Old import path of :mod:`shuffledp.experiments.per_user.plots`, kept for existing imports."""

from shuffledp.experiments.per_user.plots import plot_per_user

__all__ = ["plot_per_user"]
