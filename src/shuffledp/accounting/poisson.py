"""Accounting for the Poisson randomizer with uniform blanket messages (segmented paper, Alg. 2).

A user holding item x sends it with probability λ and nothing otherwise; users
also send blanket messages, each uniform over the d items. Lemma 2 of the
segmented paper reduces a victim's privacy to its own Poisson randomizer and
the other users' blanket messages (their input-dependent messages are handed
to the adversary, which can only help it). With N potential blanket messages,
each sent with probability γ (Thm 2's binomial number), the adversary sees the
counts of x₀, x₁, the other items, and (through the total) how many messages
are absent. :func:`poisson_delta` sums that view's likelihood ratio exactly
(:mod:`shuffledp.accounting.iid_blanket`): an upper bound for the protocol.

:func:`poisson_delta_lemma3` is the variation-ratio pair of Lemma 3 (p = ∞,
β = λ, q = dλ, with Thm 2's rate), which ignores the count of absent and other
messages. It is kept under its own name for reproduction; it can fall below
the exact value of the same reduced view (see the tests), so it never
certifies anything here.

Users holding s items are s virtual users
(:func:`shuffledp.accounting.variation_ratio.group_composition`).
"""

from __future__ import annotations

from shuffledp._validation import check_epsilon, check_int, check_probability
from shuffledp.accounting.iid_blanket import IidBlanket, iid_blanket_delta
from shuffledp.accounting.two_counts import Rounding, two_count_delta
from shuffledp.accounting.variation_ratio import poisson_pair

__all__ = ["poisson_delta", "poisson_delta_lemma3"]


def _check(
    report_probability: float, domain_size: int, blanket_messages: int, blanket_probability: float
) -> tuple[float, int, int, float]:
    return (
        check_probability(report_probability, "report_probability", low=0.0, high=1.0 + 1e-12),
        check_int(domain_size, "domain_size", minimum=2),
        check_int(blanket_messages, "blanket_messages", minimum=0),
        check_probability(blanket_probability, "blanket_probability", low=0.0, high=1.0 + 1e-12),
    )


def poisson_delta(
    epsilon: float,
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
    rounding: Rounding = "up",
) -> float:
    """Return δ(ε) for one item of the Poisson randomizer among blanket messages (certified).

    Args:
        epsilon: ε > 0.
        report_probability: λ in (0, 1].
        domain_size: d ≥ 2 items.
        blanket_messages: N potential blanket messages from the other users.
        blanket_probability: γ, the probability each is sent (Thm 2).
        rounding: ``"up"`` for the certified upper bound, ``"down"`` for a lower one.
    """
    epsilon = check_epsilon(epsilon)
    lam, d, n_msg, gamma = _check(
        report_probability, domain_size, blanket_messages, blanket_probability
    )
    setting = IidBlanket(
        others=n_msg,
        o_sym=gamma / d,
        o_z=gamma * (d - 2) / d,
        victim=(lam, 0.0, 0.0, 1.0 - lam),
        o_r=1.0 - gamma,
    )
    return iid_blanket_delta(setting, epsilon, rounding=rounding)


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
    lam, d, n_msg, gamma = _check(
        report_probability, domain_size, blanket_messages, blanket_probability
    )
    pair = poisson_pair(lam, d, n_msg, blanket_probability=gamma)
    return two_count_delta(pair, epsilon)
