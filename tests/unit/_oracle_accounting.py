"""An independent oracle for the Poisson randomizer's certificate.

``poisson_delta_before`` sums the reduced view of the segmented paper's Lemma 2
over two dimensions (the counts of x₀ and x₁, and the count of the other
items) with :func:`shuffledp.accounting.numerics.iid_blanket.iid_blanket_delta`: a
different decomposition from the accountant's mixture over the number of
messages received (:func:`shuffledp.accounting.certificates.poisson.poisson_delta`), so the
two check each other. (k-RR's certificate is checked against the unblocked
mixture written from its definition, in ``test_blocked_sums.py``: an oracle
that copied the accountant's code would check nothing.)
"""

from __future__ import annotations

from shuffledp.accounting.numerics.iid_blanket import IidBlanket, iid_blanket_delta
from shuffledp.accounting.numerics.two_counts import Rounding


def poisson_delta_before(
    epsilon: float,
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
    rounding: Rounding = "up",
) -> float:
    """The exact two-dimensional sum over (count of x0 and x1, count of other items)."""
    lam, d, n_msg, gamma = report_probability, domain_size, blanket_messages, blanket_probability
    setting = IidBlanket(
        others=n_msg,
        o_sym=gamma / d,
        o_z=gamma * (d - 2) / d,
        victim=(lam, 0.0, 0.0, 1.0 - lam),
        o_r=1.0 - gamma,
    )
    return iid_blanket_delta(setting, epsilon, rounding=rounding)
