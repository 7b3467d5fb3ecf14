"""What every command shares: the parser class, number types, checks and output writing.

Every error a user can cause is raised as a :class:`~shuffledp.ShuffleDPError`
(or the parser's :class:`UsageError`); :func:`shuffledp.cli.main` turns it into
one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import decimal
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol

from shuffledp._files import check_output_dir, check_output_file, write_text_atomically

__all__ = [
    "CommandModule",
    "Parser",
    "UsageError",
    "checked",
    "existing_dir_or_new",
    "fmt",
    "integer",
    "number",
    "writable",
    "write_atomically",
]


class UsageError(Exception):
    """Raised by the argument parser instead of exiting, to keep errors on one line."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        """Raise the parser's complaint as one line."""
        raise UsageError(f"{self.prog}: {message}")


class CommandModule(Protocol):
    """A module that adds one command (or one protocol of a family) to a parser.

    ``NAME`` and ``HELP`` name the sub-command; ``add_arguments`` declares its
    options and sets ``handler``.
    """

    NAME: str
    HELP: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...


def number(text: str) -> float:
    """Parse a real number (``1e-6``, ``0.5``)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def integer(text: str) -> int:
    """Parse an integer; integral floats such as ``1e5`` or ``100.0`` are accepted."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not math.isfinite(value) or value != math.floor(value) or abs(value) > 2.0**53:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(value)


def checked(check: Callable[..., Any], value: Any, flag: str, **kwargs: Any) -> Any:
    """Run a validation function so that its message names the command-line flag."""
    return check(value, flag, **kwargs)


def writable(path: str | None, flag: str) -> Path | None:
    """Return ``path`` as a Path if a file can be written there without damaging anything.

    See :func:`shuffledp._files.check_output_file`: the directory must exist
    and take new files; an existing path must be a writable regular file (not
    a symbolic link, directory, device, FIFO or socket). Called before any
    work, so a bad path stops the command at once.
    """
    if path is None:
        return None
    return check_output_file(path, flag)


def existing_dir_or_new(path: str, flag: str) -> Path:
    """Return ``path`` as a Path if it is, or can become, a directory that takes new files."""
    return check_output_dir(path, flag)


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (never partially).

    See :func:`shuffledp._files.write_text_atomically`.
    """
    write_text_atomically(path, text)


def fmt(value: float) -> str:
    """Format a number for a table: scientific notation when very large or small."""
    if value == 0 or not math.isfinite(value):
        return str(value)
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


def fmt_bound(value: float, *, up: bool, digits: int = 4) -> str:
    """Format like :func:`fmt`, rounding the last digit shown up (``up``) or down.

    A guarantee printed to a few digits must stay a guarantee when copied: an
    upper bound on ε or δ is shown rounded up, a lower bound rounded down (and a
    calibrated parameter towards more noise).
    """
    if value == 0 or not math.isfinite(value):
        return str(value)
    scientific = abs(value) >= 1e4 or abs(value) < 1e-3
    # The shortest decimal that reads back as this double (within half a unit in
    # the last place of it): 0.06403 typed by a user stays 0.06403.
    exact = decimal.Decimal(repr(float(value)))
    exponent = exact.adjusted() - (digits - 1)  # keep `digits` significant digits
    rounding = decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR
    shown = exact.quantize(decimal.Decimal(1).scaleb(exponent), rounding=rounding)
    if shown.adjusted() != exact.adjusted():  # 9.9995 -> 10.00: one digit fewer after the point
        shown = shown.quantize(decimal.Decimal(1).scaleb(exponent + 1), rounding=rounding)
    if scientific:
        mantissa = shown.scaleb(-shown.adjusted())
        return f"{mantissa:.{digits - 1}f}e{shown.adjusted():+03d}"
    text = format(shown, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
