"""Shared test fixtures."""

from __future__ import annotations

import os

# Plots are written without a display.
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config: object) -> None:
    """Measure every figure the package writes during the tests (tests/figure_checks.py)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # no figure can be drawn
        return
    import figure_checks

    figure_checks.install()
