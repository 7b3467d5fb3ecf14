"""Baselines "SepMM, shuffle" and "Weighted SepMM, shuffle" (segmented paper, §6, L506–508).

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

The users of each level k (n_k of them, level ε = E_k) run
:mod:`~shuffledp.baselines.mm_shuffle` on their own: their own shuffle, blanket
messages from their own level's users only, calibrated for (E_k, δ) with
n_k users (δ = 0.01/n, n all users, as in the paper). The analyzer combines
the K estimates ŵ^(k):

* SepMM: equal weights 1/K;
* Weighted SepMM: weights ∝ 1/√(d·s²·ln(1/δ)/(n_k·E_k)² + s/n_k), normalized,
  the paper's signal-to-noise weights from MM's error O(d s² log(1/δ)/(nε)² + s/n);
* ``weighting="inverse_variance"`` (not in the paper): weights ∝ 1/V_k with
  V_k each level's exact expected error plus its sampling term s/n_k, the
  variance-optimal combination, for comparison.

Privacy: a level-k user's data enter only its level's shuffle, whose output
is (E_k, δ_k)-DP in that user's set (certified by MM's accountant); the other
levels' outputs do not depend on it. So every user gets its level's
guarantee, δ_k ≤ δ.

Unbiasedness: each ŵ^(k) is unbiased for its level's own frequencies w^(k),
so Σ_k a_k ŵ^(k) is unbiased for Σ_k a_k w^(k): the population frequency
when users are i.i.d. and their levels independent of their sets (§5's
model), not the empirical frequency of all n users for a given data set.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shuffledp._rng import SeedLike, child_seeds
from shuffledp._validation import DataError, InvalidParameterError, check_delta, check_epsilon
from shuffledp.baselines.base import (
    ExecutionPath,
    SetFrequencyEstimate,
    check_item_matrix,
    check_shape,
    check_user_levels,
    default_delta,
)
from shuffledp.baselines.mm_shuffle import Blanket, MMShuffle, calibrate_mm
from shuffledp.privacy import PrivacyReport

__all__ = [
    "WEIGHTINGS",
    "SepMM",
    "Weighting",
    "calibrate_sepmm",
    "calibrate_weighted_sepmm",
    "paper_weights",
]

Weighting = Literal["equal", "paper", "inverse_variance"]
WEIGHTINGS: tuple[str, ...] = ("equal", "paper", "inverse_variance")

FloatArray = NDArray[np.float64]

#: The level ε of §6 (L490).
PAPER_LEVELS: tuple[float, ...] = (0.5, 1.0, 2.0)


def paper_weights(
    levels: tuple[float, ...],
    level_counts: tuple[int, ...],
    *,
    domain_size: int,
    items_per_user: int,
    delta: float,
) -> FloatArray:
    """Weighted SepMM's weights: ∝ 1/√(d s² ln(1/δ)/(n_k E_k)² + s/n_k), summing to 1 (L508)."""
    d, s = domain_size, items_per_user
    raw = np.array(
        [
            1.0 / math.sqrt(d * s * s * math.log(1.0 / delta) / (nk * ek) ** 2 + s / nk)
            for ek, nk in zip(levels, level_counts, strict=True)
        ]
    )
    weights: FloatArray = raw / raw.sum()
    return weights


@dataclass(frozen=True)
class SepMM:
    """MM run separately per level, the estimates combined (module docstring).

    Attributes:
        levels: E_1 < … < E_K.
        level_counts: n_k.
        weights: a_k (sum to 1).
        weighting: ``"equal"``, ``"paper"`` or ``"inverse_variance"``.
        parts: Each level's calibrated MM.
        name: ``"sepmm"`` or ``"weighted-sepmm"`` (or ``"sepmm-inverse-variance"``).
    """

    levels: tuple[float, ...]
    level_counts: tuple[int, ...]
    weights: tuple[float, ...]
    weighting: Weighting
    parts: tuple[MMShuffle, ...]
    name: str

    @property
    def n(self) -> int:
        """Number of users (all levels)."""
        return sum(self.level_counts)

    @property
    def domain_size(self) -> int:
        """The number of items of the public domain, d."""
        return self.parts[0].d

    @property
    def items_per_user(self) -> int:
        """The slots per user, s."""
        return self.parts[0].s

    def privacy_reports(self) -> tuple[PrivacyReport, ...]:
        """Each level's guarantee, in level order."""
        return tuple(part.report for part in self.parts)

    def run(
        self,
        user_items: ArrayLike,
        *,
        user_levels: ArrayLike | None = None,
        seed: SeedLike = None,
        path: ExecutionPath = "message",
    ) -> SetFrequencyEstimate:
        """Run each level's MM on its users and combine the estimates.

        Args:
            user_items: The n × s item matrix of all users.
            user_levels: Each user's level index (0 … K − 1); required. The
                counts per level must be the calibrated n_k.
            seed: ``None`` for OS entropy and secure shuffles; an int to reproduce.
            path: ``"message"`` or ``"count"`` (see :meth:`MMShuffle.run`).
        """
        items = check_item_matrix(
            user_items,
            domain_size=self.domain_size,
            items_per_user=self.items_per_user,
            padding=self.parts[0].padding,
            n=self.n,
        )
        if user_levels is None:
            raise DataError("SepMM needs user_levels: each user's level index")
        level_of = check_user_levels(user_levels, self.n, len(self.levels))
        assert level_of is not None
        counts = tuple(np.bincount(level_of, minlength=len(self.levels)).tolist())
        if counts != self.level_counts:
            raise DataError(
                f"user_levels give {list(counts)} users per level; the mechanism was "
                f"calibrated for {list(self.level_counts)}"
            )
        # One independent stream per level's mechanism (None: each its own entropy).
        part_seeds = child_seeds(seed, len(self.parts))
        estimates = tuple(
            part.run(items[level_of == k], seed=part_seed, path=path)
            for k, (part, part_seed) in enumerate(zip(self.parts, part_seeds, strict=True))
        )
        a = np.array(self.weights)
        freq = np.sum([w * e.frequencies for w, e in zip(a, estimates, strict=True)], axis=0)
        var = np.sum([w * w * e.stderr**2 for w, e in zip(a, estimates, strict=True)], axis=0)
        return SetFrequencyEstimate(
            frequencies=freq,
            stderr=np.sqrt(var),
            n=self.n,
            messages=sum(e.messages for e in estimates),
            mechanism=self.name,
            path=path,
            statistic=np.concatenate([e.statistic for e in estimates]),
            parts=estimates,
            weights=self.weights,
        )

    def expected_error(
        self, frequencies: ArrayLike | None = None, *, include_sampling: bool = False
    ) -> float:
        """Σ_k a_k²·(level k's expected error).

        That is E Σ_j (ŵ_j − Σ_k a_k w^(k)_j)², or with ``include_sampling``
        the error around i.i.d. users' population frequencies (each level's
        s/n_k, or Σ_j w_j(1 − w_j)/n_k, added).
        """
        return float(
            sum(
                a * a * part.expected_error(frequencies, include_sampling=include_sampling)
                for a, part in zip(self.weights, self.parts, strict=True)
            )
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "mechanism": self.name,
            "levels": list(self.levels),
            "level_counts": list(self.level_counts),
            "weighting": self.weighting,
            "weights": list(self.weights),
            "expected_error": self.expected_error(),
            "parts": [part.to_dict() for part in self.parts],
        }


def calibrate_sepmm(
    level_counts: tuple[int, ...] | list[int],
    domain_size: int,
    items_per_user: int,
    *,
    levels: tuple[float, ...] | list[float] = PAPER_LEVELS,
    delta: float | None = None,
    padding: bool = False,
    blanket: Blanket = "lwy",
    weighting: Weighting = "equal",
    rtol: float = 1e-3,
) -> SepMM:
    """Return SepMM: each level's MM calibrated for (E_k, δ) among its n_k users.

    Args:
        level_counts: n_k per level (each ≥ 1).
        domain_size: d.
        items_per_user: s.
        levels: E_1 < … < E_K (default 0.5, 1, 2).
        delta: Target δ of every level (default 0.01/n, n = Σ n_k).
        padding: Whether sets may hold fewer than s items.
        blanket: MM's blanket count (``"lwy"`` or ``"alg2"``).
        weighting: ``"equal"`` (SepMM), ``"paper"`` (Weighted SepMM) or
            ``"inverse_variance"``.
        rtol: Relative precision of each level's blanket rate.

    Raises:
        InvalidParameterError: On bad levels, counts or parameters.
    """
    eps = tuple(check_epsilon(e, "level epsilon") for e in levels)
    if not eps:
        raise InvalidParameterError("levels must name at least one epsilon")
    if any(b <= a for a, b in itertools.pairwise(eps)):
        raise InvalidParameterError(f"levels must be strictly increasing, got {list(levels)}")
    counts = tuple(int(c) for c in level_counts)
    if len(counts) != len(eps) or any(
        not isinstance(c, int | np.integer) or isinstance(c, bool) for c in level_counts
    ):
        raise InvalidParameterError(
            f"level_counts must be {len(eps)} integers, one per level, got {list(level_counts)}"
        )
    if any(c < 1 for c in counts):
        raise InvalidParameterError(f"every level needs at least one user, got {list(counts)}")
    d, s = check_shape(domain_size, items_per_user)
    n = sum(counts)
    target = check_delta(default_delta(n) if delta is None else delta)
    if weighting not in WEIGHTINGS:
        raise InvalidParameterError(
            f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}"
        )
    parts = tuple(
        calibrate_mm(
            nk,
            d,
            s,
            epsilon=ek,
            delta=target,
            padding=padding,
            blanket=blanket,
            rtol=rtol,
            lower_bound=False,
        )
        for ek, nk in zip(eps, counts, strict=True)
    )
    if weighting == "equal":
        weights = np.full(len(eps), 1.0 / len(eps))
        name = "sepmm"
    elif weighting == "paper":
        weights = paper_weights(eps, counts, domain_size=d, items_per_user=s, delta=target)
        name = "weighted-sepmm"
    else:
        inverse = np.array([1.0 / p.expected_error(include_sampling=True) for p in parts])
        weights = inverse / inverse.sum()
        name = "sepmm-inverse-variance"
    return SepMM(eps, counts, tuple(float(w) for w in weights), weighting, parts, name)


def calibrate_weighted_sepmm(
    level_counts: tuple[int, ...] | list[int],
    domain_size: int,
    items_per_user: int,
    **kwargs: Any,
) -> SepMM:
    """Weighted SepMM: :func:`calibrate_sepmm` with the paper's weights (L508)."""
    if "weighting" in kwargs:
        raise InvalidParameterError("calibrate_weighted_sepmm sets weighting='paper' itself")
    return calibrate_sepmm(level_counts, domain_size, items_per_user, weighting="paper", **kwargs)
