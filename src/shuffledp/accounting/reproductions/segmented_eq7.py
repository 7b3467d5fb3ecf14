"""Eq. 7 of the segmented paper: the report probability its Lemma 3 and Thm 3 choose.

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in
the multi-message shuffle model", arXiv 2407.19639, Eq. 7 (λ per level from
Lemma 3's pair at ε/s and Thm 3's group bound s·e^{sε′}·δ′). Lemma 3's pair
leaves out the count of absent and other messages, so the λ it chooses can
exceed what the exact view certifies (docs/protocols/segmented.md lists where);
the package's calibration is
:func:`shuffledp.accounting.certificates.segmented.calibrate_level`.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate. May import the numerical
core, published bounds and certificates (to compare against them); nothing
imports it but the questions layer, protocols, experiments and the command line.
"""

from __future__ import annotations

import math

from shuffledp._validation import check_delta, check_epsilon, check_int
from shuffledp.accounting.certificates.segmented import blanket_tries, lemma3_pair_delta
from shuffledp.accounting.numerics.search import largest_passing_below

__all__ = ["paper_report_probability", "thm3_group_delta"]


def thm3_group_delta(item: float, item_epsilon: float, items: int) -> float:
    """Thm 3 as printed: s·e^{sε′}·δ′ (valid, looser than :func:`group_delta`)."""
    s = check_int(items, "items", minimum=1)
    return min(1.0, s * math.exp(s * item_epsilon) * item)


def paper_report_probability(
    epsilon: float,
    delta: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    rtol: float = 1e-3,
) -> float:
    """λ that Eq. 7 (Lemma 3's pair, Thm 3's group bound) chooses: a reproduction, not a guarantee.

    Eq. 7 as printed: D_{e^{E/s}}(P‖Q) ≤ δ/(s·e^{E}) for the pair with n⌈m⌉ − 1
    blanket tries (Thm 3's n′ = n⌈m⌉ in Thm 1's convention), rate 2γ/d,
    victim x₀ with probability λ and nothing otherwise.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    s = check_int(items, "items", minimum=1)
    potential, gamma = blanket_tries(n, blanket_rate)
    target = delta / (s * math.exp(epsilon))

    def passes(lam: float) -> bool:
        return (
            lemma3_pair_delta(epsilon / s, lam, message_domain, max(0, potential - 1), gamma, "up")
            <= target
        )

    if passes(1.0):
        return 1.0
    return largest_passing_below(passes, 1.0, rtol=rtol)
