"""The papers' calibration of the correlated protocol, as a reproduction.

Ghazi, Kumar, Manurangsi & Pagh (ICML 2020, arXiv 2106.04247) and Ghazi,
Kumar, Manurangsi, Pagh & Sinha (ICML 2021, arXiv 2109.13158) split the budget:
a share 1 − γ goes to the two-sided geometric part, a = ε(1 − γ)/2 under
replacement (a moving user changes two bins), and a share γ to the flooding,
chosen by their negative-binomial mechanism theorem and combined by basic
composition. As we read that theorem (Ghazi et al. 2021, Thm 13): adding
NB(r, p) with p = e^{−0.2·ε_W/Δ} and r = 3(1 + ln(1/δ_W)) to a sensitivity-Δ
count is (ε_W, δ_W)-DP. Here, per bin, ε_W = γε/2, δ_W = δ/2 (basic
composition over the two bins a replacement moves) and Δ = 1. Under add/remove
(one bin moves, our extension of the rule) a = ε(1 − γ), ε_W = γε, δ_W = δ.

**Does our reading reproduce the figures we planned with?** No (they are
our own, unpublished). At ε = 1, δ = 1e-6,
γ = 0.1 it gives a = 0.45, p = e^{−0.01} ≈ 0.990, r ≈ 46.5 and
E[W] = rp/(1 − p) ≈ 4,630 per bin, not the 29,115 of those figures (6.3 times
fewer messages: about 10.3 per user at n = 1e5, d = 100, against their 59). Their
other figure is reproduced: the exact accountant puts this noise at
ε ≈ 0.905 for δ = 1e-6 (theirs: about 0.90; it is 2a = 0.9 plus what the
flooding leaves, so it hardly depends on E[W]), and at δ ≈ 4e-21 at ε = 1 (the
accountant's floor). We did not tune the reading to match E[W].

Whatever the rule gives, the guarantee reported for it is the exact
certificate :func:`shuffledp.accounting.certificates.correlated.correlated_delta` of the
noise it chooses; the rule itself is a reproduction, never a certificate.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate. May import the numerical
core, published bounds and certificates; nothing below imports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon
from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    Neighbours,
    check_neighbours,
    correlated_delta,
    correlated_epsilon,
)

__all__ = ["PAPER_GAMMA", "PaperCorrelatedRule", "paper_correlated_noise", "paper_flooding"]

#: The budget share of the flooding the notes' figures use.
PAPER_GAMMA = 0.1


@dataclass(frozen=True)
class PaperCorrelatedRule:
    """The papers' noise for a target (ε, δ), with what the exact accountant says of it.

    Attributes:
        epsilon: Target ε.
        delta: Target δ.
        gamma: The flooding's share γ of ε.
        neighbours: ``"replacement"`` or ``"add-remove"``.
        flood_epsilon: ε_W given to the flooding of one bin.
        flood_delta: δ_W given to the flooding of one bin.
        noise: The per-bin noise the rule chooses (α = e^{−a}, NB(r, p)).
        delta_at_epsilon: Certified δ of that noise at ``epsilon`` (exact accountant).
        exact_epsilon: Smallest ε whose certified δ is at most ``delta``.
        delta_at_exact_epsilon: The certified δ at ``exact_epsilon`` (≤ ``delta``).
    """

    epsilon: float
    delta: float
    gamma: float
    neighbours: str
    flood_epsilon: float
    flood_delta: float
    noise: CorrelatedNoise
    delta_at_epsilon: float
    exact_epsilon: float
    delta_at_exact_epsilon: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "gamma": self.gamma,
            "a": self.noise.a,
            "alpha": self.noise.alpha,
            "flooding": {
                "r": self.noise.flood_r,
                "q": self.noise.flood_q,
                "mean": self.noise.flood_mean,
            },
            "flood_epsilon": self.flood_epsilon,
            "flood_delta": self.flood_delta,
            "delta": self.delta_at_epsilon,
            "exact_epsilon": self.exact_epsilon,
            "delta_at_exact_epsilon": self.delta_at_exact_epsilon,
        }


def paper_flooding(
    epsilon: float,
    delta: float,
    gamma: float = PAPER_GAMMA,
    *,
    neighbours: Neighbours = "replacement",
) -> tuple[CorrelatedNoise, float, float]:
    """Return the papers' per-bin noise for (ε, δ), with ε_W and δ_W (module docstring).

    Only the rule: nothing is certified here (see :func:`paper_correlated_noise`).

    Args:
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1).
        gamma: Share of ε given to the flooding, in (0, 1).
        neighbours: ``"replacement"`` (two bins move, the papers' setting) or
            ``"add-remove"`` (one bin).

    Raises:
        InvalidParameterError: On a bad parameter.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if not (isinstance(gamma, int | float) and 0.0 < gamma < 1.0):
        raise InvalidParameterError(f"gamma must be in the open interval (0, 1), got {gamma!r}")
    neighbours = check_neighbours(neighbours)
    bins = 2 if neighbours == "replacement" else 1
    a = epsilon * (1.0 - gamma) / bins
    flood_epsilon = gamma * epsilon / bins
    flood_delta = delta / bins
    p = math.exp(-0.2 * flood_epsilon)
    r = 3.0 * (1.0 + math.log(1.0 / flood_delta))
    return CorrelatedNoise.from_a(a, r, p), flood_epsilon, flood_delta


def paper_correlated_noise(
    epsilon: float,
    delta: float,
    gamma: float = PAPER_GAMMA,
    *,
    neighbours: Neighbours = "replacement",
    domain_size: int | None = None,
    min_honest: int | None = None,
) -> PaperCorrelatedRule:
    """Return the papers' noise for (ε, δ) (:func:`paper_flooding`) and its exact privacy.

    The certified δ at ε and the smallest certified ε at δ come from
    :func:`~shuffledp.accounting.certificates.correlated.correlated_delta` and
    :func:`~shuffledp.accounting.certificates.correlated.correlated_epsilon`.

    Args:
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1).
        gamma: Share of ε given to the flooding, in (0, 1).
        neighbours: ``"replacement"`` or ``"add-remove"`` (the usual relation,
            certified over every bin: ``domain_size`` and ``min_honest`` required).
        domain_size: d (add/remove only).
        min_honest: m (add/remove only).

    Raises:
        InvalidParameterError: On a bad parameter.
    """
    noise, flood_epsilon, flood_delta = paper_flooding(epsilon, delta, gamma, neighbours=neighbours)
    epsilon, delta = float(epsilon), float(delta)
    exact_epsilon, at_exact = correlated_epsilon(
        delta, noise, neighbours=neighbours, domain_size=domain_size, min_honest=min_honest
    )
    return PaperCorrelatedRule(
        epsilon=epsilon,
        delta=delta,
        gamma=float(gamma),
        neighbours=neighbours,
        flood_epsilon=flood_epsilon,
        flood_delta=flood_delta,
        noise=noise,
        delta_at_epsilon=correlated_delta(
            epsilon, noise, neighbours=neighbours, domain_size=domain_size, min_honest=min_honest
        ),
        exact_epsilon=exact_epsilon,
        delta_at_exact_epsilon=at_exact,
    )
