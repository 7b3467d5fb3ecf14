"""How many messages an honest party sends, but for a negligible probability.

The services bound every count a party controls: the shuffler refuses a
submission with more ciphertexts than a task's ``max_messages_per_submission``,
and the analyzer refuses a batch with more messages than its users (and, for
the augmented protocol, the shuffler's dummies) can hold. Each bound is a far
tail of the honest law, exceeded with probability at most
:data:`MESSAGE_TAIL_PROBABILITY`:

* **correlated** (:func:`correlated_max_messages`): a user sends its value
  message and, summed over the d bins, X ~ NB(2d/m, α) one-sided messages
  (the A and A′ shares: a sum of independent NB(1/m, α) is NB(2d/m, α)) and
  2·Y flooding messages, Y ~ NB(d·r/m, q) (each flooding unit is a (j, +1)
  and a (j, −1)). The law of 1 + X + 2Y does not depend on the value. The
  bound is the smallest c with Chernoff's bound on P[X + 2Y ≥ c] at most
  half the tail: an upper bound on the tail, whatever the minimizer found.
* **augmented** (:func:`max_dummies_per_batch`): the shuffler adds z_j dummies
  to every bin j of a batch; the bound is d times the smallest c with
  P[z > c] ≤ tail/d (a union bound over bins): SAGeo's right tail is a
  geometric series in closed form, SBin's count is at most M.

**What a bound costs the guarantee** (:func:`honest_cap_delta`). A party that
draws more than its bound does not send (a client drops out; a batch waits in
the shuffler's outbox and is never published), so the messages that are
published were drawn from the honest law conditioned on staying within the
bound, not from the law the certificate is for. Let M be the certified
mechanism and R the one run, on the same inputs; couple them to coincide
unless one of the N parties whose law the certificate counts on exceeds its
bound, so their total variation is at most N·p, p the tail. For every set S
of views, R(D)(S) ≤ M(D)(S) + N·p ≤ e^ε·M(D′)(S) + δ + N·p ≤ e^ε·R(D′)(S) +
δ + (1 + e^ε)·N·p: R is (ε, δ + (1 + e^ε)·N·p)-DP. Parties outside the N
(users beyond the batch's certified ``min_batch_users``) only add independent
messages, which is post-processing.

Group: certificates (the δ a task's message bounds add to its certificate).
"""

from __future__ import annotations

import math

import numpy as np

from shuffledp._validation import InvalidParameterError, check_epsilon, check_int
from shuffledp.accounting.certificates.augmented import DummyLaw, SAGeoLaw, SBinLaw
from shuffledp.accounting.certificates.correlated import CorrelatedNoise
from shuffledp.accounting.numerics.search import smallest_passing_integer

__all__ = [
    "MESSAGE_TAIL_PROBABILITY",
    "calibration_target",
    "correlated_log_tail_bound",
    "correlated_max_messages",
    "honest_cap_delta",
    "max_dummies_per_batch",
    "max_dummies_per_bin",
    "with_cap_delta",
]

#: An honest client exceeds ``max_messages_per_submission`` (and an honest shuffler
#: a batch's dummy bound) with at most this probability.
MESSAGE_TAIL_PROBABILITY = 1e-30


def honest_cap_delta(epsilon: float, parties: int, tail: float = MESSAGE_TAIL_PROBABILITY) -> float:
    """The δ the honest parties' message bounds add to a certificate at ε.

    (1 + e^ε)·N·2p (module docstring, "What a bound costs the guarantee"), N =
    ``parties``, p = ``tail``. Each bound is exceeded with probability at most
    p as computed; the factor 2 covers the rounding of that computation
    (scipy's binomial tail, the logarithms of Chernoff's and SAGeo's bounds),
    whose relative error is far below 1. The result is rounded up.

    Args:
        epsilon: The certificate's ε > 0.
        parties: N ≥ 0, the parties whose honest law the certificate counts on
            and that could exceed a bound (0: nobody can, e.g. one message each).
        tail: p, the probability with which each exceeds its bound.
    """
    epsilon = check_epsilon(epsilon)
    parties = check_int(parties, "parties", minimum=0)
    if not 0.0 < tail < 1.0:
        raise InvalidParameterError(f"tail must be in (0, 1), got {tail!r}")
    if parties == 0:
        return 0.0
    cost = (1.0 + math.exp(min(epsilon, 700.0))) * parties * 2.0 * tail
    return min(1.0, math.nextafter(cost * (1.0 + 1e-12), math.inf))


def with_cap_delta(delta: float, cost: float) -> float:
    """δ + ``cost`` rounded up (``delta`` itself when the cost is 0): what a release states.

    Non-decreasing in ``delta``, so a calibration target t with
    ``with_cap_delta(t, cost) ≤ δ`` keeps every certificate below t within δ.
    """
    return delta if cost == 0.0 else math.nextafter(delta + cost, math.inf)


def calibration_target(delta: float, cost: float) -> float:
    """The largest float t with :func:`with_cap_delta` (t, ``cost``) ≤ ``delta`` (> 0).

    Raises:
        InvalidParameterError: If no t > 0 is left (``cost`` ≥ ``delta``).
    """
    if cost == 0.0:
        return delta
    if not (0.0 < cost < delta):
        raise InvalidParameterError(
            f"delta={delta:g} is not above what the message bounds alone cost ({cost:.3g})"
        )
    # δ − cost is within an ulp or two of the answer: step to it.
    target = delta - cost
    while target > 0.0 and with_cap_delta(target, cost) > delta:
        target = math.nextafter(target, 0.0)
    while with_cap_delta(math.nextafter(target, math.inf), cost) <= delta:
        target = math.nextafter(target, math.inf)
    if not target > 0.0:
        raise InvalidParameterError(
            f"delta={delta:g} is not above what the message bounds alone cost ({cost:.3g})"
        )
    return target


def _log_mgf_terms(t: float, shape_x: float, alpha: float, shape_y: float, q: float) -> float:
    """The log-MGF ln E[e^{t(X + 2Y)}], X ~ NB(shape_x, α), Y ~ NB(shape_y, q), t below the pole."""
    total = 0.0
    if shape_x > 0.0:  # ((1 − α)/(1 − α e^t))^s, 1 − α e^t = −expm1(t + ln α) without cancellation
        total += shape_x * (math.log1p(-alpha) - math.log(-math.expm1(t + math.log(alpha))))
    if shape_y > 0.0 and q > 0.0:
        total += shape_y * (math.log1p(-q) - math.log(-math.expm1(2.0 * t + math.log(q))))
    return total


def correlated_log_tail_bound(
    count: float, domain_size: int, noise: CorrelatedNoise, min_honest: int
) -> float:
    """Chernoff's bound on ln P[X + 2Y ≥ ``count``], the noise messages of one correlated user.

    X ~ NB(2d/m, α) and Y ~ NB(d·r/m, q) (module docstring). For every t in
    (0, t_max), t_max = min(−ln α, −ln(q)/2), P[S ≥ c] ≤ E[e^{tS}]·e^{−tc}; the
    bound is minimized over t by Brent's method, and every t it tries gives a
    valid bound, so an imprecise minimum only loosens it.

    Args:
        count: c > 0.
        domain_size: d.
        noise: α and the flooding NB(r, q) at ``min_honest`` users.
        min_honest: m.
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    m = check_int(min_honest, "min_honest", minimum=1)
    shape_x = 2.0 * d / m
    shape_y = d * noise.flood_r / m if noise.flood_q > 0.0 else 0.0
    pole = -math.log(noise.alpha)
    if shape_y > 0.0:
        pole = min(pole, -math.log(noise.flood_q) / 2.0)
    top = pole * (1.0 - 1e-9)

    def exponent(t: float) -> float:
        return _log_mgf_terms(t, shape_x, noise.alpha, shape_y, noise.flood_q) - t * count

    from scipy.optimize import minimize_scalar  # here: a service starts without scipy

    found = minimize_scalar(exponent, bounds=(0.0, top), method="bounded", options={"xatol": 1e-12})
    grid = top * (1.0 - np.logspace(-9, 0, 64, endpoint=False))
    return float(min(float(found.fun), *(exponent(float(t)) for t in grid), 0.0))


def correlated_max_messages(
    domain_size: int,
    noise: CorrelatedNoise,
    min_honest: int,
    tail: float = MESSAGE_TAIL_PROBABILITY,
) -> int:
    """The most messages an honest correlated client sends but with probability ≤ ``tail``.

    Returns 1 + c, c the smallest integer with :func:`correlated_log_tail_bound`
    at c + 1 at most ln(tail/2) (half the tail: a margin for the rounding of
    the bound's logarithms). A client that draws more does not submit (it is a
    dropout, an event whose probability does not depend on its value).

    Args:
        domain_size: d.
        noise: α and the flooding NB(r, q) at ``min_honest`` users.
        min_honest: m (each user's shares are NB(1/m, α) and NB(r/m, q) per bin).
        tail: The probability allowed above the bound.
    """
    if not 0.0 < tail < 1.0:
        raise InvalidParameterError(f"tail must be in (0, 1), got {tail!r}")
    target = math.log(tail / 2.0)

    def too_likely(c: int) -> bool:  # P[S > c] = P[S ≥ c + 1] not yet below the tail
        return correlated_log_tail_bound(c + 1, domain_size, noise, min_honest) > target

    return 1 + smallest_passing_integer(lambda c: not too_likely(c))


def max_dummies_per_bin(law: DummyLaw, tail: float) -> int:
    """The smallest c with P[z > c] ≤ ``tail`` for the dummy law (SBin: M, every count's bound).

    SAGeo(ν, q_l, q_r): for c ≥ ν, P[z > c] = q_r^{c + 1 − ν}/((1 − q_r)·Z).
    """
    if not 0.0 < tail < 1.0:
        raise InvalidParameterError(f"tail must be in (0, 1), got {tail!r}")
    if isinstance(law, SBinLaw):
        return law.trials
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
    scale = (1.0 - law.q_right) * law.normalizer
    log_q = math.log(law.q_right)

    def log_above(c: int) -> float:
        return (c + 1 - law.nu) * log_q - math.log(scale)

    steps = max(0, math.ceil((math.log(tail) + math.log(scale)) / log_q) - 1)
    c = law.nu + steps
    while c > law.nu and log_above(c - 1) <= math.log(tail):
        c -= 1
    while log_above(c) > math.log(tail):
        c += 1
    return c


def max_dummies_per_batch(
    domain_size: int, law: DummyLaw, tail: float = MESSAGE_TAIL_PROBABILITY
) -> int:
    """Return d times :func:`max_dummies_per_bin` at ``tail``/d (exceeded w.p. ≤ ``tail``)."""
    d = check_int(domain_size, "domain_size", minimum=1)
    return d * max_dummies_per_bin(law, tail / d)
