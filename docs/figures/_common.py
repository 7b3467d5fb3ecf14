"""What the figure scripts share: where their PNGs and kept outputs go.

Not a script: the ``make_*_figures.py`` scripts next to it import it (run as
``python docs/figures/make_….py``, this folder is on ``sys.path``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

#: The committed figures' folder (docs/figures).
FIGURES = Path(__file__).parent


def output_dir(chosen: str | None, *, prefix: str) -> Path:
    """``--output-dir`` as given, else a fresh temporary directory named ``prefix…``."""
    return Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix=prefix))


def figures_dir(chosen: str | None, *, quick: bool, quick_default: Callable[[], Path]) -> Path:
    """``--figures-dir`` as given, else ``quick_default()`` with ``--quick``, else docs/figures.

    The folder is created. ``--quick`` figures are a check, never the committed ones.
    """
    if chosen is not None:
        figures = Path(chosen)
    elif quick:
        figures = quick_default()
    else:
        figures = FIGURES
    figures.mkdir(parents=True, exist_ok=True)
    return figures
