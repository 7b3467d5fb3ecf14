"""What the message bounds add to a release's δ, recomputed for the service tests.

The release's δ is the certificate's plus (1 + e^ε)·N·2·10⁻³⁰, N the parties
whose honest law the certificate counts on and that could exceed a message
bound (``shuffledp.accounting.certificates.message_bounds``), rounded up.
"""

from __future__ import annotations

import math
from fractions import Fraction


def cap_cost(epsilon: float, parties: int) -> Fraction:
    """(1 + e^ε)·N·2·10⁻³⁰ in exact arithmetic (e^ε to float precision)."""
    return Fraction(1 + math.exp(epsilon)) * parties * 2 * Fraction(1, 10**30)


def assert_release_delta(released: float, certified: float, *, epsilon: float, parties: int):
    """``released`` covers ``certified`` plus the bounds' cost, and is no looser than needed."""
    cost = cap_cost(epsilon, parties)
    if parties == 0:
        assert released == certified
        return
    # e^ε in float may sit an ulp or two from the code's; the code's 1e-12 margin covers it.
    assert Fraction(released) >= Fraction(certified) + cost * (1 - Fraction(1, 10**13))
    assert released <= certified + 1.001 * float(cost) + 2 * math.ulp(certified)
