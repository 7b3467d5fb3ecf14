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
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.accounting.certificates.augmented import DummyLaw, SAGeoLaw, SBinLaw, check_beta
from shuffledp.data.checks import check_histogram, check_values
from shuffledp.messages import MessageBatch

__all__ = ["DUMMY_SENDER", "AugmentedClient", "AugmentedRandomizer", "sample_dummies"]

IntArray = NDArray[np.int64]

#: ``sender`` of the messages the shuffler adds (real senders are 0..n−1).
DUMMY_SENDER = -1


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
