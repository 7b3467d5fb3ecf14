"""Lemma 3 of the segmented paper: the Poisson randomizer's variation-ratio pair, as printed.

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in
the multi-message shuffle model", arXiv 2407.19639, Lemma 3 with Thm 2's
blanket rate. The pair (p = ∞, β = λ, q = dλ) ignores the count of absent and
other messages; its δ can fall below the exact value of the same reduced view
(:func:`shuffledp.accounting.certificates.poisson.poisson_delta`, see the
tests), so it certifies nothing.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate (registered, if at all, as
``BoundKind.REPRODUCTION``). May import the numerical core, published bounds
and certificates (to compare against them); nothing imports it but the
questions layer, protocols, experiments and the command line.
"""

from __future__ import annotations

from shuffledp._validation import check_epsilon
from shuffledp.accounting.certificates.poisson import check_poisson_parameters
from shuffledp.accounting.numerics.two_counts import two_count_delta
from shuffledp.accounting.published.variation_ratio import poisson_pair

__all__ = ["poisson_delta_lemma3"]


def poisson_delta_lemma3(
    epsilon: float,
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
) -> float:
    """Return Lemma 3's variation-ratio value (published formula; not a certificate)."""
    epsilon = check_epsilon(epsilon)
    lam, d, n_msg, gamma = check_poisson_parameters(
        report_probability, domain_size, blanket_messages, blanket_probability
    )
    pair = poisson_pair(lam, d, n_msg, blanket_probability=gamma)
    return two_count_delta(pair, epsilon)
