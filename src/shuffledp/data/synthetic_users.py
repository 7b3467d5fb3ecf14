"""Synthetic clustered users for per-user histograms (per-user histograms paper, Thm 3–4's setting).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

Thm 4 assumes clusters of small diameter r that are separated by R. The
generator :func:`clustered_users` draws such data as a Dirichlet mixture:

1. Centres: K points μ_1, …, μ_K of the simplex with pairwise L1 distance
   ≥ ``separation`` (R), by rejection: candidates are drawn from
   Dirichlet(α_c·1) (α_c = ``centre_concentration``; small α_c gives sparse,
   far-apart centres) and kept when at least R away from every centre kept so
   far. An impossible or too-hard R stops with an error after ``max_tries``.
2. Users: a user of cluster k has the distribution h_u ~ Dirichlet(κ_k·μ_k),
   with κ_k chosen so that the expected L1 distance E‖h_u − μ_k‖₁ equals
   ``radius`` (r). Each coordinate of h_u is Beta(κμ_j, κ(1 − μ_j)), whose
   mean absolute deviation is 2a^a b^b / (B(a, b)(a + b)^{a+b+1}), so
   E‖h_u − μ‖₁ = Σ_j MAD_j(κ) exactly; it decreases in κ from 2(1 − ‖μ‖²)
   (κ → 0) to 0, and κ_k is found by bisection. A radius above
   2(1 − ‖μ_k‖²) is an error.
3. Counts: a total s_u (``total``, fixed, or 1 + Poisson(total − 1) with
   ``totals="poisson"``), then H_u ~ Multinomial(s_u, h_u). The normalized
   H_u/s_u adds multinomial sampling noise (of order √(d/s)) to h_u: ``radius``
   is the spread of the distributions, not of the sampled histograms.

Cluster sizes follow ``weights`` (uniform by default) through an independent
categorical draw per user.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import betaln

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.data.per_user import CountMatrix

__all__ = [
    "ClusteredUsers",
    "clustered_users",
    "concentration_for_radius",
    "expected_l1_radius",
    "separated_centres",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Smallest centre coordinate (Dirichlet parameters must be positive).
_FLOOR = 1e-12


@dataclass(frozen=True, repr=False)
class ClusteredUsers(CountMatrix):
    """Users drawn from a separated Dirichlet mixture.

    Attributes:
        counts: n × d counts H_u (every total ≥ 1).
        labels: The cluster of every user (0 … K − 1).
        centres: K × d cluster centres μ_k on the simplex.
        distributions: n × d the users' distributions h_u (before sampling counts).
        concentrations: κ_k of every cluster.
        separation: The R the centres were drawn for.
        radius: The r the concentrations were chosen for.
    """

    counts: IntArray
    labels: IntArray
    centres: FloatArray
    distributions: FloatArray
    concentrations: FloatArray
    separation: float
    radius: float

    @property
    def normalized(self) -> FloatArray:
        """H_u / s_u of every user."""
        out: FloatArray = self.counts / self.counts.sum(axis=1, keepdims=True)
        return out

    def min_separation(self) -> float:
        """The smallest pairwise L1 distance between centres (∞ with one cluster)."""
        k = self.centres.shape[0]
        if k < 2:
            return math.inf
        diff = np.abs(self.centres[:, None, :] - self.centres[None, :, :]).sum(axis=2)
        return float(diff[np.triu_indices(k, 1)].min())

    def __repr__(self) -> str:
        return (
            f"ClusteredUsers(n={self.n}, d={self.d}, K={self.centres.shape[0]}, "
            f"separation={self.separation:g}, radius={self.radius:g})"
        )


def _check_positive(value: object, name: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.integer | np.floating)
        or not math.isfinite(float(value))
        or float(value) <= 0
    ):
        raise InvalidParameterError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def expected_l1_radius(centre: NDArray[np.floating], concentration: float) -> float:
    """Return E‖h − μ‖₁ for h ~ Dirichlet(κ·μ) (exact: a sum of Beta mean absolute deviations).

    Args:
        centre: μ, a point of the simplex with positive coordinates.
        concentration: κ > 0.
    """
    mu = np.asarray(centre, dtype=np.float64)
    a = concentration * mu
    b = concentration * (1.0 - mu)
    s = a + b
    log_mad = math.log(2.0) + a * np.log(a) + b * np.log(b) - betaln(a, b) - (s + 1) * np.log(s)
    return float(np.exp(log_mad).sum())


def concentration_for_radius(centre: NDArray[np.floating], radius: float) -> float:
    """Return κ with E‖h − μ‖₁ = ``radius`` for h ~ Dirichlet(κ·μ) (bisection in log κ).

    Raises:
        InvalidParameterError: If ``radius`` is not below the κ → 0 limit 2(1 − ‖μ‖²).
    """
    mu = np.asarray(centre, dtype=np.float64)
    r = _check_positive(radius, "radius")
    limit = 2.0 * (1.0 - float(mu @ mu))
    if r >= limit * (1 - 1e-9):
        raise InvalidParameterError(
            f"radius {r:g} is not reachable around this centre: the expected L1 distance of a "
            f"Dirichlet around it is below 2(1 - ||mu||^2) = {limit:.4g}"
        )
    lo, hi = -20.0, 40.0  # log κ
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if expected_l1_radius(mu, math.exp(mid)) > r:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return math.exp(0.5 * (lo + hi))


def separated_centres(
    clusters: int,
    d: int,
    separation: float,
    *,
    centre_concentration: float = 0.3,
    max_tries: int = 100_000,
    seed: SeedLike = None,
) -> FloatArray:
    """Draw K centres on the simplex with pairwise L1 distance ≥ R (rejection).

    Candidates come in batches from Dirichlet(α_c·1); a candidate is kept when
    it is at least R from every centre kept before it.

    Args:
        clusters: K ≥ 1.
        d: Classes, ≥ 2.
        separation: R, in (0, 2) (L1 distances on the simplex are at most 2).
        centre_concentration: α_c > 0.
        max_tries: Candidates drawn before giving up.
        seed: Randomness.

    Raises:
        InvalidParameterError: On bad parameters or when ``max_tries``
            candidates gave fewer than K centres.
    """
    k = check_int(clusters, "clusters", minimum=1)
    dim = check_int(d, "d", minimum=2)
    sep = _check_positive(separation, "separation")
    if sep >= 2.0:
        raise InvalidParameterError(
            f"separation must be < 2 (the largest L1 distance on the simplex), got {sep:g}"
        )
    alpha = _check_positive(centre_concentration, "centre_concentration")
    tries = check_int(max_tries, "max_tries", minimum=1)
    rng = make_rng(seed)
    kept = np.empty((k, dim), dtype=np.float64)
    count = 0
    drawn = 0
    while count < k and drawn < tries:
        batch = rng.dirichlet(np.full(dim, alpha), size=min(4096, tries - drawn))
        batch = np.maximum(batch, _FLOOR)
        batch /= batch.sum(axis=1, keepdims=True)
        drawn += batch.shape[0]
        # Candidates far from the centres kept so far (vectorized), then greedily among themselves.
        if count:
            far = (np.abs(batch[:, None, :] - kept[None, :count, :]).sum(axis=2) >= sep).all(1)
            batch = batch[far]
        for candidate in batch:
            if count and np.abs(kept[:count] - candidate).sum(axis=1).min() < sep:
                continue
            kept[count] = candidate
            count += 1
            if count == k:
                break
    if count < k:
        raise InvalidParameterError(
            f"found only {count} of {k} centres with pairwise L1 distance >= {sep:g} in "
            f"{tries:,} candidates (d = {dim}); lower the separation or "
            "centre_concentration, or raise max_tries"
        )
    return kept


def clustered_users(
    n: int,
    d: int,
    clusters: int,
    *,
    separation: float,
    radius: float,
    total: int = 100,
    totals: str = "poisson",
    weights: Sequence[float] | None = None,
    centre_concentration: float = 0.3,
    seed: SeedLike = None,
) -> ClusteredUsers:
    """Draw n users' counts from K separated Dirichlet clusters (module docstring).

    Args:
        n: Users, ≥ 1.
        d: Classes, ≥ 2.
        clusters: K ≥ 1.
        separation: R: minimum pairwise L1 distance between centres, in (0, 2).
        radius: r: expected L1 distance of a user's distribution from its centre, > 0.
        total: s: the total count of every user (``totals="fixed"``) or its
            mean (``"poisson"``: 1 + Poisson(s − 1)), ≥ 1.
        totals: ``"poisson"`` or ``"fixed"``.
        weights: Cluster probabilities (uniform when ``None``).
        centre_concentration: α_c of the centre proposal.
        seed: Randomness (``None``: OS entropy).
    """
    n = check_int(n, "n", minimum=1)
    s = check_int(total, "total", minimum=1)
    if totals not in ("poisson", "fixed"):
        raise InvalidParameterError(f"totals must be 'poisson' or 'fixed', got {totals!r}")
    k = check_int(clusters, "clusters", minimum=1)
    r = _check_positive(radius, "radius")
    if weights is None:
        probs = np.full(k, 1.0 / k)
    else:
        probs = np.asarray(weights, dtype=np.float64)
        if probs.shape != (k,) or np.any(probs < 0) or not np.isfinite(probs).all():
            raise InvalidParameterError(f"weights must be {k} non-negative numbers")
        if probs.sum() <= 0:
            raise InvalidParameterError("weights must not all be 0")
        probs = probs / probs.sum()
    rng = make_rng(seed)
    centres = separated_centres(
        k, d, separation, centre_concentration=centre_concentration, seed=rng
    )
    kappa = np.array([concentration_for_radius(mu, r) for mu in centres])
    labels = rng.choice(k, size=n, p=probs).astype(np.int64)
    alphas = kappa[labels, None] * centres[labels]
    # Dirichlet draws as normalized gammas (vectorized over users with different parameters).
    gammas = rng.standard_gamma(alphas)
    sums = gammas.sum(axis=1, keepdims=True)
    # A row whose gammas all underflow (tiny κ) takes the κ → 0 limit: vertex j w.p. μ_j.
    empty = np.flatnonzero(sums[:, 0] <= 0)
    if empty.size:
        cumulative = np.cumsum(centres[labels[empty]], axis=1)
        vertex = np.minimum((cumulative < rng.random((empty.size, 1))).sum(axis=1), d - 1)
        gammas[empty] = 0.0
        gammas[empty, vertex] = 1.0
        sums[empty] = 1.0
    dist = gammas / sums
    if totals == "fixed":
        sizes = np.full(n, s, dtype=np.int64)
    else:
        sizes = 1 + rng.poisson(s - 1, size=n).astype(np.int64)
    counts = rng.multinomial(sizes, dist).astype(np.int64)
    return ClusteredUsers(
        counts=counts,
        labels=labels,
        centres=centres,
        distributions=dist,
        concentrations=kappa,
        separation=float(separation),
        radius=r,
    )
