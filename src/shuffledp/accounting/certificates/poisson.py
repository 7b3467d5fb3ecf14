"""Accounting for the Poisson randomizer with uniform blanket messages (segmented paper, Alg. 2).

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

A user holding item x sends it with probability λ and nothing otherwise; users
also send blanket messages, each uniform over the d items. Lemma 2 of the
segmented paper reduces a victim's privacy to its own Poisson randomizer and
the other users' blanket messages (their input-dependent messages are handed
to the adversary, which can only help it). With N potential blanket messages,
each sent with probability γ (Thm 2's binomial number), the adversary sees the
counts of x₀, x₁, the other items, and (through the total) how many messages
are absent. :func:`poisson_delta` computes that view's δ exactly, as a mixture:

Given the number T of messages received, the victim's message is present with
probability λ_T = λ·P[M = T − 1]/P[T] (M ~ Bin(N, γ) the blanket messages
sent, P[T] the same under both datasets), and an absent victim message leaves
one more blanket message in its place (Bin(T, 2/d) = Bin(T − 1, 2/d) + one
more trial). So given T the counts of x₀ and x₁ are a two-count pair with
T − 1 blanket messages at rate 2/d and victim weights w₁ = λ_T + (1 − λ_T)/d,
w₂ = (1 − λ_T)/d, w₀ = (1 − λ_T)(1 − 2/d); the other items' counts are
uniform given their total, under both laws. Hence δ = Σ_T P[T]·H_ε(pair_T)
(:func:`shuffledp.accounting.numerics.mixture.mixture_delta`; λ_T grows with T, and
the blocks of T are bounded by virtual pairs). H_ε(pair_T) is convex in λ_T
(a sum of positive parts of functions affine in λ_T) and 0 at λ_T = 0, so
δ/λ_T is monotone too and a block is weighted by Σ P[T]λ_T = λ·P[M in range]
rather than by its probability: the bracket then only spans the blanket count. This replaced a
two-dimensional sum over (count of x₀ and x₁, count of other items) that could
not reach 1e8 messages; the tests compare the two.

:func:`shuffledp.accounting.reproductions.poisson_lemma3.poisson_delta_lemma3` is
the variation-ratio pair of Lemma 3 (p = ∞,
β = λ, q = dλ, with Thm 2's rate), which ignores the count of absent and other
messages. It is kept under its own name for reproduction; it can fall below
the exact value of the same reduced view (see the tests), so it never
certifies anything here.

Users holding s items are s virtual users
(:func:`shuffledp.accounting.published.variation_ratio.group_composition`).

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from shuffledp._validation import check_epsilon, check_int, check_probability, check_rounding
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_window,
    plus_bernoulli,
)
from shuffledp.accounting.numerics.mixture import PairAt, mixture_curve, mixture_delta
from shuffledp.accounting.numerics.two_counts import Rounding, TwoCountPair

__all__ = ["poisson_delta", "poisson_delta_curve"]


def check_poisson_parameters(
    report_probability: float, domain_size: int, blanket_messages: int, blanket_probability: float
) -> tuple[float, int, int, float]:
    """Check (λ, d, N, γ) of the Poisson randomizer with blanket messages."""
    # Probabilities a rounding above 1 are taken as 1 (the checks allow 1 + 1e-12).
    return (
        min(1.0, check_probability(report_probability, "report_probability", high=1.0 + 1e-12)),
        check_int(domain_size, "domain_size", minimum=2),
        check_int(blanket_messages, "blanket_messages", minimum=0),
        min(1.0, check_probability(blanket_probability, "blanket_probability", high=1.0 + 1e-12)),
    )


def poisson_delta(
    epsilon: float,
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
    rounding: Rounding = "up",
    target: float | None = None,
) -> float:
    """Return δ(ε) for one item of the Poisson randomizer among blanket messages (certified).

    Args:
        epsilon: ε > 0.
        report_probability: λ in (0, 1].
        domain_size: d ≥ 2 items.
        blanket_messages: N potential blanket messages from the other users.
        blanket_probability: γ, the probability each is sent (Thm 2).
        rounding: ``"up"`` for the certified upper bound, ``"down"`` for a lower one.
        target: The δ the caller will compare the answer with (see
            :func:`shuffledp.accounting.numerics.mixture.mixture_delta`).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    lam, d, n_msg, gamma = check_poisson_parameters(
        report_probability, domain_size, blanket_messages, blanket_probability
    )
    return _poisson_delta(epsilon, lam, d, n_msg, gamma, rounding=rounding, target=target)


def _poisson_delta(
    epsilon: float,
    lam: float,
    d: int,
    n_msg: int,
    gamma: float,
    *,
    rounding: Rounding = "up",
    target: float | None = None,
) -> float:
    """:func:`poisson_delta` on checked inputs (λ and γ at most 1): what searches evaluate."""
    window, pair_at, weight_error = _received_mixture(lam, d, n_msg, gamma)
    return mixture_delta(
        window, pair_at, epsilon, rounding=rounding, weight_error=weight_error, target=target
    )


def poisson_delta_curve(
    epsilon: float,
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
) -> Callable[[float], float]:
    """Return :func:`poisson_delta`'s blocks refined at ``epsilon`` as a certified δ(·) curve.

    Valid at every ε, tight near ``epsilon`` (for searches of ε(δ)).
    """
    epsilon = check_epsilon(epsilon)
    lam, d, n_msg, gamma = check_poisson_parameters(
        report_probability, domain_size, blanket_messages, blanket_probability
    )
    window, pair_at, weight_error = _received_mixture(lam, d, n_msg, gamma)
    return mixture_curve(window, pair_at, epsilon, weight_error=weight_error)


def _received_mixture(lam: float, d: int, n_msg: int, gamma: float) -> tuple[Window, PairAt, float]:
    """T's window, the virtual pairs of a block of T, and the weights' error (module docstring)."""
    # T = M + [victim sent], M ~ Bin(N, γ); 1 − γ is exact for γ ≥ 1/2 (Sterbenz).
    sent = binomial_window(n_msg, min(gamma, 1.0), DEFAULT_TAIL, max(0.0, 1.0 - gamma))
    window = plus_bernoulli(sent, min(lam, 1.0))
    rate, rate_complement = 2.0 / d, (d - 2) / d

    def odds(t: int) -> float:
        """μ_t = λ_T/(1 − λ_T) = λ/(1 − λ)·P[M = t − 1]/P[M = t] (∞ when M = t is impossible)."""
        if t <= 0 or gamma <= 0.0:
            return 0.0
        if lam >= 1.0 or t > n_msg:
            return math.inf
        return (lam / (1.0 - lam)) * (t / (n_msg - t + 1)) * ((1.0 - gamma) / gamma)

    def sent_between(first: int, last: int) -> float:
        """P[first ≤ M ≤ last] as a direct sum over M's window."""
        i, j = max(first - sent.lo, 0), min(last - sent.lo + 1, len(sent.pmf))
        return float(np.sum(sent.pmf[i:j])) if j > i else 0.0

    def pair_at(
        first: int, last: int, side: str, probability: float
    ) -> tuple[TwoCountPair, float] | None:
        # pair_T's δ falls with its blanket messages and grows with the victim's
        # presence λ_T. It is also convex in λ_T and 0 at λ_T = 0, so δ/λ_T grows
        # with λ_T: Σ_T P[T]·δ_T ≤ (Σ_T P[T]·λ_T)·δ(virtual)/λ_virtual, and
        # Σ_T P[T]·λ_T = λ·P[M in the block shifted by one].
        if side == "upper":
            blanket, mu = max(0, first - 1), odds(last)
        else:
            blanket, mu = max(0, last - 1), odds(first)
        if mu == 0.0:
            return None  # the victim sent nothing (upper) or no lower bound is needed
        absent = 0.0 if math.isinf(mu) else 1.0 / (1.0 + mu)
        present = 1.0 if math.isinf(mu) else mu / (1.0 + mu)
        w2 = absent * rate / 2.0
        pair = TwoCountPair(
            blanket=blanket,
            rate=rate,
            w1=present + w2,
            w2=w2,
            w0=absent * rate_complement,
            rate_complement=rate_complement,
            weight_units=16.0,
        )
        return pair, lam * sent_between(first - 1, last - 1) / present

    weight_error = sent.rel_error + (len(sent.pmf) + 40) * 2.0**-53
    return window, pair_at, weight_error
