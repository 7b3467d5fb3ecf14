"""Parameter checks shared by every protocol, accountant and loader.

Every check raises :class:`InvalidParameterError` (a :class:`ValueError`) whose
message names the parameter, the value received and what is allowed, so that the
command line can print it as a single line.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Literal

__all__ = [
    "DataError",
    "InvalidParameterError",
    "ShuffleDPError",
    "check_delta",
    "check_epsilon",
    "check_flag",
    "check_flip_probability",
    "check_int",
    "check_probability",
    "check_rounding",
]


class ShuffleDPError(ValueError):
    """Base class of the errors this package raises for bad input."""


class InvalidParameterError(ShuffleDPError):
    """A parameter is outside the range the algorithm allows."""


class DataError(ShuffleDPError):
    """The input data are empty, malformed or outside the declared domain."""


def _is_real(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """Return ``value`` as a float if it is a finite ε > 0.

    Args:
        value: The candidate privacy parameter.
        name: The parameter name used in the error message.

    Raises:
        InvalidParameterError: If ``value`` is not a finite real number > 0.
    """
    if not _is_real(value) or not math.isfinite(float(value)) or float(value) <= 0:
        raise InvalidParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_rounding(value: Any, name: str = "rounding") -> Literal["up", "down"]:
    """Return ``value`` if it is ``"up"`` or ``"down"``, the two sides of a computed δ.

    Every accountant that takes ``rounding`` treats anything but ``"up"`` as a
    lower bound, so a typo such as ``"UP"`` would turn a certificate into a lower
    bound without a word: it is refused instead.

    Raises:
        InvalidParameterError: If ``value`` is neither string.
    """
    if isinstance(value, str) and value in ("up", "down"):
        return "up" if value == "up" else "down"
    raise InvalidParameterError(
        f"{name} must be 'up' (an upper bound, the certificate) or 'down' (a lower bound), "
        f"got {value!r}"
    )


def check_delta(value: Any, name: str = "delta") -> float:
    """Return ``value`` as a float if it lies in the open interval (0, 1).

    Raises:
        InvalidParameterError: If ``value`` is not a real number in (0, 1).
    """
    if not _is_real(value) or not (0.0 < float(value) < 1.0):
        raise InvalidParameterError(f"{name} must be in the open interval (0, 1), got {value!r}")
    return float(value)


def check_probability(value: Any, name: str, *, low: float = 0.0, high: float = 1.0) -> float:
    """Return ``value`` as a float if ``low < value < high``.

    Raises:
        InvalidParameterError: If ``value`` is not a real number strictly inside the range.
    """
    if not _is_real(value) or not (low < float(value) < high):
        raise InvalidParameterError(
            f"{name} must be in the open interval ({low:g}, {high:g}), got {value!r}"
        )
    return float(value)


def check_flip_probability(value: Any, name: str = "q") -> float:
    """Return a bit-flip probability, which must lie in (0, 1/2).

    Randomized response with flip probability 1/2 carries no information and
    with flip probability above 1/2 it is a relabelled mechanism; Alg. 2 of the
    FLIP paper (Cheu & Zhilyaev, IEEE S&P 2022, arXiv 2104.02739) takes q in
    (0, 1/2).
    """
    return check_probability(value, name, low=0.0, high=0.5)


def check_int(value: Any, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[minimum, maximum]``.

    Floats with an integral value (``5.0``) are rejected: a silently truncated
    count of users would change the privacy guarantee.

    Raises:
        InvalidParameterError: If ``value`` is not an integer in range.
    """
    if not isinstance(value, Integral) or isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    ivalue = int(value)
    if ivalue < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {ivalue}")
    if maximum is not None and ivalue > maximum:
        raise InvalidParameterError(
            f"{name} must be an integer between {minimum} and {maximum}, got {ivalue}"
        )
    return ivalue


def check_flag(value: Any, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (a truthy string or 1 is refused).

    Raises:
        InvalidParameterError: Otherwise.
    """
    if not isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
    return value
