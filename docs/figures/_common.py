"""What the figure scripts share: where their PNGs and kept outputs go.

Not a script: the ``make_*_figures.py`` scripts next to it import it (run as
``python docs/figures/make_….py``, this folder is on ``sys.path``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable, Iterable
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


def experiment_parser(description: str, *, quick_help: str, kept: str) -> argparse.ArgumentParser:
    """The options every experiment's figure script takes: --quick, --figures-dir, --output-dir."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument(
        "--figures-dir",
        default=None,
        help="where the PNGs go (default: docs/figures; with --quick, the output directory)",
    )
    parser.add_argument("--output-dir", default=None, help=f"keep the {kept} here")
    return parser


def directories(args: argparse.Namespace, *, prefix: str) -> tuple[Path, Path]:
    """(where the experiment's outputs are kept, where the PNGs go) for the parsed options."""
    keep = output_dir(args.output_dir, prefix=prefix)
    figures = figures_dir(
        args.figures_dir, quick=args.quick, quick_default=lambda: keep / "figures"
    )
    return keep, figures


def copy_figures(files: Iterable[str], figures: Path, name: Callable[[Path], str | None]) -> None:
    """Copy the files ``name`` gives a figure name to into ``figures``; say what was kept."""
    for file in files:
        path = Path(file)
        target_name = name(path)
        if target_name is None:
            print(f"kept {path}")
            continue
        target = figures / target_name
        shutil.copyfile(path, target)
        print(f"wrote {target}")
