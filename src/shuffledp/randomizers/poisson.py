"""The segmented protocol's client randomizer: Poisson item reports plus blanket messages.

Wang et al., "Segmented private data aggregation in the multi-message shuffle
model", arXiv 2407.19639, Alg. 2 lines 9–16 (Eq. 2). A user at level k holds s item slots (its
set, sampled or padded to s items; index d of the message domain is the
padding symbol when padding is on). For every slot it

* sends the slot's item with probability λ_k (Eq. 2), and otherwise nothing
  (``variant="paper"``) or one uniformly random item of the message domain
  [0, d′) (``variant="dummy"``, so that every user sends exactly s data
  messages), then
* makes ⌈m⌉ blanket tries, each sending a uniform item of [0, d′) with
  probability γ = m/⌈m⌉ (lines 13–16).

Messages carry only the item index: not the level, not the slot.

Two ways to draw the analyzer's statistic (the number of messages on each item):

* :meth:`PoissonSetRandomizer.randomize`: real messages with their senders
  (vectorized over users in chunks, no per-user Python loop);
* :meth:`PoissonSetRandomizer.sample_counts`: the counts drawn directly from
  their exact law: Bin(a_{k,x}, λ_k) data messages for the a_{k,x} slots of
  level k holding item x, and one multinomial for the blanket messages
  (N ~ Bin(n⌈m⌉, γ)) and, for ``"dummy"``, the dummy items (one per slot not
  reported), spread uniformly over [0, d′).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from shuffledp._progress import progress
from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.messages import MessageBatch

__all__ = ["PoissonSetRandomizer", "check_items", "check_levels", "pair_histogram"]

IntArray = NDArray[np.int64]

#: Users randomized per vectorized step (bounds temporary memory).
DEFAULT_CHUNK = 1 << 18


def check_items(items: NDArray[np.integer], message_domain: int, items_per_user: int) -> None:
    """Check a users × s matrix of item slots.

    Raises:
        DataError: If ``items`` is not a non-empty two-dimensional integer array
            with s columns, or holds an index outside ``[0, message_domain)``.
    """
    if not isinstance(items, np.ndarray) or items.ndim != 2:
        shape = getattr(items, "shape", None)
        raise DataError(
            f"user_items must be a two-dimensional array (users x items_per_user), got shape "
            f"{shape}"
        )
    if items.shape[0] == 0:
        raise DataError("user_items is empty: at least one user is needed")
    if items.shape[1] != items_per_user:
        raise DataError(
            f"user_items has {items.shape[1]} item slots per user, the protocol "
            f"items_per_user={items_per_user}"
        )
    if not np.issubdtype(items.dtype, np.integer):
        raise DataError(f"user_items must hold integer item indices, got dtype {items.dtype}")
    lo, hi = int(items.min()), int(items.max())
    if lo < 0 or hi >= message_domain:
        bad = lo if lo < 0 else hi
        count = int(np.count_nonzero((items < 0) | (items >= message_domain)))
        raise DataError(
            f"user_items holds {count:,} item index(es) outside [0, {message_domain - 1}], "
            f"e.g. {bad}"
        )


def check_levels(levels: NDArray[np.integer], n_levels: int, n_users: int) -> None:
    """Check one level index in ``[0, n_levels)`` per user.

    Raises:
        DataError: If the array is not one-dimensional integers of length
            ``n_users`` or holds an index outside the levels.
    """
    if not isinstance(levels, np.ndarray) or levels.ndim != 1:
        raise DataError(
            "user_levels must be a one-dimensional array, got shape "
            f"{getattr(levels, 'shape', None)}"
        )
    if levels.shape[0] != n_users:
        raise DataError(f"user_levels has {levels.shape[0]} entries for {n_users} users")
    if not np.issubdtype(levels.dtype, np.integer):
        raise DataError(f"user_levels must hold integer level indices, got dtype {levels.dtype}")
    if n_users and (int(levels.min()) < 0 or int(levels.max()) >= n_levels):
        count = int(np.count_nonzero((levels < 0) | (levels >= n_levels)))
        raise DataError(
            f"user_levels holds {count:,} level index(es) outside [0, {n_levels - 1}] "
            f"({n_levels} levels)"
        )


def pair_histogram(
    items: NDArray[np.integer],
    levels: NDArray[np.integer],
    n_levels: int,
    message_domain: int,
    *,
    chunk_size: int = 1 << 20,
) -> IntArray:
    """Return a_{k,x}: the number of item slots of level-k users holding item x (K × d′).

    Computed in chunks of users, so the temporary index array stays small.
    """
    out = np.zeros(n_levels * message_domain, dtype=np.int64)
    s = items.shape[1]
    for start in range(0, items.shape[0], chunk_size):
        block = items[start : start + chunk_size].astype(np.int64)
        lev = levels[start : start + chunk_size].astype(np.int64)
        keys = (lev[:, None] * message_domain + block).ravel()
        out += np.bincount(keys, minlength=n_levels * message_domain)
        del block, keys
    table: IntArray = out.reshape(n_levels, message_domain)
    assert int(table.sum()) == items.shape[0] * s
    return table


class PoissonSetRandomizer:
    """R_k of Eq. 2 for every level plus R_blanket(m) (Alg. 2 lines 9–16).

    Args:
        report_probabilities: λ_k per level, each in [0, 1].
        message_domain: d′, the values a message can carry (the domain, plus
            the padding symbol d when padding is on).
        items_per_user: s, item slots per user.
        blanket_rate: m > 0, the expected blanket messages per user.
        variant: ``"paper"`` (an unreported slot sends nothing) or
            ``"dummy"`` (it sends a uniform item of [0, d′)).

    Raises:
        InvalidParameterError: On a bad parameter.
    """

    def __init__(
        self,
        report_probabilities: Sequence[float],
        message_domain: int,
        items_per_user: int,
        blanket_rate: float,
        variant: str = "paper",
    ) -> None:
        lams = np.asarray([float(x) for x in report_probabilities], dtype=np.float64)
        if lams.ndim != 1 or lams.size == 0:
            raise InvalidParameterError("report_probabilities must name at least one level")
        if not np.all(np.isfinite(lams)) or np.any(lams < 0) or np.any(lams > 1):
            raise InvalidParameterError(
                f"report_probabilities must lie in [0, 1], got {lams.tolist()}"
            )
        if not (isinstance(blanket_rate, (int, float)) and math.isfinite(blanket_rate)):
            raise InvalidParameterError(
                f"blanket_rate must be a finite number, got {blanket_rate!r}"
            )
        if blanket_rate <= 0:
            raise InvalidParameterError(f"blanket_rate m must be > 0, got {blanket_rate!r}")
        if variant not in ("paper", "dummy"):
            raise InvalidParameterError(f"variant must be 'paper' or 'dummy', got {variant!r}")
        self.report_probabilities = lams
        self.message_domain = check_int(message_domain, "message_domain", minimum=2)
        self.items_per_user = check_int(items_per_user, "items_per_user", minimum=1)
        self.blanket_rate = float(blanket_rate)
        self.blanket_tries = math.ceil(self.blanket_rate)
        self.blanket_probability = self.blanket_rate / self.blanket_tries
        self.variant = variant

    @property
    def n_levels(self) -> int:
        """K, the number of levels."""
        return int(self.report_probabilities.size)

    def expected_messages_per_user(
        self, level_counts: Sequence[int] | NDArray[np.integer]
    ) -> float:
        """E[messages per user]: m + s·Σ_k n_k λ_k/n (paper) or m + s (dummy)."""
        counts = np.asarray(level_counts, dtype=np.float64)
        n = float(counts.sum())
        if self.variant == "dummy":
            return self.blanket_rate + self.items_per_user
        data = self.items_per_user * float(counts @ self.report_probabilities) / n
        return self.blanket_rate + data

    def _chunk(
        self,
        items: NDArray[np.integer],
        levels: NDArray[np.integer],
        first: int,
        rng: np.random.Generator,
    ) -> tuple[IntArray, IntArray]:
        users, s = items.shape
        d = self.message_domain
        lam = self.report_probabilities[levels]
        sent = rng.random((users, s)) < lam[:, None]
        if self.variant == "paper":
            rows, cols = np.nonzero(sent)
            data_payload = items[rows, cols].astype(np.int64)
            data_sender = rows.astype(np.int64)
        else:
            dummies = rng.integers(0, d, size=(users, s), dtype=np.int64)
            data_payload = np.where(sent, items, dummies).astype(np.int64).ravel()
            data_sender = np.repeat(np.arange(users, dtype=np.int64), s)
        tries = rng.binomial(self.blanket_tries, self.blanket_probability, size=users)
        blanket_sender = np.repeat(np.arange(users, dtype=np.int64), tries)
        blanket_payload = rng.integers(0, d, size=blanket_sender.size, dtype=np.int64)
        payload = np.concatenate([data_payload, blanket_payload])
        sender = np.concatenate([data_sender, blanket_sender]) + first
        return payload, sender

    def randomize(
        self,
        items: NDArray[np.integer],
        levels: NDArray[np.integer],
        seed: SeedLike = None,
        *,
        chunk_size: int = DEFAULT_CHUNK,
    ) -> MessageBatch:
        """Run every user's randomizer; return the messages (with senders) before the shuffle.

        The batch lists data messages before blanket messages chunk by chunk;
        the order carries no meaning once shuffled.

        Args:
            items: users × s item indices in ``[0, d′)``.
            levels: Level index of each user in ``[0, K)``.
            seed: Randomness (see :func:`shuffledp._rng.make_rng`).
            chunk_size: Users per vectorized step.

        Raises:
            DataError: On a malformed ``items`` or ``levels``.
        """
        check_items(items, self.message_domain, self.items_per_user)
        n = items.shape[0]
        check_levels(levels, self.n_levels, n)
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        rng = make_rng(seed)
        payloads: list[IntArray] = []
        senders: list[IntArray] = []
        for start in progress(
            range(0, n, chunk_size), total=-(-n // chunk_size), desc="randomizing", delay=1.0
        ):
            stop = min(n, start + chunk_size)
            payload, sender = self._chunk(items[start:stop], levels[start:stop], start, rng)
            payloads.append(payload)
            senders.append(sender)
        return MessageBatch(
            payload=np.concatenate(payloads), sender=np.concatenate(senders), n_users=n
        )

    def randomize_one(self, items: Sequence[int], level: int, seed: SeedLike = None) -> IntArray:
        """Return one user's messages (item indices), sorted so that their order says nothing.

        This is the client-side call of a deployment.
        """
        row = np.asarray([list(items)], dtype=np.int64)
        batch = self.randomize(row, np.array([level], dtype=np.int64), seed)
        return np.sort(batch.payload)

    def sample_counts(
        self,
        pairs: NDArray[np.integer],
        seed: SeedLike = None,
    ) -> IntArray:
        """Draw the messages per item directly (the count-level path).

        C_x = Σ_k Bin(a_{k,x}, λ_k) + (blanket and dummy messages on x), where
        the blanket and dummy messages are Multinomial(N + D, uniform on [0, d′)),
        N ~ Bin(n⌈m⌉, γ) and D = Σ_k (n_k·s − reported slots of level k) for
        ``"dummy"`` (0 for ``"paper"``): the exact law of the message path's
        ``bincount``.

        Args:
            pairs: a_{k,x}, the K × d′ slot counts (:func:`pair_histogram`);
                each row sums to n_k·s.
            seed: Randomness.

        Raises:
            DataError: If ``pairs`` has the wrong shape, negative entries, or a
                row that is not a multiple of s.
        """
        a = np.asarray(pairs)
        k, d = self.n_levels, self.message_domain
        if a.shape != (k, d) or not np.issubdtype(a.dtype, np.integer):
            raise DataError(f"pairs must be {k} x {d} integer slot counts, got shape {a.shape}")
        if np.any(a < 0):
            raise DataError("pairs must be >= 0")
        slots = a.sum(axis=1)
        if np.any(slots % self.items_per_user):
            raise DataError(
                f"each level's slot count must be a multiple of items_per_user="
                f"{self.items_per_user}, got {slots.tolist()}"
            )
        n = int(slots.sum()) // self.items_per_user
        if n == 0:
            raise DataError("pairs hold no user")
        rng = make_rng(seed)
        reported = rng.binomial(a.astype(np.int64), self.report_probabilities[:, None])
        counts = reported.sum(axis=0).astype(np.int64)
        noise = int(rng.binomial(n * self.blanket_tries, self.blanket_probability))
        if self.variant == "dummy":
            noise += int(slots.sum() - reported.sum())
        counts += rng.multinomial(noise, np.full(d, 1.0 / d)).astype(np.int64)
        out: IntArray = counts
        return out
