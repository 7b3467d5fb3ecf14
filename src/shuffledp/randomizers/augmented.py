"""The augmented shuffle protocols' randomness: none at the client, dummies at the shuffler.

Murakami, Sei & Eriguchi, "Augmented Shuffle Protocols for Accurate and Robust
Frequency Estimation under Differential Privacy", arXiv 2504.07362 (the LNF
framework: users send their value without noise; the shuffler samples each
message with probability β and adds dummies).

* :class:`AugmentedClient`: one message per user, carrying its value (in a
  deployment it is encrypted to the analyzer, so the shuffler cannot read it).
* :class:`AugmentedRandomizer`: the shuffler's step. It keeps each message
  independently with probability β and adds, for every bin j, z_j dummy
  messages of value j with z_j i.i.d. from the public dummy law
  (:func:`sample_dummies`). In a deployment the shuffler seals the dummies to
  the analyzer's key, so real and dummy ciphertexts look alike.
* :meth:`AugmentedRandomizer.sample_counts`: the per-bin counts
  c_j = Bin(h_j, β) + z_j drawn directly (the count-level path); the message
  path gives exactly this law.
* The public dummy laws, :class:`SAGeoLaw` and :class:`SBinLaw`, and the
  sampling rate's range (:func:`check_beta`): value types the accountant
  (:mod:`shuffledp.accounting.certificates.augmented`, which re-exports them)
  certifies, so that this module imports nothing of the accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_epsilon, check_int
from shuffledp.data.checks import check_histogram, check_values
from shuffledp.messages import MessageBatch

__all__ = [
    "DUMMY_SENDER",
    "SBIN_MAX_TRIALS",
    "AugmentedClient",
    "AugmentedRandomizer",
    "DummyLaw",
    "SAGeoLaw",
    "SBinLaw",
    "check_beta",
    "minimum_beta",
    "sample_dummies",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: ``sender`` of the messages the shuffler adds (real senders are 0..n−1).
DUMMY_SENDER = -1
#: Largest number of trials M of SBin's Bin(M, 1/2) dummy law.
SBIN_MAX_TRIALS = 10**9


def minimum_beta(epsilon: float) -> float:
    """Return 1 − e^{−ε/2}, the smallest sampling rate β SAGeo allows at ε (computed with expm1).

    Below it q_l = (e^{−ε/2} − 1 + β)/β would be negative: the kept message's
    absence at a zero count could not be hidden.
    """
    return -math.expm1(-check_epsilon(epsilon) / 2.0)


def check_beta(beta: float, epsilon: float | None = None, name: str = "beta") -> float:
    """Return β as a float if it lies in (0, 1] (and, given ε, at least 1 − e^{−ε/2}).

    Args:
        beta: The candidate sampling rate.
        epsilon: The target ε, when the SAGeo lower limit applies.
        name: The parameter name used in the error message.

    Raises:
        InvalidParameterError: Naming the parameter, the value and the allowed range.
    """
    if (
        not isinstance(beta, (int, float, np.floating, np.integer))
        or isinstance(beta, bool)
        or not math.isfinite(float(beta))
        or not 0.0 < float(beta) <= 1.0
    ):
        raise InvalidParameterError(f"{name} must be a number in (0, 1], got {beta!r}")
    beta = float(beta)
    if epsilon is not None:
        low = minimum_beta(epsilon)
        if beta < low:
            shown = math.ceil(low * 1e10) / 1e10  # rounded up: a value typed from it passes
            raise InvalidParameterError(
                f"{name} must be in [1 - e^(-epsilon/2), 1] = [{shown:.10g}, 1] at "
                f"epsilon={epsilon:g} (below it no SAGeo law hides a dropped message), "
                f"got {beta!r}"
            )
    return beta


@dataclass(frozen=True)
class SAGeoLaw:
    """The asymmetric two-sided geometric law SAGeo(ν, q_l, q_r) on {0, 1, 2, …}.

    f(k) = q_l^{ν−k}/Z for 0 ≤ k < ν and q_r^{k−ν}/Z for k ≥ ν, with
    Z = q_l(1 − q_l^ν)/(1 − q_l) + 1/(1 − q_r) (Murakami, Sei & Eriguchi,
    arXiv 2504.07362, the SAGeo dummy-count distribution). q_l = 0 puts all
    the mass on k ≥ ν (S1Geo's law at ν = 0).

    Its normalizer, block masses and log-pmf are the floats the certificate
    evaluates, with error bounds stated for exactly these formulas
    (:mod:`shuffledp.accounting.certificates.augmented`): change them together.

    Attributes:
        nu: The shift ν ≥ 0 (the mode).
        q_left: q_l in [0, 1).
        q_right: q_r in (0, 1).
    """

    nu: int
    q_left: float
    q_right: float

    def __post_init__(self) -> None:
        check_int(self.nu, "nu", minimum=0)
        if not (isinstance(self.q_left, float) and 0.0 <= self.q_left < 1.0):
            raise InvalidParameterError(f"q_left must be a float in [0, 1), got {self.q_left!r}")
        if not (isinstance(self.q_right, float) and 1e-300 < self.q_right < 1.0):
            raise InvalidParameterError(
                f"q_right must be a float in (1e-300, 1), got {self.q_right!r}"
            )

    @property
    def name(self) -> str:
        """``"sageo"``."""
        return "sageo"

    @property
    def left_exponent(self) -> float:
        """ν·|ln q_l| (0 when q_l = 0 or ν = 0): q_l^ν = e^{−ν·|ln q_l|}, and its conditioning."""
        if self.q_left == 0.0 or self.nu == 0:
            return 0.0
        return self.nu * -math.log(self.q_left)

    def _parts(self) -> tuple[float, float, float]:
        """(q_l^ν, 1 − q_l^ν, Σ_{j=1}^{ν} q_l^j), each computed without cancellation."""
        if self.q_left == 0.0:
            return (1.0 if self.nu == 0 else 0.0), (0.0 if self.nu == 0 else 1.0), 0.0
        x = self.left_exponent
        power, rest = math.exp(-x), -math.expm1(-x)
        return power, rest, self.q_left * rest / (1.0 - self.q_left)

    @property
    def normalizer(self) -> float:
        """Z = q_l(1 − q_l^ν)/(1 − q_l) + 1/(1 − q_r)."""
        return self._parts()[2] + 1.0 / (1.0 - self.q_right)

    @property
    def block_masses(self) -> tuple[float, float, float]:
        """(F₀, F_L, F_R): f's mass at 0, on 1..ν and above ν (ν = 0: F₀ = f(0), F_L = 0)."""
        power, rest, _ = self._parts()
        z = self.normalizer
        q_l, q_r = self.q_left, self.q_right
        if self.nu == 0:
            return 1.0 / z, 0.0, q_r / ((1.0 - q_r) * z)
        return power / z, rest / ((1.0 - q_l) * z), q_r / ((1.0 - q_r) * z)

    @property
    def mean(self) -> float:
        """E[z] = ν + (Σ_{w≥0} w·q_r^w − Σ_{j=1}^{ν} j·q_l^j)/Z."""
        return self.nu + self._moments()[0]

    @property
    def variance(self) -> float:
        """Var z, from the two geometric sides' first two moments (closed form on the right)."""
        m1, m2 = self._moments()
        return m2 - m1 * m1

    def _moments(self) -> tuple[float, float]:
        """E[W] and E[W²] for W = z − ν."""
        q_r = self.q_right
        right1 = q_r / (1.0 - q_r) ** 2
        right2 = q_r * (1.0 + q_r) / (1.0 - q_r) ** 3
        left1 = left2 = 0.0
        if self.q_left > 0.0 and self.nu > 0:
            j = np.arange(1, self.nu + 1, dtype=np.float64)
            w = np.exp(j * math.log(self.q_left))
            left1, left2 = float(np.sum(j * w)), float(np.sum(j * j * w))
        z = self.normalizer
        return (right1 - left1) / z, (right2 + left2) / z

    def log_pmf(self, points: NDArray[np.integer]) -> FloatArray:
        """Return ln f(k) at integer points (−inf outside the support)."""
        k = np.asarray(points, dtype=np.float64)
        out = np.full(k.shape, -np.inf)
        log_z = math.log(self.normalizer)
        right = k >= self.nu
        out[right] = (k[right] - self.nu) * math.log(self.q_right) - log_z
        if self.q_left > 0.0:
            left = (k >= 0) & (k < self.nu)
            out[left] = (self.nu - k[left]) * math.log(self.q_left) - log_z
        return out

    def pmf(self, points: NDArray[np.integer]) -> FloatArray:
        """f(k) at integer points (0 outside the support)."""
        return np.exp(self.log_pmf(points))


@dataclass(frozen=True)
class SBinLaw:
    """Bin(M, 1/2) dummies per bin (the paper's SBin-Shuffle).

    Attributes:
        trials: M ≥ 1.
    """

    trials: int

    def __post_init__(self) -> None:
        check_int(self.trials, "trials", minimum=1, maximum=SBIN_MAX_TRIALS)

    @property
    def name(self) -> str:
        """``"sbin"``."""
        return "sbin"

    @property
    def mean(self) -> float:
        """M/2."""
        return self.trials / 2.0

    @property
    def variance(self) -> float:
        """M/4."""
        return self.trials / 4.0

    def pmf(self, points: NDArray[np.integer]) -> FloatArray:
        """P[Bin(M, 1/2) = k] at integer points (0 outside 0..M), from scipy.

        For looking at the law (tests, plots): the certificate evaluates its own
        pmf, with an error bound
        (:func:`shuffledp.accounting.certificates.augmented.dummy_law_pmf`).
        """
        from scipy.stats import binom  # here: importing the randomizer stays light

        out: FloatArray = binom.pmf(np.asarray(points), self.trials, 0.5)
        return out


#: A dummy-count law of the augmented protocols.
DummyLaw = SAGeoLaw | SBinLaw


def sample_dummies(law: DummyLaw, size: int, rng: np.random.Generator) -> IntArray:
    """Draw ``size`` i.i.d. dummy counts from ``law`` (vectorized).

    SAGeo(ν, q_l, q_r): with probability S_R/Z (S_R = 1/(1 − q_r)) the count is
    ν + G, G geometric with P(G = w) = (1 − q_r)q_r^w; otherwise it is ν − J,
    J ∈ {1, …, ν} with P(J = j) ∝ q_l^j, drawn by inverting its distribution
    function: J − 1 = ⌊ln(1 − U(1 − q_l^ν))/ln q_l⌋ for U uniform on [0, 1).
    SBin: Bin(M, 1/2).
    """
    size = check_int(size, "size", minimum=0)
    if isinstance(law, SBinLaw):
        return rng.binomial(law.trials, 0.5, size=size).astype(np.int64)
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
    right = rng.geometric(1.0 - law.q_right, size=size).astype(np.int64) - 1 + law.nu
    if law.q_left == 0.0 or law.nu == 0:
        return right
    s_left = law.normalizer - 1.0 / (1.0 - law.q_right)
    go_left = rng.random(size) < s_left / law.normalizer
    count = int(np.count_nonzero(go_left))
    if count:
        log_q = math.log(law.q_left)
        mass = -math.expm1(law.nu * log_q)  # 1 − q_l^ν
        uniform = rng.random(count)
        offset = np.floor(np.log1p(-uniform * mass) / log_q).astype(np.int64)
        j = 1 + np.clip(offset, 0, law.nu - 1)
        right[go_left] = law.nu - j
    return right


class AugmentedClient:
    """A user's side: one message carrying its value, no noise.

    Args:
        domain_size: d ≥ 2.
    """

    def __init__(self, domain_size: int) -> None:
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)

    def randomize(self, values: NDArray[np.integer]) -> MessageBatch:
        """Every user's message (its value), before the shuffler."""
        arr = check_values(values, self.domain_size)
        n = arr.shape[0]
        return MessageBatch(payload=arr.copy(), sender=np.arange(n, dtype=np.int64), n_users=n)


class AugmentedRandomizer:
    """The shuffler's step: sample each message with probability β, add dummies per bin.

    Args:
        domain_size: d ≥ 2.
        law: The dummy-count law (SAGeo, S1Geo or SBin).
        beta: The sampling rate β in (0, 1].
    """

    def __init__(self, domain_size: int, law: DummyLaw, beta: float = 1.0) -> None:
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)
        if not isinstance(law, (SAGeoLaw, SBinLaw)):
            raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
        self.law = law
        self.beta = check_beta(beta)

    def augment(self, batch: MessageBatch, seed: SeedLike = None) -> MessageBatch:
        """Return the kept messages followed by the dummies (before the uniform shuffle).

        The dummy counts are drawn first, then one keep/drop coin per message in
        order, so a batch with one more message at its end shares every draw
        of the shorter batch (what the poisoning measurement relies on).

        Raises:
            DataError: If a message carries a value outside the domain.
        """
        payload = np.asarray(batch.payload)
        if payload.size and (int(payload.min()) < 0 or int(payload.max()) >= self.domain_size):
            raise DataError(f"a message carries a value outside [0, {self.domain_size - 1}]")
        rng = make_rng(seed)
        dummies = sample_dummies(self.law, self.domain_size, rng)
        kept = np.ones(payload.shape[0], dtype=bool)
        if self.beta != 1.0:
            kept = np.asarray(rng.random(payload.shape[0]) < self.beta, dtype=bool)
        dummy_payload = np.repeat(np.arange(self.domain_size, dtype=np.int64), dummies)
        return MessageBatch(
            payload=np.concatenate([payload[kept].astype(np.int64), dummy_payload]),
            sender=np.concatenate(
                [
                    np.asarray(batch.sender)[kept].astype(np.int64),
                    np.full(dummy_payload.shape[0], DUMMY_SENDER, dtype=np.int64),
                ]
            ),
            n_users=batch.n_users,
        )

    def sample_counts(self, histogram: NDArray[np.integer], seed: SeedLike = None) -> IntArray:
        """Draw c_j = Bin(h_j, β) + z_j for every bin directly (the count-level path).

        Raises:
            DataError: If ``histogram`` is not d non-negative integer counts.
        """
        d = self.domain_size
        hist = check_histogram(histogram, d, users_needed=False)
        rng = make_rng(seed)
        dummies = sample_dummies(self.law, d, rng)
        kept = hist.astype(np.int64) if self.beta == 1.0 else rng.binomial(hist, self.beta)
        return (np.asarray(kept, dtype=np.int64) + dummies).astype(np.int64)
