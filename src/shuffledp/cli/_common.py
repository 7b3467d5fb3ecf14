"""What every command shares: the parser class, number types, checks and output writing.

Every error a user can cause is raised as a :class:`~shuffledp.ShuffleDPError`
(or the parser's :class:`UsageError`); :func:`shuffledp.cli.main` turns it into
one line on stderr, ``shuffledp: error: ...``, and exit code 2.

Numbers are checked by the parser itself, before any command imports numpy or
the accountant: a :class:`Checked` type (:data:`positive_number`,
:data:`open_unit_number`, :func:`integer_at_least`, ...) parses the text and the
parser then checks the value under the flag's name with the same check the
Python API uses, so ``--epsilon 0`` fails as fast as ``--epsilon abc`` and with
the message ``--epsilon must be a finite number > 0, got 0.0``.
"""

from __future__ import annotations

import argparse
import decimal
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, Protocol

from shuffledp._files import check_output_dir, check_output_file, write_text_atomically
from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int

__all__ = [
    "Checked",
    "CommandModule",
    "Parser",
    "UsageError",
    "above_zero_number",
    "byte_size",
    "checked",
    "existing_dir_or_new",
    "fmt",
    "fraction_number",
    "integer",
    "integer_at_least",
    "non_negative_number",
    "number",
    "open_unit_number",
    "positive_number",
    "writable",
    "write_atomically",
]


class UsageError(Exception):
    """Raised by the argument parser instead of exiting, to keep errors on one line."""


#: What argparse takes for a negative number rather than an option: ``-1``, ``-.5``,
#: ``-1e-6``, ``-2.5E+3``, ``-inf``, ``-nan``. Its own pattern (``^-\d+$|^-\d*\.\d+$``)
#: misses the exponent, so ``--delta -1e-6`` used to read as a missing argument
#: (Python 3.14's argparse widens it the same way); no option of this CLI looks like one.
NEGATIVE_NUMBER = re.compile(
    r"^-(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d[\d_]*)?$|^-(?:inf(?:inity)?|nan)$",
    re.IGNORECASE,
)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UsageError` instead of exiting.

    It reads ``-1e-6`` as a (negative) number, not as an option, and checks
    every value of a :class:`Checked` type once parsed, under its flag's name
    (an :class:`~shuffledp.InvalidParameterError`), before any handler runs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message: str) -> NoReturn:
        """Raise the parser's complaint as one line, naming the command (``run krr: ...``)."""
        command = self.prog.removeprefix("shuffledp").strip()
        raise UsageError(f"{command}: {message}" if command else message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, then check every :class:`Checked` value under its flag's name.

        Raises:
            InvalidParameterError: Naming the flag, the value and what is allowed.
        """
        parsed, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            if isinstance(action.type, Checked) and action.option_strings:
                value = getattr(parsed, action.dest, None)
                if value is not None:
                    longs = [o for o in action.option_strings if o.startswith("--")]
                    flag = (longs or action.option_strings)[0]  # --domain-size, not --k
                    setattr(parsed, action.dest, action.type.check(value, flag))
        return parsed, extras


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


class Checked:
    """A parser type: ``parse`` reads the text, then the parser runs ``check`` under the flag.

    ``check(value, flag, **limits)`` is one of the checks of
    :mod:`shuffledp._validation` (or of the same shape), so the message is the
    one the Python API gives, naming the flag: ``--delta must be in the open
    interval (0, 1), got -1e-06``.

    Args:
        parse: Text to value; raises ``argparse.ArgumentTypeError`` on text that
            is no number (``--epsilon abc``).
        check: ``check(value, flag, **limits)`` returns the value or raises
            :class:`~shuffledp.InvalidParameterError`.
        limits: Keyword arguments of ``check`` (``minimum=1``).
    """

    def __init__(self, parse: Callable[[str], Any], check: Callable[..., Any], **limits: Any):
        self.parse = parse
        self._check = check
        self.limits = limits
        self.__name__ = getattr(parse, "__name__", "value")  # argparse names types by it

    def __call__(self, text: str) -> Any:
        """Parse ``text`` (the check follows once the flag is known)."""
        return self.parse(text)

    def check(self, value: Any, flag: str) -> Any:
        """Return ``value`` checked under ``flag`` (each item of a list)."""
        if isinstance(value, list):
            return [self._check(item, flag, **self.limits) for item in value]
        return self._check(value, flag, **self.limits)


def _check_non_negative(value: Any, flag: str) -> float:
    if not (isinstance(value, float) and math.isfinite(value) and value >= 0.0):
        raise InvalidParameterError(f"{flag} must be a finite number >= 0, got {value!r}")
    return value


def _check_fraction(value: Any, flag: str) -> float:
    if not (isinstance(value, float) and 0.0 < value <= 1.0):
        raise InvalidParameterError(f"{flag} must be a number in (0, 1], got {value!r}")
    return value


def _check_above_zero(value: Any, flag: str) -> float:
    if not (isinstance(value, float) and value > 0.0):
        raise InvalidParameterError(f"{flag} must be > 0, got {value!r}")
    return value


#: A finite number > 0 (ε, a slack): ``check_epsilon``'s rule.
positive_number = Checked(number, check_epsilon)
#: A number in the open interval (0, 1) (δ): ``check_delta``'s rule.
open_unit_number = Checked(number, check_delta)
#: A finite number >= 0 (seconds to retry).
non_negative_number = Checked(number, _check_non_negative)
#: A number in (0, 1] (a fraction such as per-user's c).
fraction_number = Checked(number, _check_fraction)
#: A number > 0, infinity included (a distance with no limit).
above_zero_number = Checked(number, _check_above_zero)


def integer_at_least(minimum: int) -> Checked:
    """An integer >= ``minimum`` (``check_int``'s rule and message)."""
    return Checked(integer, check_int, minimum=minimum)


#: Multipliers of :func:`byte_size`'s suffixes: one letter (or ``KiB``...) counts in
#: powers of 1024, as ``sort -S``, Docker and the JVM do; ``kB``, ``MB``... in powers of 1000.
BYTE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    **{p: 1024**i for i, p in enumerate("kmgtp", start=1)},
    **{f"{p}ib": 1024**i for i, p in enumerate("kmgtp", start=1)},
    **{f"{p}b": 1000**i for i, p in enumerate("kmgtp", start=1)},
}

_BYTE_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def byte_size(text: str) -> int:
    """Parse an amount of memory: ``512M``, ``2G``, ``1.5GiB``, ``800MB``, ``123456789``.

    One letter (``K``, ``M``, ``G``, ``T``, ``P``) or ``KiB``... counts in powers of
    1024; ``kB``, ``MB``, ``GB``... in powers of 1000; no suffix (or ``B``) is bytes.
    A fraction of a byte is rounded down. Case does not matter.
    """
    match = _BYTE_SIZE.match(text)
    unit = BYTE_UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise argparse.ArgumentTypeError(
            f"expected an amount of memory such as 512M, 2G, 1.5GiB, 800MB or a number of "
            f"bytes, got {text!r}"
        )
    amount = float(match.group(1)) * unit
    if not (math.isfinite(amount) and amount >= 1):
        raise argparse.ArgumentTypeError(f"expected at least one byte, got {text!r}")
    return int(amount)


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
