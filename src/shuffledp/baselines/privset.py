"""PrivSet's subset-selection randomizer for set-valued data (the paper's "Subexp").

Wang, Huang, Nie, Wang, Xu & Yang, "PrivSet: set-valued data analyses with
local differential privacy", INFOCOM 2018 (ref. [20] of the segmented paper: Wang et
al., "Segmented private data aggregation in the multi-message shuffle model", arXiv
2407.19639).
A user's set is padded to exactly s items of an output domain of D symbols
(D = d + s with PrivSet's s dummy items when sets may be shorter, D = d when
every set is full). The randomizer outputs a k-subset Z of the D symbols with

    P[Z | x] = e^{ε·⟦Z ∩ x ≠ ∅⟧} / Ω,   Ω = C(D − s, k) + (C(D, k) − C(D − s, k))·e^ε,

the same Ω for every x of size s, so the ratio of any output's probabilities
under two inputs is at most e^ε: pure ε-LDP, attained (for 1 ≤ k ≤ D − s).

Marginals (PrivSet's "true" and "false" hit rates), with
r = C(D − s, k)/C(D, k) and r′ = C(D − 1 − s, k − 1)/C(D − 1, k − 1):

    t = P[j ∈ Z | j ∈ x] = (k/D)·e^ε/(1 + (1 − r)(e^ε − 1)),
    f = P[j ∈ Z | j ∉ x] = (k/D)·(1 + (1 − r′)(e^ε − 1))/(1 + (1 − r)(e^ε − 1)).

With h_j the number of users whose Z holds item j and c_j the number holding
j, E h_j = c_j·t + (n − c_j)·f, so ŵ_j = (h_j − n·f)/(n(t − f)) is unbiased,
with Var ŵ_j = (c_j·t(1 − t) + (n − c_j)·f(1 − f))/(n(t − f))² (users are
independent). These are the rates and the decoder of the authors' reference
code (github.com/wangsw/ldplearn, ``setvalued/privset.py``), written without
binomial coefficients so that they stay finite for any d.

The subset size k: the reference code picks the k minimizing
(t(1 − t) + (D − 1)·f(1 − f))/(t − f)², the error of a one-item histogram. We
minimize the error this estimator actually has for users holding s real items,
(s·t(1 − t) + (d − s)·f(1 − f))/(t − f)² (:func:`optimal_subset_size`); the
two agree or differ by one (at d = 128, s = 4, ε = 2: k = 4 here, 3 there,
0.9% apart in error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

from shuffledp._rng import SeedLike, child_seeds, make_rng
from shuffledp._validation import InvalidParameterError, check_epsilon, check_int
from shuffledp.baselines.base import (
    PAD,
    ExecutionPath,
    SetFrequencyEstimate,
    check_item_matrix,
    check_shape,
    check_user_levels,
    sampling_error,
)
from shuffledp.privacy import PrivacyReport
from shuffledp.shuffler.uniform import secure_permutation

__all__ = [
    "SubexpMechanism",
    "SubsetSelection",
    "optimal_subset_size",
    "subset_error",
    "subset_rates",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Cells (users × output symbols) one chunk of the vectorized randomizer holds.
_CHUNK_CELLS = 1 << 22


def _miss_products(output_domain: int, items: int, subset_size: int) -> tuple[float, float]:
    """(r, r′): a uniform k-subset of D misses a given s-set; a (k−1)-subset of D − 1 does."""
    big_d, s, k = output_domain, items, subset_size
    r = math.prod((big_d - k - i) / (big_d - i) for i in range(s))
    r1 = math.prod((big_d - k - i) / (big_d - 1 - i) for i in range(s))
    return max(r, 0.0), max(r1, 0.0)


def subset_rates(
    output_domain: int, items: int, subset_size: int, epsilon: float
) -> tuple[float, float]:
    """Return PrivSet's hit rates (t, f) (module docstring).

    Args:
        output_domain: D, the symbols a subset is drawn from.
        items: s, the (padded) set size.
        subset_size: k in [1, D − s].
        epsilon: ε > 0.
    """
    big_d = check_int(output_domain, "output_domain", minimum=2)
    s = check_int(items, "items", minimum=1, maximum=big_d - 1)
    k = check_int(subset_size, "subset_size", minimum=1, maximum=big_d - s)
    epsilon = check_epsilon(epsilon)
    r, r1 = _miss_products(big_d, s, k)
    grow = math.expm1(epsilon)
    omega = 1.0 + (1.0 - r) * grow
    t = (k / big_d) * math.exp(epsilon) / omega
    f = (k / big_d) * (1.0 + (1.0 - r1) * grow) / omega
    return t, f


def subset_error(
    domain_size: int, items: int, subset_size: int, epsilon: float, *, padding: bool
) -> float:
    """n·Σ_{j<d} Var ŵ_j for users each holding s real items: (s·t(1−t) + (d−s)·f(1−f))/(t−f)²."""
    d, s = check_shape(domain_size, items)
    t, f = subset_rates(d + (s if padding else 0), s, subset_size, epsilon)
    return (s * t * (1.0 - t) + (d - s) * f * (1.0 - f)) / (t - f) ** 2


def optimal_subset_size(domain_size: int, items: int, epsilon: float, *, padding: bool) -> int:
    """Return the k in [1, D − s] minimizing :func:`subset_error` (ties: the smallest)."""
    d, s = check_shape(domain_size, items)
    big_d = d + (s if padding else 0)
    if big_d - s < 1:
        raise InvalidParameterError(
            f"subset selection needs an output domain larger than s: d={d}, s={s}, "
            f"padding={padding}"
        )
    errors = [subset_error(d, s, k, epsilon, padding=padding) for k in range(1, big_d - s + 1)]
    return int(np.argmin(errors)) + 1


@dataclass(frozen=True)
class SubsetSelection:
    """PrivSet's ε-LDP randomizer for sets of s items among d (module docstring).

    Attributes:
        domain_size: d.
        items_per_user: s.
        epsilon: ε of the randomizer (local).
        subset_size: k.
        padding: Whether sets may be shorter than s (output domain d + s, the
            j-th empty slot of a row standing for dummy d + j).
    """

    domain_size: int
    items_per_user: int
    epsilon: float
    subset_size: int
    padding: bool

    def __post_init__(self) -> None:
        _, s = check_shape(self.domain_size, self.items_per_user)
        check_epsilon(self.epsilon)
        check_int(self.subset_size, "subset_size", minimum=1, maximum=self.output_domain - s)

    @property
    def output_domain(self) -> int:
        """D: d, plus s dummies with padding."""
        return self.domain_size + (self.items_per_user if self.padding else 0)

    @property
    def rates(self) -> tuple[float, float]:
        """(t, f)."""
        return subset_rates(self.output_domain, self.items_per_user, self.subset_size, self.epsilon)

    def intersection_law(self) -> FloatArray:
        """P[|Z ∩ x| = i] for i = 0 … min(s, k): ∝ C(s, i)·C(D − s, k − i)·e^{ε·⟦i ≥ 1⟧}."""
        big_d, s, k = self.output_domain, self.items_per_user, self.subset_size
        i = np.arange(min(s, k) + 1, dtype=np.float64)
        log_w = (
            gammaln(s + 1)
            - gammaln(i + 1)
            - gammaln(s - i + 1)
            + gammaln(big_d - s + 1)
            - gammaln(k - i + 1)
            - gammaln(big_d - s - k + i + 1)
            + np.where(i >= 1, self.epsilon, 0.0)
        )
        valid = k - i <= big_d - s
        weights = np.where(valid, np.exp(log_w - np.max(log_w[valid])), 0.0)
        law: FloatArray = weights / weights.sum()
        return law

    def padded_sets(self, items: IntArray) -> IntArray:
        """Rows with the j-th ``PAD`` slot replaced by dummy d + j (a function of the set)."""
        pads = items == PAD
        if not np.any(pads):
            return items
        dummy = self.domain_size + np.cumsum(pads, axis=1) - 1
        out: IntArray = np.where(pads, dummy, items)
        return out

    def _membership(self, padded: IntArray, rng: np.random.Generator) -> NDArray[np.bool_]:
        """One chunk: a users × D matrix with each row's k-subset marked."""
        rows, s = padded.shape
        big_d, k = self.output_domain, self.subset_size
        law = self.intersection_law()
        hit = np.minimum(
            np.searchsorted(np.cumsum(law), rng.random(rows), side="right"), len(law) - 1
        )
        member = np.zeros((rows, big_d), dtype=np.bool_)
        row_index = np.arange(rows)[:, None]
        # |Z ∩ x| = hit: a uniformly random hit-subset of the user's s items ...
        slot_rank = np.argsort(np.argsort(rng.random((rows, s)), axis=1), axis=1)
        take_own = slot_rank < hit[:, None]
        member[np.broadcast_to(row_index, (rows, s))[take_own], padded[take_own]] = True
        # ... and a uniformly random (k − hit)-subset of the other D − s symbols.
        keys = rng.random((rows, big_d))
        keys[np.broadcast_to(row_index, (rows, s)), padded] = 2.0
        others = np.argsort(keys, axis=1)[:, : big_d - s]
        take_other = np.arange(big_d - s)[None, :] < (k - hit)[:, None]
        member[np.broadcast_to(row_index, others.shape)[take_other], others[take_other]] = True
        return member

    def _chunks(self, users: int) -> list[slice]:
        """Slices of users small enough for one users × D matrix."""
        size = max(1, _CHUNK_CELLS // self.output_domain)
        return [slice(start, start + size) for start in range(0, users, size)]

    def randomize(self, items: IntArray, seed: SeedLike = None) -> IntArray:
        """Return each user's k-subset (n × k symbols of the output domain, sorted per row)."""
        rng = make_rng(seed)
        padded = self.padded_sets(items)
        out = np.empty((items.shape[0], self.subset_size), dtype=np.int64)
        for part in self._chunks(items.shape[0]):
            member = self._membership(padded[part], rng)
            out[part] = np.nonzero(member)[1].reshape(-1, self.subset_size)
        return out

    def hits(self, items: IntArray, seed: SeedLike = None) -> IntArray:
        """Return h: how many users' subsets hold each output symbol (chunked, no n × k array)."""
        rng = make_rng(seed)
        padded = self.padded_sets(items)
        total = np.zeros(self.output_domain, dtype=np.int64)
        for part in self._chunks(items.shape[0]):
            total += self._membership(padded[part], rng).sum(axis=0)
        return total

    def estimate(self, hits: IntArray, n: int) -> tuple[FloatArray, FloatArray]:
        """Return (ŵ, stderr) for the d real items from the hit counts (module docstring).

        The standard error plugs the estimated count, clipped to [0, n], into
        the variance formula.
        """
        t, f = self.rates
        h = np.asarray(hits[: self.domain_size], dtype=np.float64)
        counts = (h - n * f) / (t - f)
        held = np.clip(counts, 0.0, n)
        var = (held * t * (1.0 - t) + (n - held) * f * (1.0 - f)) / (t - f) ** 2
        return counts / n, np.sqrt(var) / n

    def variance_sum(self, frequencies: FloatArray | None, n: int) -> float:
        """Σ_{j<d} Var ŵ_j given the users' frequencies (Σ w_j = s when ``None``)."""
        t, f = self.rates
        d, s = self.domain_size, self.items_per_user
        held = float(np.sum(frequencies)) if frequencies is not None else float(s)
        return (held * t * (1.0 - t) + (d - held) * f * (1.0 - f)) / (n * (t - f) ** 2)


@dataclass(frozen=True)
class SubexpMechanism:
    """Subset selection run locally ("Subexp, local") or through one shuffle ("Subexp, shuffle").

    Attributes:
        name: ``"subexp-local"`` or ``"subexp-shuffle"``.
        randomizer: The subset-selection randomizer at its local ε.
        n_users: Number of users the guarantee is for (the shuffle's depends on it).
        model: ``"local"`` (no shuffler) or ``"shuffle"`` (one message per user).
        report: The certified guarantee.
    """

    name: str
    randomizer: SubsetSelection
    n_users: int
    model: Literal["local", "shuffle"]
    report: PrivacyReport

    def __post_init__(self) -> None:
        # The shuffle's n check and permutation run on model == "shuffle" alone.
        if self.model not in ("local", "shuffle"):
            raise InvalidParameterError(f"model must be 'local' or 'shuffle', got {self.model!r}")

    @property
    def n(self) -> int:
        """Number of users."""
        return self.n_users

    @property
    def domain_size(self) -> int:
        """The number of items of the public domain, d."""
        return self.randomizer.domain_size

    @property
    def items_per_user(self) -> int:
        """The slots per user, s."""
        return self.randomizer.items_per_user

    def privacy_reports(self) -> tuple[PrivacyReport, ...]:
        """The one level's guarantee."""
        return (self.report,)

    def check_items(self, user_items: ArrayLike) -> IntArray:
        """The users' item matrix, checked (the shuffle's guarantee needs exactly n rows)."""
        return check_item_matrix(
            user_items,
            domain_size=self.domain_size,
            items_per_user=self.items_per_user,
            padding=self.randomizer.padding,
            n=self.n_users if self.model == "shuffle" else None,
        )

    def run(
        self,
        user_items: ArrayLike,
        *,
        user_levels: ArrayLike | None = None,
        seed: SeedLike = None,
        path: ExecutionPath = "message",
    ) -> SetFrequencyEstimate:
        """Randomize every user and estimate w.

        ``path="message"`` builds every user's k-subset (and, in the shuffle
        model, permutes them: a cryptographically secure permutation without a
        seed); ``"count"`` accumulates the hit counts chunk by chunk without
        keeping the subsets (the same law: hits are the analyzer's statistic).
        ``user_levels`` is only checked: every user runs at the one ε.
        """
        items = self.check_items(user_items)
        n = items.shape[0]
        check_user_levels(user_levels, n)
        # Independent streams for the randomizer and the shuffle (None: OS entropy and
        # the cryptographic permutation).
        randomize_seed, shuffle_seed = child_seeds(seed, 2)
        rng = make_rng(randomize_seed)
        size = self.randomizer.output_domain
        if path == "message":
            subsets = self.randomizer.randomize(items, rng)
            if self.model == "shuffle":
                order = (
                    secure_permutation(n) if shuffle_seed is None else shuffle_seed.permutation(n)
                )
                subsets = subsets[order]
            statistic = np.bincount(subsets.ravel(), minlength=size).astype(np.int64)
        elif path == "count":
            statistic = self.randomizer.hits(items, rng)
        else:
            raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
        freq, stderr = self.randomizer.estimate(statistic, n)
        return SetFrequencyEstimate(
            frequencies=freq,
            stderr=stderr,
            n=n,
            messages=n,
            mechanism=self.name,
            path=path,
            statistic=statistic,
        )

    def expected_error(
        self, frequencies: ArrayLike | None = None, *, include_sampling: bool = False
    ) -> float:
        """E Σ_j (ŵ_j − w_j)² (see :class:`~shuffledp.baselines.base.SetFrequencyMechanism`)."""
        w = None if frequencies is None else np.asarray(frequencies, dtype=np.float64)
        if w is not None and w.shape != (self.domain_size,):
            raise InvalidParameterError(
                f"frequencies must have {self.domain_size} entries, got shape {w.shape}"
            )
        error = self.randomizer.variance_sum(w, self.n_users)
        if include_sampling:
            error += sampling_error(w, self.n_users, self.items_per_user)
        return error

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        t, f = self.randomizer.rates
        return {
            "mechanism": self.name,
            "model": self.model,
            "n": self.n_users,
            "domain_size": self.domain_size,
            "items_per_user": self.items_per_user,
            "padding": self.randomizer.padding,
            "local_epsilon": self.randomizer.epsilon,
            "subset_size": self.randomizer.subset_size,
            "true_rate": t,
            "false_rate": f,
            "expected_error": self.expected_error(),
            "privacy": self.report.to_dict(),
        }
