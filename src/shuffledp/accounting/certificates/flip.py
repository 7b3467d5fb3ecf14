"""Exact privacy accounting for FLIP (Cheu & Zhilyaev, IEEE S&P 2022, Alg. 1–2).

Source: A. Cheu and M. Zhilyaev, "Differentially private histograms in the shuffle model
from fake users", IEEE S&P 2022, arXiv 2104.02739.

What the analyzer sees. Each of n users sends k + 1 reports (one of its value,
k of the all-zero vector), each report is bitwise randomized response with
flip probability q, and each set bit travels as its own message carrying only
the bin index. After a uniform shuffle the output is exactly the vector of
message counts per bin. With N = n(k + 1) reports, bin j's count is

    C_j = Bin(h_j, 1 − q) + Bin(N − h_j, q),   independently over j,

where h_j is the number of users whose value is j.

Neighbouring datasets (replace-one). A target user moves from bin a to bin b;
every other bin's count has the same law in both datasets and is independent
of bins a and b, so δ(ε) is the hockey-stick divergence between the laws of
(C_a, C_b) under the two datasets: an exact two-dimensional sum
(:func:`flip_delta_for_pair`).

Certificate for every dataset (:func:`flip_delta`). In dataset D let
h_a − 1 other users hold a and h_b hold b. Give the adversary the a-bits of
those h_a − 1 users and the b-bits of those h_b users; this can only help it,
and the revealed bits have the same law under D and D'. What remains in bin a
is Bin(N − h_a, q) and in bin b Bin(N − 1 − h_b, q), both at least
Bin(nk, q) because h_a ≤ n and h_b ≤ n − 1. Adding an independent
Bin(m, q) to a coordinate is post-processing, so for every dataset

    δ(ε) ≤ H_ε( (X + Z₁, Y + Z₀) ‖ (X + Z₀, Y + Z₁) ),  X, Y ~ Bin(nk, q) iid,

with Z₁ ~ Ber(1 − q), Z₀ ~ Ber(q); the two directions are equal by symmetry.
This is the sense of the paper's remark that its privacy analysis needs the
fake inputs to be 0_d: the nk fake reports alone carry the guarantee. The
bound is attained by no dataset but is close to the dataset whose other users
all hold a third value (:func:`flip_delta_lower_bound`), whose exact δ uses
Bin(N − 1, q) in both bins.

Monotonicity in q. Flip probability q' > q equals flipping with q and then
with r = (q' − q)/(1 − 2q); on counts, re-flipping is Bin(C_j, 1 − r) +
Bin(N − C_j, r), a post-processing of the counts. So δ(ε) is non-increasing in
q and bisection on q is sound (:func:`shuffledp.accounting.calibration.calibrate_flip_q`).

Numerics. Binomial pmfs are summed on windows whose left-out mass is bounded
(Bernstein) and added to δ, together with a floating-point allowance
proportional to P's mass on (and just around) the region P > e^ε Q
(:func:`shuffledp.accounting.numerics.hockey_stick.certified_hockey_stick_product`). The
certificate's floor is therefore the windows' left-out mass (about 4e-20 with
the default tail), not a rounding constant.

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_flip_probability,
    check_int,
    check_rounding,
)
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_window,
    convolve,
    plus_bernoulli,
    reflected,
)
from shuffledp.accounting.numerics.hockey_stick import certified_hockey_stick_product
from shuffledp.accounting.numerics.search import smallest_passing

__all__ = [
    "calibrate_flip_q",
    "flip_delta",
    "flip_delta_floor",
    "flip_delta_for_pair",
    "flip_delta_lower_bound",
    "flip_epsilon",
    "flip_local_epsilon",
]


def _check_common(
    epsilon: float, q: float, fake_users: int, n: int
) -> tuple[float, float, int, int]:
    return (
        check_epsilon(epsilon),
        check_flip_probability(q),
        check_int(fake_users, "fake_users", minimum=0),
        check_int(n, "n", minimum=1),
    )


Rounding = Literal["up", "down"]


def _pair_delta(
    epsilon: float,
    q: float,
    background_a: Window,
    background_b: Window,
    *,
    both: bool,
    rounding: Rounding = "up",
) -> float:
    """δ between (a gets Ber(1−q), b gets Ber(q)) and the swap, on given backgrounds.

    ``rounding="up"`` adds the mass outside the windows and the floating-point
    allowance (a certified upper bound on the pair's δ). ``rounding="down"``
    subtracts what truncation and rounding could have added (a certified lower
    bound): the window pmfs are at most the true ones, so the windowed sum is at
    least the true sum minus e^ε times the Q-mass left out. The allowance is
    proportional to P's mass near and inside the region P > e^ε Q
    (:func:`~shuffledp.accounting.numerics.hockey_stick.certified_hockey_stick_product`),
    so it shrinks with δ instead of flooring it.
    """
    keep = 1.0 - q  # exact enough: q < 1/2, so 1 − q > 1/2 is within one unit
    pa, qa = plus_bernoulli(background_a, keep, q), plus_bernoulli(background_a, q, keep)
    pb, qb = plus_bernoulli(background_b, q, keep), plus_bernoulli(background_b, keep, q)
    return certified_hockey_stick_product(
        pa.pmf,
        qa.pmf,
        pb.pmf,
        qb.pmf,
        epsilon,
        relative_error=max(pa.rel_error, pb.rel_error),
        dropped=background_a.dropped + background_b.dropped,
        rounding=rounding,
        both=both,
    )


def _symmetric_delta(epsilon: float, q: float, background: int, tail: float) -> float:
    window = binomial_window(background, q, tail)
    return _pair_delta(epsilon, q, window, window, both=False)


def flip_delta(
    epsilon: float, q: float, fake_users: int, n: int, *, tail: float = DEFAULT_TAIL
) -> float:
    """Return a δ such that FLIP is (ε, δ)-shuffle private for every dataset.

    The certificate of the module docstring: the nk fake reports alone, Bin(nk, q)
    in each of the two bins a moving user touches. Exact up to the truncated
    tail mass and a floating-point allowance, both added.

    Args:
        epsilon: ε > 0.
        q: Flip probability of bitwise randomized response (Alg. 2), in (0, 1/2).
        fake_users: k ≥ 0, fake reports per user (Alg. 1).
        n: Number of users, ≥ 1.
        tail: Target probability left out of each binomial window.

    Returns:
        An upper bound on δ(ε) over all pairs of neighbouring datasets; 0 at ε
        at or above the local ε of one report (:func:`flip_local_epsilon`, with
        a relative margin of 1e-12 for its rounding), which holds with δ = 0
        before the shuffle and so after it.
    """
    epsilon, q, fake_users, n = _check_common(epsilon, q, fake_users, n)
    return _flip_delta(epsilon, q, fake_users, n, tail)


def _flip_delta(
    epsilon: float, q: float, fake_users: int, n: int, tail: float = DEFAULT_TAIL
) -> float:
    """:func:`flip_delta` on checked inputs: what the searches evaluate, nothing checked again."""
    if epsilon >= _local_epsilon(q) * (1.0 + 1e-12):
        return 0.0
    return _symmetric_delta(epsilon, q, n * fake_users, tail)


def flip_delta_for_pair(
    epsilon: float,
    q: float,
    fake_users: int,
    n: int,
    count_from: int,
    count_to: int,
    *,
    tail: float = DEFAULT_TAIL,
    rounding: Rounding = "up",
) -> float:
    """Return the exact δ(ε) of FLIP for one pair of neighbouring datasets.

    In dataset D, ``count_from`` users (the moving user included) hold value a
    and ``count_to`` users hold value b; in D' the moving user holds b. The
    result is max(H_ε(P‖Q), H_ε(Q‖P)) for the laws P, Q of (C_a, C_b) under D
    and D' (other bins cancel), plus the truncated tail mass and rounding
    allowance.

    Args:
        epsilon: ε > 0.
        q: Flip probability, in (0, 1/2).
        fake_users: k ≥ 0.
        n: Number of users.
        count_from: h_a ≥ 1, users with value a in D (including the mover).
        count_to: h_b ≥ 0, users with value b in D; h_a + h_b ≤ n.
        tail: Target probability left out of each binomial window.
        rounding: ``"up"`` (default) to err above the exact value, by the mass
            outside the windows plus a floating-point allowance; ``"down"`` to
            err below it (for lower bounds).
    """
    rounding = check_rounding(rounding)
    epsilon, q, fake_users, n = _check_common(epsilon, q, fake_users, n)
    h_a = check_int(count_from, "count_from", minimum=1, maximum=n)
    h_b = check_int(count_to, "count_to", minimum=0, maximum=n - h_a)
    return _pair_for_counts(epsilon, q, fake_users, n, h_a, h_b, tail, rounding)


def _pair_for_counts(
    epsilon: float,
    q: float,
    fake_users: int,
    n: int,
    h_a: int,
    h_b: int,
    tail: float,
    rounding: Rounding,
) -> float:
    """:func:`flip_delta_for_pair` on checked inputs (a lower bound's splits)."""
    total = n * (fake_users + 1)

    def background(ones: int, zeros: int) -> Window:
        # `ones` reports hold a 1 in this bin (Ber(1 − q)), `zeros` hold a 0 (Ber(q)).
        return convolve(
            reflected(binomial_window(ones, q, tail), ones), binomial_window(zeros, q, tail)
        )

    bg_a = background(h_a - 1, total - h_a)
    bg_b = background(h_b, total - 1 - h_b)
    return _pair_delta(epsilon, q, bg_a, bg_b, both=True, rounding=rounding)


def flip_delta_lower_bound(
    epsilon: float,
    q: float,
    fake_users: int,
    n: int,
    domain_size: int,
    *,
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return the exact δ(ε) of a concrete neighbouring pair: a lower bound on FLIP's δ.

    With three or more bins the pair puts every other user on a third value, so
    both affected bins see Bin(N − 1, q) of background. With two bins the other
    users must hold a or b; the largest δ over a set of splits is returned.
    Any such value is attained by real datasets, so the mechanism's δ(ε) is at
    least this. Truncation and rounding are subtracted, so the figure errs
    downwards (by at most ~1e-11 in absolute terms).
    """
    epsilon, q, fake_users, n = _check_common(epsilon, q, fake_users, n)
    d = check_int(domain_size, "domain_size", minimum=2)
    if d >= 3 or n == 1:
        return _pair_for_counts(epsilon, q, fake_users, n, 1, 0, tail, "down")
    splits = np.unique(np.linspace(1, n, num=min(n, 33)).round().astype(int))
    return max(
        _pair_for_counts(epsilon, q, fake_users, n, int(h), n - int(h), tail, "down")
        for h in splits
    )


def flip_local_epsilon(q: float) -> float:
    """Return the pure ε of one user's report alone: 2·ln((1 − q)/q).

    Replacing a one-hot value changes two bits, each protected by randomized
    response with ε = ln((1 − q)/q). This is what an adversary who sees the
    unshuffled reports learns, and FLIP's δ is 0 for ε at or above it.
    """
    return _local_epsilon(check_flip_probability(q))


def _local_epsilon(q: float) -> float:
    """:func:`flip_local_epsilon` on a checked q."""
    return 2.0 * (math.log1p(-q) - math.log(q))


def flip_epsilon(delta: float, q: float, fake_users: int, n: int, *, rtol: float = 1e-6) -> float:
    """Return the smallest ε (to relative tolerance, rounded up) with flip_delta(ε) ≤ δ.

    Args:
        delta: Target δ in (0, 1).
        q: Flip probability in (0, 1/2).
        fake_users: k ≥ 0.
        n: Number of users.
        rtol: Relative width of the final bisection bracket; the upper end is returned.

    Returns:
        An ε certified by :func:`flip_delta` (the certificate holds at the returned ε).
    """
    delta = check_delta(delta)
    q = check_flip_probability(q)
    fake_users = check_int(fake_users, "fake_users", minimum=0)
    n = check_int(n, "n", minimum=1)
    hi = _local_epsilon(q)
    if _flip_delta(hi, q, fake_users, n) > delta:  # pragma: no cover - δ is ~0 here
        raise InvalidParameterError(
            f"no epsilon up to the local bound {hi:.4g} reaches delta={delta:g}"
        )
    lo = hi * 1e-9
    if _flip_delta(lo, q, fake_users, n) <= delta:
        return lo
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if _flip_delta(mid, q, fake_users, n) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


#: Flip probabilities stay below 1/2 by this factor (q = 1/2 is pure noise, not a valid q).
_Q_CAP = 0.5 * (1.0 - 1e-9)
_FLOOR_GRID = 48


def flip_delta_floor(epsilon: float, n: int, fake_users: int) -> tuple[float, float]:
    """Return (δ_min, q): the smallest δ(ε) the FLIP certificate reaches, and where.

    The exact δ decreases in q (module :mod:`shuffledp.accounting.certificates.flip`), but
    the certificate adds the binomial windows' left-out mass (about 2e-20 per
    side with the default tail, for every q) and a rounding allowance
    proportional to the mass of the region that matters, so it bottoms out
    near that left-out mass, except that it is exactly 0 once one report is
    ε-LDP (2·ln((1 − q)/q) ≤ ε, i.e. q ≥ 1/(1 + e^{ε/2})). A floor above 0
    therefore exists only for ε below the local ε of the largest admissible q
    (about 4e-9). The minimum over a geometric grid of q from one flipped bit
    per bin up to q → 1/2 is what can be certified.
    """
    epsilon = check_epsilon(epsilon)
    n = check_int(n, "n", minimum=1)
    k = check_int(fake_users, "fake_users", minimum=0)
    return _flip_delta_floor(epsilon, n, k)


def _flip_delta_floor(epsilon: float, n: int, k: int) -> tuple[float, float]:
    """:func:`flip_delta_floor` on checked inputs."""
    grid = np.geomspace(min(_Q_CAP, 1.0 / (n * (k + 1))), _Q_CAP, _FLOOR_GRID)
    values = [_flip_delta(epsilon, float(q), k, n) for q in grid]
    best = int(np.argmin(values))
    return values[best], float(grid[best])


def calibrate_flip_q(
    epsilon: float, delta: float, n: int, fake_users: int, *, rtol: float = 1e-6
) -> float:
    """Return the smallest flip probability q whose certified δ(ε) is at most ``delta``.

    Uses :func:`shuffledp.accounting.certificates.flip.flip_delta` (exact certificate for all
    datasets), which is non-increasing in q up to its rounding allowance, and
    0 from q = 1/(1 + e^{ε/2}) on (one report alone is then ε-LDP): below the
    certificate's truncation floor that q is the answer.

    Args:
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1).
        n: Number of users.
        fake_users: k ≥ 0 fake reports per user.
        rtol: Relative precision of q; the returned q is certified, and at most a
            factor (1 + rtol) above the smallest certified q.

    Raises:
        InvalidParameterError: If ``delta`` is below the smallest δ the
            certificate reaches at these (ε, n, k) (:func:`flip_delta_floor`);
            the message names that floor.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    n = check_int(n, "n", minimum=1)
    k = check_int(fake_users, "fake_users", minimum=0)

    def passes(q: float) -> bool:
        # Every q the search asks lies in (0, 1/2): the certificate's kernel, unchecked.
        return _flip_delta(epsilon, q, k, n) <= delta

    # Walk up from about one flipped bit per bin (never private) in doublings to
    # the first certified q, so the search stays near the threshold.
    lo, hi = 0.0, min(_Q_CAP, 1.0 / (n * (k + 1)))
    while not passes(hi):
        if hi >= _Q_CAP:
            floor, q_floor = _flip_delta_floor(epsilon, n, k)
            if floor > delta:
                raise InvalidParameterError(
                    f"delta={delta:g} is below what the FLIP accountant can certify at "
                    f"epsilon={epsilon:g} for n={n}, k={k}: the smallest certified delta is "
                    f"{floor:.3g} (at q={q_floor:.3g}; the binomial windows' left-out mass is "
                    "added to every bound)"
                )
            hi = q_floor  # a dip of the certificate below its value at q → 1/2
            break
        lo, hi = hi, min(_Q_CAP, 2.0 * hi)
    if lo == 0.0 or lo >= hi:
        lo = hi * 1e-12
    return smallest_passing(passes, lo, hi, rtol=rtol)
