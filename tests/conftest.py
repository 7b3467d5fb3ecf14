"""Shared test fixtures."""

from __future__ import annotations

import os

# Plots are written without a display.
os.environ.setdefault("MPLBACKEND", "Agg")
