"""Per-user histograms with cluster-then-shuffle (per-user histograms paper, Alg. 1 and Alg. 2).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

Every user holds counts H ∈ ℕ^d and sends noisy copies of H̄ = H/s_H
(:mod:`shuffledp.randomizers.laplace`); the shuffler groups the users on the
first copy and shuffles the released copy within each group
(:mod:`shuffledp.shuffler.grouped`); the server receives the ordered
sequence Ĥ and takes Ĥ_i as user i's histogram.

Release variants (``release=``):

* ``"t"`` (default): groups from W (ε₁), release of the shuffled T (ε₂) only.
* ``"r"``: Alg. 1 as printed: groups from W, release of the shuffled
  R = a·W + (1 − a)·T (a reproduction).
* ``"single"``: Alg. 2 (App. B, Thm 1): one copy Z with the whole ε both
  clusters and is released (the attack demonstration).
* baselines: ``"laplace-ldp"`` (each user's own copy, unshuffled; R or T by
  ``baseline_copy``), ``"laplace-full"`` (one Lap copy with the whole ε,
  unshuffled: the naive solution of §3.1), ``"uniform-shuffle"`` (one uniform
  shuffle of all users' copies), ``"oracle"`` (the generator's true clusters,
  shuffled within them; needs ``true_labels``).

Guarantee. Every variant releases post-processing of local Laplace reports
whose total budget is ε (ε₁ + ε₂ by basic composition, or one copy of ε), so
each is (ε, 0, c)-hDP per user (Def. 3) in the worst case, whatever the
grouping, under the reading of Def. 1 chosen by ``neighbouring``
(:mod:`shuffledp.randomizers.laplace`): ``"moved-items"`` by default (at most
⌊c·s⌋ items moved; Alg. 1's scale 2c/ε, which covers the L1 reading too) or
``"l1-distance"`` (‖H − H′‖₁ ≤ ⌊c·s⌋; scale c/ε, only 2ε under the moved-items
reading). The report states the relation in words. The report states exactly that (method
``per-user-laplace-local``, bound ``upper``) and nothing data-dependent: no
per-user amplified ε′ (Thm 2 is data-dependent, §4) and no group sizes.
Whether the shuffle amplifies is the business of
:mod:`shuffledp.accounting.certificates.per_user`, which reads :class:`PerUserAnalysis`.

Contract. :class:`PerUserHistograms` is a
:class:`~shuffledp.protocols.base.ShuffleProtocol` whose users hold
histograms (an n × d count matrix, also the count-level input), whose
statistic is the released sequence Ĥ in position order and whose estimate is
a :class:`PerUserEstimate`. Its shuffler needs the users' identities (it
groups them on W), so :meth:`PerUserHistograms.randomize` runs it as
augmented's randomize runs its shuffler's sampling: the noisy copies, the
grouping and the permutation within groups, then one message per position of
the release carrying the position and Ĥ_i. The uniform shuffle after it changes
nothing the analyzer reads (the positions put Ĥ back in order), so both paths
release the same Ĥ from the same seed, and the guarantee is the one above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SEEDED_NOT_COVERED, SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_epsilon, check_int
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.protocols.base import DomainSpec, ExecutionPath, ShuffleProtocol, resolve_domain
from shuffledp.randomizers.laplace import (
    HistogramLaplaceRandomizer,
    Neighbouring,
    Weighting,
    check_c,
    check_counts,
    check_neighbouring,
    combine_weight,
    copy_variances,
    hldp_epsilon,
    laplace_scale,
    neighbouring_in_words,
    normalized_sensitivity,
)
from shuffledp.shuffler.grouped import (
    Clustering,
    ClusteringConfig,
    Embedding,
    cluster_users,
    group_size_summary,
    grouped_permutation,
)
from shuffledp.shuffler.uniform import UniformShuffler

__all__ = [
    "BASELINE_COPIES",
    "LAPLACE_95_STDERRS",
    "PER_USER_METHOD",
    "RELEASES",
    "PerUserAnalysis",
    "PerUserEstimate",
    "PerUserHistograms",
    "PerUserRun",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
#: Every user's counts, one row per user (integers, possibly held as floats).
Counts = NDArray[np.integer] | NDArray[np.floating]

Release = Literal["t", "r", "single", "laplace-ldp", "laplace-full", "uniform-shuffle", "oracle"]
BaselineCopy = Literal["t", "r"]

#: Release variants (module docstring).
RELEASES: tuple[str, ...] = get_args(Release)
#: The copy the ``laplace-ldp``, ``uniform-shuffle`` and ``oracle`` baselines release.
BASELINE_COPIES: tuple[str, ...] = get_args(BaselineCopy)
#: The method name of every variant's report.
PER_USER_METHOD = "per-user-laplace-local"

#: Half-width, in standard errors, of a 95% interval for one Laplace draw: b·ln 20 with
#: σ = √2·b, so ln(20)/√2 ≈ 2.118. The released noise is Laplace, not normal: ± 1.96
#: standard errors cover 1 − 20^(−1.96/2.118) ≈ 93.7% of one copy's noise; for the
#: weighted sum of two copies (``r``) ± 2.118 covers 95% to 95.5%.
LAPLACE_95_STDERRS = math.log(20.0) / math.sqrt(2.0)

_ONE_COPY = ("single", "laplace-full")
_CLUSTERED = ("t", "r", "single")


@dataclass(frozen=True, repr=False)
class PerUserAnalysis:
    """What the shuffler saw and did: for privacy analysis and experiments, never released.

    Attributes:
        normalized: H̄, the users' normalized histograms (n × d).
        w: The clustering copy W = H̄ + Lap(b₁) (for ``single`` and
            ``laplace-full``: the one copy Z; then ``w``, ``t`` and ``r`` are Z).
        t: T = H̄ + Lap(b₂).
        r: R = a·W + (1 − a)·T.
        released_copy: Which copy was shuffled and released: ``"t"``, ``"r"`` or ``"z"``.
        labels: Group of every user (all 0 for ``uniform-shuffle``; one group
            per user when nothing is shuffled).
        permutation: ``estimates[i] = copy[permutation[i]]``.
        weight: a, the weight of W in R (``None`` with one copy).
        true_labels: The generator's clusters when given.
    """

    normalized: FloatArray
    w: FloatArray
    t: FloatArray
    r: FloatArray
    released_copy: str
    labels: IntArray
    permutation: IntArray
    weight: float | None
    true_labels: IntArray | None = None

    @property
    def n_groups(self) -> int:
        """Number of groups (singletons included)."""
        return int(np.unique(self.labels).shape[0])

    @property
    def group_sizes(self) -> IntArray:
        """Size of the group of every user."""
        _, inverse, counts = np.unique(self.labels, return_inverse=True, return_counts=True)
        return np.asarray(counts[inverse.reshape(-1)], dtype=np.int64)

    def group_size_summary(self) -> dict[str, int]:
        """Groups counted by size bucket (for the operator; data-dependent)."""
        return group_size_summary(self.labels)

    @property
    def moved(self) -> NDArray[np.bool_]:
        """Whether each position received another user's value."""
        return np.asarray(self.permutation != np.arange(self.permutation.shape[0]))


@dataclass(frozen=True, repr=False)
class PerUserRun:
    """One run: the release (``estimates``, ``report``) and the analysis-only record.

    Attributes:
        estimates: The released Ĥ in user order (n × d): row i is what the
            server takes as user i's normalized histogram.
        report: The worst-case guarantee, (ε, 0, c)-hDP per user.
        analysis: W, T, R, groups and permutation; NEVER part of the release.
        path: ``"message"`` (Ĥ went through messages and the uniform shuffle)
            or ``"count"`` (drawn directly); the same Ĥ from the same seed.
    """

    estimates: FloatArray
    report: PrivacyReport
    analysis: PerUserAnalysis = field(repr=False)
    path: ExecutionPath = "message"

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.estimates.shape[0])

    @property
    def stderr(self) -> FloatArray:
        """Standard error of every released value, one per class (the same for every row).

        Row i of :attr:`estimates` is the released copy of some user u of i's
        group (possibly i): H̄_u plus Laplace noise of the released copy
        (``noise_variance_per_coordinate`` of the report's parameters, 2b² per
        Laplace copy). Its standard error as an estimate of H̄_u is the noise's
        standard deviation, the same for every user and class, public and
        data-independent. As an estimate of user i's own H̄_i it adds the
        shuffle's error, H̄_u − H̄_i, which depends on how alike the group's
        users are (Thm 3 bounds it by the group's spread); that part depends
        on the data and is not included. The raw values are neither clipped
        nor renormalized, so the noise stays unbiased. The noise is Laplace,
        not normal: a 95% interval is ± :data:`LAPLACE_95_STDERRS` (2.12)
        standard errors, not ± 1.96 (which covers about 93.7%).
        """
        variance = float(self.report.parameters["noise_variance_per_coordinate"])
        return np.full(self.estimates.shape[1], np.sqrt(variance))

    def __repr__(self) -> str:
        return (
            f"PerUserRun(n={self.n}, d={self.estimates.shape[1]}, "
            f"epsilon={self.report.epsilon:g}, release={self.report.parameters['release']!r})"
        )


@dataclass(frozen=True, repr=False)
class PerUserEstimate:
    """What the analyzer makes of the released sequence: row i estimates user i's H̄_i.

    Attributes:
        estimates: Ĥ (n × d) in position order, as released (neither clipped
            nor renormalized, so the noise stays unbiased).
        stderr: The released copy's noise standard deviation, one per class
            (the same for every row; see :attr:`PerUserRun.stderr` for what it
            leaves out).
        domain: The classes' labels, or ``None``.
    """

    estimates: FloatArray
    stderr: FloatArray
    domain: tuple[str, ...] | None = None

    @property
    def n(self) -> int:
        """Number of users (rows)."""
        return int(self.estimates.shape[0])

    def __repr__(self) -> str:
        return f"PerUserEstimate(n={self.n}, d={self.estimates.shape[1]})"


def _slot_messages(released: FloatArray, permutation: IntArray) -> MessageBatch:
    """One message per position i of the release: (i, Ĥ_i) as 1 + d int64 words.

    The d values travel as the bits of their float64 (``view``), so the
    analyzer reads back exactly the released numbers; ``sender[i]`` is the
    user whose copy fills position i.
    """
    n, d = released.shape
    payload = np.empty((n, 1 + d), dtype=np.int64)
    payload[:, 0] = np.arange(n, dtype=np.int64)
    payload[:, 1:] = np.ascontiguousarray(released, dtype=np.float64).view(np.int64)
    return MessageBatch(payload=payload, sender=permutation.astype(np.int64), n_users=n)


class PerUserHistograms(ShuffleProtocol[Counts, IntArray, FloatArray, PerUserEstimate, PerUserRun]):
    """The per-user histogram protocol (Alg. 1; Alg. 2 and baselines by ``release``).

    Args:
        epsilon: Total per-user budget ε > 0.
        epsilon1: The clustering copy's budget, 0 < ε₁ < ε (T gets ε₂ = ε − ε₁).
            Unused by ``single`` and ``laplace-full`` (one copy with the whole ε).
        c: Def. 1's neighbouring fraction, in (0, 1].
        neighbouring: The reading of Def. 1 the guarantee holds for:
            ``"moved-items"`` (default: at most ⌊c·s⌋ items moved, Lap(2c/ε) as
            Alg. 1 prints it; also covers ``"l1-distance"``) or ``"l1-distance"``
            (‖H − H′‖₁ ≤ ⌊c·s⌋, Lap(c/ε); under moved items only 2ε).
        weighting: R's weights: ``"min-variance"`` (App. D, default) or ``"printed"``.
        clustering: ``"kmeans"`` or ``"dbscan"`` (line 9).
        clusters: G for k-means.
        eps_radius: DBSCAN's radius (Jensen–Shannon distance in bits, (0, 1]).
        min_samples: DBSCAN's core-point threshold.
        max_diameter: §4's maximum group diameter (JS distance) or ``None``.
        embedding: k-means on P (``"simplex"``) or √P (``"hellinger"``).
        n_init: k-means restarts.
        release: The variant (module docstring), default ``"t"``.
        baseline_copy: What ``laplace-ldp``, ``uniform-shuffle`` and ``oracle``
            release: ``"t"`` (default) or ``"r"``.
        n: The number of users :meth:`run` takes (it refuses others), or
            ``None`` (default) for the users of each run's counts. The
            guarantee does not depend on n; the report states it.
        domain: The classes: their number d or their labels, in order; or
            ``None`` (default) for d from each run's counts.

    Raises:
        InvalidParameterError: On any parameter outside its range.
    """

    name: ClassVar[str] = "per-user"

    def __init__(
        self,
        epsilon: float,
        epsilon1: float,
        c: float,
        *,
        neighbouring: Neighbouring = "moved-items",
        weighting: Weighting = "min-variance",
        clustering: Clustering = "kmeans",
        clusters: int | None = None,
        eps_radius: float | None = None,
        min_samples: int = 5,
        max_diameter: float | None = None,
        embedding: Embedding = "simplex",
        n_init: int = 1,
        release: Release = "t",
        baseline_copy: BaselineCopy = "t",
        n: int | None = None,
        domain: DomainSpec | None = None,
    ) -> None:
        self._n = None if n is None else check_int(n, "n", minimum=1)
        self._domain_size: int | None = None
        if domain is not None:
            self._domain_size, self.labels = resolve_domain(domain)
        self.epsilon = check_epsilon(epsilon)
        self.epsilon1 = check_epsilon(epsilon1, "epsilon1")
        if not self.epsilon1 < self.epsilon:
            raise InvalidParameterError(
                f"epsilon1 must be < epsilon = {self.epsilon:g} (T gets epsilon - epsilon1 > 0), "
                f"got {self.epsilon1:g}"
            )
        self.epsilon2 = self.epsilon - self.epsilon1
        self.c = check_c(c)
        self.neighbouring: Neighbouring = check_neighbouring(neighbouring)
        self.scale_w = laplace_scale(self.epsilon1, self.c, self.neighbouring)
        self.scale_t = laplace_scale(self.epsilon2, self.c, self.neighbouring)
        self.scale_z = laplace_scale(self.epsilon, self.c, self.neighbouring)
        self.weight = combine_weight(self.epsilon1, self.epsilon2, weighting)  # checks weighting
        self.weighting = weighting
        if release not in RELEASES:
            raise InvalidParameterError(
                f"release must be one of {', '.join(RELEASES)}, got {release!r}"
            )
        if baseline_copy not in BASELINE_COPIES:
            raise InvalidParameterError(
                f"baseline_copy must be one of {', '.join(BASELINE_COPIES)}, got {baseline_copy!r}"
            )
        self.release: Release = release
        self.baseline_copy: BaselineCopy = baseline_copy
        self.clustering: ClusteringConfig | None = None
        if release in _CLUSTERED:
            self.clustering = ClusteringConfig(
                method=clustering,
                clusters=clusters,
                eps_radius=eps_radius,
                min_samples=min_samples,
                max_diameter=max_diameter,
                embedding=embedding,
                n_init=n_init,
            )

    @property
    def n(self) -> int:
        """The number of users :meth:`run` takes (``n=`` of the constructor).

        Raises:
            AttributeError: If the protocol was built without ``n`` (it takes
                each run's users).
        """
        if self._n is None:
            raise AttributeError(
                "n is not fixed: this per-user protocol takes the users of each run's counts "
                "(its guarantee, (epsilon, 0, c)-hDP per user, does not depend on n); build it "
                "with n=... to have run() refuse other numbers of users"
            )
        return self._n

    @n.setter
    def n(self, value: int) -> None:
        self._n = check_int(value, "n", minimum=1)

    @property
    def domain_size(self) -> int:
        """d, the number of classes (``domain=`` of the constructor).

        Raises:
            AttributeError: If the protocol was built without ``domain`` (d
                comes from each run's counts).
        """
        if self._domain_size is None:
            raise AttributeError(
                "domain_size is not fixed: this per-user protocol takes d from each run's "
                "counts; build it with domain=... (d or the class labels) to fix it"
            )
        return self._domain_size

    @domain_size.setter
    def domain_size(self, value: int) -> None:
        self._domain_size = check_int(value, "domain_size", minimum=2)

    @property
    def copies(self) -> int:
        """Noisy copies each user sends: 1 (``single``, ``laplace-full``) or 2."""
        return 1 if self.release in _ONE_COPY else 2

    @property
    def released_copy(self) -> str:
        """The copy whose (shuffled) values are released: ``"t"``, ``"r"`` or ``"z"``."""
        if self.release in _ONE_COPY:
            return "z"
        if self.release in ("t", "r"):
            return self.release
        return self.baseline_copy

    def noise_variance(self) -> float:
        """Per-coordinate variance of the released copy's noise (2b² sums; module docs)."""
        if self.copies == 1:
            return 2.0 * self.scale_z**2
        v = copy_variances(
            self.epsilon,
            self.epsilon1,
            self.c,
            neighbouring=self.neighbouring,
            weighting=self.weighting,
        )
        return v.t if self.released_copy == "t" else v.r

    def parameters(self) -> dict[str, Any]:
        """The data-independent parameters, JSON-serialisable (for the report)."""
        out: dict[str, Any] = {
            "release": self.release,
            "released_copy": self.released_copy,
            "epsilon": self.epsilon,
            "c": self.c,
            "neighbouring": self.neighbouring,
            "l1_sensitivity": normalized_sensitivity(self.c, self.neighbouring),
            "copies": self.copies,
        }
        if self.copies == 2:
            out.update(
                epsilon1=self.epsilon1,
                epsilon2=self.epsilon2,
                laplace_scale_w=self.scale_w,
                laplace_scale_t=self.scale_t,
                weighting=self.weighting,
                weight_w=self.weight,
            )
        else:
            out["laplace_scale"] = self.scale_z
        if self.clustering is not None:
            out.update(self.clustering.to_dict())
        out["noise_variance_per_coordinate"] = self.noise_variance()
        return out

    def privacy_report(self, n: int | None = None) -> PrivacyReport:
        """Return the worst-case guarantee of every variant: (ε, 0, c)-hDP per user.

        Args:
            n: Number of users the report states (the guarantee does not
                depend on it); ``None``: the protocol's ``n``.

        Raises:
            InvalidParameterError: If ``n`` is not given and the protocol was
                built without one.
        """
        if n is None:
            if self._n is None:
                raise InvalidParameterError(
                    "privacy_report() states the number of users: pass n (privacy_report(n)) "
                    "or build the protocol with n=..."
                )
            n = self._n
        n = check_int(n, "n", minimum=1)
        relation = neighbouring_in_words(self.c, self.neighbouring)
        delta_l1 = normalized_sensitivity(self.c, self.neighbouring)
        sensitivity = (
            f"the L1 sensitivity of H/s under this relation is "
            f"{'2c' if self.neighbouring == 'moved-items' else 'c'} = {delta_l1:g}"
        )
        if self.copies == 2:
            how = (
                f"each user sends W = H/s + Lap({self.scale_w:.6g}) (epsilon1 = "
                f"{self.epsilon1:g}) and T = H/s + Lap({self.scale_t:.6g}) (epsilon2 = "
                f"{self.epsilon2:g}) per class; {sensitivity}, so the pair is "
                "(epsilon1 + epsilon2)-hLDP by basic composition"
            )
            moved_epsilon = hldp_epsilon(self.scale_w, self.c) + hldp_epsilon(self.scale_t, self.c)
        else:
            how = (
                f"each user sends Z = H/s + Lap({self.scale_z:.6g}) per class; {sensitivity}, "
                "so Z is epsilon-hLDP"
            )
            moved_epsilon = hldp_epsilon(self.scale_z, self.c)
        notes = (
            f"{how}; the grouping and the shuffle are post-processing of these local "
            "reports, so the release is (epsilon, 0, c)-hDP for every user whatever the "
            "groups; no amplification by shuffling is claimed here"
        )
        if self.neighbouring == "moved-items":
            notes += (
                "; neighbouring is Def. 1 read as moving up to floor(c s) items (Alg. 1's "
                "Lap(2c/epsilon)), which also covers the reading ||H - H'||_1 <= floor(c s)"
            )
        else:
            notes += (
                "; neighbouring is Def. 1 read as ||H - H'||_1 <= floor(c s) (Lap(c/epsilon)); "
                "if up to floor(c s) items may move between classes (||H - H'||_1 up to "
                f"2 floor(c s)) the same release is only ({moved_epsilon:g}, 0, c)-hDP: the "
                "default neighbouring, moved-items, covers both readings"
            )
        assumptions = [
            f"each user contributes one histogram; neighbouring datasets differ in {relation}",
        ]
        if self.release not in ("laplace-ldp", "laplace-full"):
            assumptions.append(
                "the shuffler is trusted: it sees every user's noisy copies with their "
                "identities and releases only the shuffled sequence"
            )
        if self.release == "oracle":
            assumptions.append(
                "the groups are given labels treated as public and fixed independently of "
                "the users' histograms; the guarantee does not hold if they were derived "
                "from the private data"
            )
        return PrivacyReport(
            guarantee=ApproxDP(self.epsilon, 0.0),
            method=PER_USER_METHOD,
            bound=BoundKind.UPPER,
            n=n,
            neighbouring=f"c-neighbouring histograms (Def. 1 and 3): {relation}",
            parameters=self.parameters(),
            notes=notes,
            assumptions=tuple(assumptions),
        )

    # -- the contract (ShuffleProtocol) --------------------------------------------------------

    def histogram_of(self, values: Counts) -> IntArray:
        """The users' counts, checked (n × d int64): the count-level path's input.

        Raises:
            DataError: On bad counts (naming the user and value), or a number
                of classes other than the protocol's domain.
        """
        h = check_counts(values)
        if self._domain_size is not None and h.shape[1] != self._domain_size:
            raise DataError(
                f"counts have {h.shape[1]} classes per user, the protocol's domain "
                f"{self._domain_size}"
            )
        return h

    def randomize(
        self,
        values: Counts,
        seed: SeedLike = None,
        *,
        true_labels: NDArray[np.integer] | None = None,
    ) -> MessageBatch:
        """Every user's noisy copies, then the grouped shuffler: one message per position.

        The shuffler of Alg. 1 sees who sent what (it groups the users on
        W, lines 9–17), so it runs here, before the uniform shuffle of the
        contract (as augmented's sampling and dummies do): message i carries
        position i and Ĥ_i, the released copy placed there
        (:func:`_slot_messages`), and ``sender[i]`` is the user whose copy it is.

        Args:
            values: n × d counts, one row per user.
            seed: As in :meth:`run`; the same seed gives the same Ĥ as
                :meth:`sample_statistic` and :meth:`run`.
            true_labels: The users' true clusters (``oracle`` only).

        Raises:
            DataError: On bad counts.
            InvalidParameterError: If ``oracle`` lacks ``true_labels``, or G > n.
        """
        released, analysis, _ = self._draw(self.histogram_of(values), seed, true_labels)
        return _slot_messages(released, analysis.permutation)

    def statistic_from_messages(self, shuffled: ShuffledBatch) -> FloatArray:
        """Ĥ in position order: each message's values put back at the position it carries.

        Raises:
            DataError: If the messages are not one (position, d values) row for
                each position 0 … n − 1, or carry another d than the protocol's.
        """
        payload = np.asarray(shuffled.payload)
        if (
            payload.ndim != 2
            or payload.shape[1] < 3
            or payload.shape[0] < 1
            or not np.issubdtype(payload.dtype, np.integer)
        ):
            raise DataError(
                "per-user messages are rows of 1 + d integer words (the position, then the "
                f"d values' float64 bits, d >= 2), got {payload.dtype} of shape {payload.shape}"
            )
        n, d = payload.shape[0], payload.shape[1] - 1
        if self._domain_size is not None and d != self._domain_size:
            raise DataError(
                f"messages carry {d} classes, the protocol's domain {self._domain_size}"
            )
        positions = payload[:, 0]
        seen = np.zeros(n, dtype=np.bool_)
        inside = (positions >= 0) & (positions < n)
        seen[positions[inside]] = True
        if not (inside.all() and seen.all()):
            raise DataError(
                f"the messages must carry each position 0 to {n - 1} once (the release's "
                "order), and they do not"
            )
        out = np.empty((n, d), dtype=np.float64)
        out[positions] = np.ascontiguousarray(payload[:, 1:], dtype=np.int64).view(np.float64)
        return out

    def sample_statistic(
        self,
        histogram: IntArray,
        seed: SeedLike = None,
        *,
        true_labels: NDArray[np.integer] | None = None,
    ) -> FloatArray:
        """Ĥ drawn directly from the users' counts: the noisy copies, grouped and permuted.

        The same draws as :meth:`randomize` from the same seed, without the
        messages.

        Args:
            histogram: n × d counts, one row per user (:meth:`histogram_of`).
            seed: As in :meth:`run`.
            true_labels: The users' true clusters (``oracle`` only).

        Raises:
            DataError: On bad counts.
            InvalidParameterError: If ``oracle`` lacks ``true_labels``, or G > n.
        """
        released, _, _ = self._draw(self.histogram_of(histogram), seed, true_labels)
        return released

    def estimate(
        self, statistic: FloatArray, domain: Sequence[str] | None = None
    ) -> PerUserEstimate:
        """Ĥ_i as user i's histogram, with the released copy's noise standard deviation.

        Args:
            statistic: Ĥ (n × d) in position order.
            domain: The classes' labels (default: the protocol's, if any).

        Raises:
            DataError: If ``statistic`` is not an n × d array of numbers
                (d the protocol's, when fixed).
            InvalidParameterError: If ``domain`` is not d distinct labels.
        """
        stat = np.asarray(statistic)
        if (
            stat.ndim != 2
            or stat.shape[1] < 2
            or not np.issubdtype(stat.dtype, np.floating)
            or (self._domain_size is not None and stat.shape[1] != self._domain_size)
        ):
            expected = "d" if self._domain_size is None else str(self._domain_size)
            raise DataError(
                f"the statistic must be an n x {expected} float array (the released "
                f"histograms), got {stat.dtype} of shape {stat.shape}"
            )
        labels = self.labels
        if domain is not None:
            size, labels = resolve_domain(domain)
            if size != stat.shape[1]:
                raise InvalidParameterError(
                    f"domain has {size} labels, the statistic {stat.shape[1]} classes"
                )
        stderr = np.full(stat.shape[1], math.sqrt(self.noise_variance()))
        return PerUserEstimate(estimates=stat, stderr=stderr, domain=labels)

    def messages_in(self, statistic: FloatArray) -> int:
        """One message per position of the release (the batch :meth:`randomize` returns)."""
        return int(np.asarray(statistic).shape[0])

    def run(
        self,
        values: Counts,
        *,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
        true_labels: NDArray[np.integer] | None = None,
    ) -> PerUserRun:
        """Run the protocol on every user's counts.

        The contract's two paths (:class:`~shuffledp.protocols.base.ShuffleProtocol`):
        ``"message"`` puts the release through :meth:`randomize`'s messages,
        the uniform shuffle and :meth:`statistic_from_messages`; ``"count"``
        draws it as :meth:`sample_statistic` does. Both release the same Ĥ
        from the same seed (the uniform shuffle moves tagged positions).

        Args:
            values: n × d non-negative integer counts, one row per user, each
                with a positive total.
            path: ``"message"`` (default) or ``"count"``.
            seed: ``None``: noise and k-means from OS entropy and a CSPRNG
                shuffle (deployments); an int or a generator: everything
                reproducible, with a seeded (not cryptographic) shuffle.
            true_labels: The users' true clusters (needed by ``oracle``; kept
                in the analysis otherwise).

        Raises:
            DataError: On bad counts (naming the user and value), or a number
                of users or classes other than the protocol's ``n`` and domain.
            InvalidParameterError: On a bad path, if ``oracle`` lacks
                ``true_labels``, or G > n.
        """
        if path not in ("message", "count"):
            raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
        h = self.histogram_of(values)
        n = h.shape[0]
        if self._n is not None and n != self._n:
            raise DataError(
                f"the protocol was built for n={self._n} users but got counts of {n} users"
            )
        released, analysis, shuffle_seed = self._draw(h, seed, true_labels)
        statistic = released
        if path == "message":
            shuffled = UniformShuffler().shuffle(
                _slot_messages(released, analysis.permutation), seed=shuffle_seed
            )
            statistic = self.statistic_from_messages(shuffled)
        report = self.privacy_report(n)
        if seed is not None:  # a seeded run says so in its report
            report = report.with_context(not_covered=(SEEDED_NOT_COVERED,))
        estimate = self.estimate(statistic)
        return PerUserRun(estimates=estimate.estimates, report=report, analysis=analysis, path=path)

    def _draw(
        self, h: IntArray, seed: SeedLike, true_labels: NDArray[np.integer] | None
    ) -> tuple[FloatArray, PerUserAnalysis, np.random.Generator | None]:
        """Ĥ in position order, what made it, and the uniform shuffle's stream.

        ``seed`` gives three streams (the noise, the clustering, the grouped
        shuffle, in this order whatever the path); the uniform shuffle of the
        message path draws from a child of the grouped shuffle's stream
        (``None`` without a seed: the CSPRNG), so the release is the same on both paths.
        """
        n = h.shape[0]
        labels_true: IntArray | None = None
        if true_labels is not None:
            labels_true = np.asarray(true_labels)
            if labels_true.shape != (n,) or not np.issubdtype(labels_true.dtype, np.integer):
                raise InvalidParameterError(
                    f"true_labels must be {n} integer labels, got {labels_true.dtype} "
                    f"{labels_true.shape}"
                )
            labels_true = labels_true.astype(np.int64)
        if self.release == "oracle" and labels_true is None:
            raise InvalidParameterError("release='oracle' needs true_labels")
        normalized = h / h.sum(axis=1, keepdims=True)
        noise_rng, cluster_rng, shuffle_rng = make_rng(seed).spawn(3)
        shuffle_seed: SeedLike = None if seed is None else shuffle_rng
        weight: float | None = None
        if self.copies == 1:
            z = HistogramLaplaceRandomizer(
                self.epsilon, self.c, neighbouring=self.neighbouring
            ).randomize(normalized, noise_rng)
            w = t = r = z
            released = z
        else:
            w = HistogramLaplaceRandomizer(
                self.epsilon1, self.c, neighbouring=self.neighbouring
            ).randomize(normalized, noise_rng)
            t = HistogramLaplaceRandomizer(
                self.epsilon2, self.c, neighbouring=self.neighbouring
            ).randomize(normalized, noise_rng)
            weight = self.weight
            r = weight * w + (1.0 - weight) * t
            released = t if self.released_copy == "t" else r
        if self.release in _CLUSTERED:
            assert self.clustering is not None
            labels = cluster_users(w, self.clustering, cluster_rng)
        elif self.release == "uniform-shuffle":
            labels = np.zeros(n, dtype=np.int64)
        elif self.release == "oracle":
            assert labels_true is not None
            labels = labels_true
        else:  # laplace-ldp, laplace-full: nothing is shuffled
            labels = np.arange(n, dtype=np.int64)
        if self.release in ("laplace-ldp", "laplace-full"):
            perm = np.arange(n, dtype=np.int64)
        else:
            perm = grouped_permutation(labels, shuffle_seed)
        analysis = PerUserAnalysis(
            normalized=normalized,
            w=w,
            t=t,
            r=r,
            released_copy=self.released_copy,
            labels=labels,
            permutation=perm,
            weight=weight,
            true_labels=labels_true,
        )
        uniform_seed = None if seed is None else shuffle_rng.spawn(1)[0]
        return released[perm], analysis, uniform_seed
