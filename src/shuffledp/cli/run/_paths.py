"""The output paths of a ``run``: checked against the input and each other before any work."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from shuffledp._validation import InvalidParameterError
from shuffledp.cli._common import writable

__all__ = [
    "PLOT_FORMATS",
    "check_distinct_paths",
    "check_plot_format",
    "output_and_plot_paths",
    "same_file",
]


#: Image formats the plot can be written in (matplotlib's raster and vector backends).
PLOT_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file (existing or not)."""
    try:
        if a.exists() and b.exists():
            return a.samefile(b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_distinct_paths(source: Path, named: Sequence[tuple[str, Path | None]]) -> None:
    """Refuse an output path that is the input ``source``, or two outputs that are one file.

    ``named`` holds two ``(flag, path)`` pairs; a ``None`` path is not given.
    """
    for flag, path in named:
        if path is not None and same_file(path, source):
            raise InvalidParameterError(
                f"{flag} {str(path)!r} is the input file; refusing to overwrite it"
            )
    (flag_a, a), (flag_b, b) = named
    if a is not None and b is not None and same_file(a, b):
        raise InvalidParameterError(f"{flag_a} and {flag_b} are the same file {str(a)!r}")


def check_plot_format(plot: Path, *, name_missing_extension: bool = True) -> None:
    """Check that ``plot`` names an image format (a missing extension said apart, or not)."""
    suffix = plot.suffix.lower()
    if not suffix and name_missing_extension:
        raise InvalidParameterError(
            f"--plot: {str(plot)!r} has no extension; name the format, e.g. {plot.name}.png"
        )
    if suffix not in PLOT_FORMATS:
        raise InvalidParameterError(
            f"--plot: unsupported image format {suffix or '(none)'!r}; use one of "
            f"{', '.join(PLOT_FORMATS)}"
        )


def output_and_plot_paths(
    args: argparse.Namespace, *, name_missing_extension: bool = True
) -> tuple[Path | None, Path | None]:
    """Check ``--output`` and ``--plot`` against ``--input`` and each other; return them.

    With a plot, its format is checked and matplotlib must be installed.
    """
    output = writable(args.output, "--output")
    plot = writable(args.plot, "--plot")
    check_distinct_paths(Path(args.input), [("--output", output), ("--plot", plot)])
    if plot is not None:
        check_plot_format(plot, name_missing_extension=name_missing_extension)
        from shuffledp.plotting import require_matplotlib

        require_matplotlib()
    return output, plot
