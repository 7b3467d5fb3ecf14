"""The augmented shuffler's step: sample the real messages, add sealed dummies, shuffle.

Murakami, Sei & Eriguchi, "Augmented Shuffle Protocols for Accurate and
Robust Frequency Estimation under Differential Privacy", arXiv 2504.07362:
in a task with ``protocol`` ``augmented`` the users send their value alone and
the shuffler adds the noise. When it cuts a batch (inside the store's
transaction, in place of :func:`~shuffledp.service.shuffler.permute_messages`),
:class:`DummyAugmenter`

1. keeps each real ciphertext independently with probability β (β < 1 only);
2. draws z_j dummies for every bin j from the task's dummy law
   (:func:`secure_dummy_counts`);
3. seals each dummy, the plaintext of bin j, to the analyzer's public key with
   the same HPKE suite and ``info`` as the clients
   (:class:`~shuffledp.service.wire.MessageSealer`): every message is a fresh
   encapsulation of a 5-byte plaintext, so the analyzer cannot tell a dummy
   from a real message, and the shuffler, which holds no private key, still
   cannot read the real ones;
4. applies one uniformly random permutation to all of them.

Every draw comes from the operating system's CSPRNG (:class:`SecureUniforms`),
afresh for each cut; nothing the shuffler stores or logs tells dummies apart
(the outbox holds the permuted ciphertexts and their number only). Steps 2
and 3 do not depend on the batch, and sealing is the slow part (d·E[z]
encapsulations, a few thousand at d = 100), so the next batch's dummies are
drawn and sealed in a background thread while the current batch fills; the
cut, which holds the store's write transaction, only samples and permutes.
Each set of dummies goes to one batch and is then dropped (held in memory
only, never written). The counts are drawn by inversion of 64-bit uniforms,
whose law differs from the exact one by at most 2⁻⁵³ of each probability (as
numpy's own samplers).
"""

from __future__ import annotations

import math
import secrets
import threading
from concurrent.futures import Future

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.accounting.certificates.augmented import DummyLaw, SAGeoLaw, SBinLaw
from shuffledp.service.task import Task, TaskError
from shuffledp.service.wire import CIPHERTEXT_LENGTH, MessageSealer, public_key_from_b64
from shuffledp.shuffler.uniform import secure_permutation
from shuffledp.specs import AugmentedSpec

__all__ = ["DummyAugmenter", "SecureUniforms", "secure_dummy_counts"]

_TWO_64 = 2.0**64
#: Dummies sealed between two checks that the process is not exiting (about 0.1 s).
_SEAL_CHUNK = 1024


class SecureUniforms:
    """Uniform draws from the operating system's CSPRNG (:func:`secrets.token_bytes`)."""

    def words(self, size: int) -> NDArray[np.uint64]:
        """``size`` independent uniform 64-bit words."""
        size = check_int(size, "size", minimum=0)
        return np.frombuffer(secrets.token_bytes(8 * size), dtype="<u8").astype(np.uint64)

    def open_unit(self, size: int) -> NDArray[np.float64]:
        """Uniforms on (0, 1]: (w + 1)/2⁶⁴ for a 64-bit word w (exact below 2⁻¹¹)."""
        return (self.words(size).astype(np.float64) + 1.0) / _TWO_64

    def unit(self, size: int) -> NDArray[np.float64]:
        """Uniforms on [0, 1]: w/2⁶⁴ (1 only by the rounding of w near 2⁶⁴)."""
        return self.words(size).astype(np.float64) / _TWO_64

    def bernoulli(self, p: float, size: int) -> NDArray[np.bool_]:
        """``size`` independent coins, each true with probability ⌊p·2⁶⁴⌋/2⁶⁴ (exact at 0, 1)."""
        if not 0.0 <= p <= 1.0:
            raise InvalidParameterError(f"p must be in [0, 1], got {p!r}")
        if p == 1.0:
            return np.ones(size, dtype=bool)
        threshold = np.uint64(math.floor(p * _TWO_64))
        return self.words(size) < threshold

    def binomial_half(self, trials: int, size: int) -> NDArray[np.int64]:
        """``size`` independent Bin(trials, 1/2): the ones among ``trials`` random bits."""
        trials = check_int(trials, "trials", minimum=0)
        size = check_int(size, "size", minimum=0)
        bits = np.unpackbits(np.frombuffer(secrets.token_bytes(-(-trials * size // 8)), np.uint8))
        counts: NDArray[np.int64] = (
            bits[: trials * size].reshape(size, trials).sum(axis=1, dtype=np.int64)
        )
        return counts


def secure_dummy_counts(
    law: DummyLaw, size: int, source: SecureUniforms | None = None
) -> NDArray[np.int64]:
    """Draw ``size`` i.i.d. dummy counts from ``law`` with CSPRNG uniforms.

    SAGeo(ν, q_l, q_r) (:class:`~shuffledp.accounting.certificates.augmented.SAGeoLaw`): with
    probability (Z − S_L)/Z, S_L = Σ_{j=1}^{ν} q_l^j, the count is ν + G with
    G = ⌊ln U/ln q_r⌋, U uniform on (0, 1] (so P[G ≥ w] = q_r^w); otherwise
    ν − J, J ∈ {1, …, ν} with P[J = j] ∝ q_l^j, J − 1 = ⌊ln(1 − V(1 − q_l^ν))/ln q_l⌋
    for V uniform on [0, 1]. SBin: Bin(M, 1/2), the number of ones among M
    random bits (exact).

    Args:
        law: The task's dummy law.
        size: Number of counts (one per bin).
        source: The CSPRNG (default: a new :class:`SecureUniforms`).
    """
    size = check_int(size, "size", minimum=0)
    rand = SecureUniforms() if source is None else source
    if isinstance(law, SBinLaw):
        return rand.binomial_half(law.trials, size)
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
    with np.errstate(divide="ignore"):
        right = np.floor(np.log(rand.open_unit(size)) / math.log(law.q_right))
    counts = law.nu + right.astype(np.int64)
    if law.q_left == 0.0 or law.nu == 0:
        return counts
    s_left = law.normalizer - 1.0 / (1.0 - law.q_right)
    left = rand.bernoulli(s_left / law.normalizer, size)
    chosen = int(np.count_nonzero(left))
    if chosen:
        log_q = math.log(law.q_left)
        mass = -math.expm1(law.nu * log_q)  # 1 − q_l^ν without cancellation
        with np.errstate(divide="ignore"):
            offset = np.floor(np.log1p(-rand.unit(chosen) * mass) / log_q).astype(np.int64)
        counts[left] = law.nu - (1 + np.clip(offset, 0, law.nu - 1))
    return counts


class DummyAugmenter:
    """The permutation of an augmented task's batch: β-sampling, sealed dummies, one shuffle.

    Called by the store with the concatenated ciphertexts of the batch's
    submissions (one or none each); returns the batch's payload. Holds the
    analyzer's public key only.

    Args:
        task: An augmented task.

    Raises:
        TaskError: If the task is not an augmented one.
    """

    def __init__(self, task: Task) -> None:
        spec = task.spec
        if not isinstance(spec, AugmentedSpec):
            raise TaskError(f"a {task.protocol} task has no dummies")
        self.law = spec.dummy_law()
        self.beta = spec.beta
        self.domain_size = task.domain_size
        self._sealer = MessageSealer(
            public_key_from_b64(task.public_key), task.task_id, task.domain_size
        )
        self._source = SecureUniforms()
        self._lock = threading.Lock()
        self._next = self._prepare()

    def dummies(self) -> NDArray[np.uint8]:
        """One batch's dummies: z_j sealed messages of every bin j, one row each."""
        counts = secure_dummy_counts(self.law, self.domain_size, SecureUniforms())
        bins = np.repeat(np.arange(self.domain_size, dtype=np.int64), counts)
        sealed = bytearray()
        for start in range(0, bins.shape[0], _SEAL_CHUNK):
            # The sealing thread is not a daemon (one killed inside the HPKE library at
            # exit aborts the process): it stops once the main thread has finished.
            if not threading.main_thread().is_alive():
                raise RuntimeError("the process is exiting: the dummies are abandoned")
            sealed += b"".join(self._sealer.seal_all(bins[start : start + _SEAL_CHUNK].tolist()))
        return np.frombuffer(bytes(sealed), dtype=np.uint8).reshape(-1, CIPHERTEXT_LENGTH)

    def _prepare(self) -> Future[NDArray[np.uint8]]:
        """Start drawing and sealing the next batch's dummies in a background thread."""
        future: Future[NDArray[np.uint8]] = Future()

        def run() -> None:
            try:
                future.set_result(self.dummies())
            except BaseException as exc:  # handed to the cut that waits for them
                future.set_exception(exc)

        threading.Thread(target=run, name="augmented-dummies").start()
        return future

    def __call__(self, payload: bytes) -> bytes:
        """Sample, add the dummies and permute (see the module docstring).

        Waits for the dummies being sealed if they are not ready yet, and
        starts sealing the next batch's; a failure to draw or seal them
        fails this cut (the store's transaction rolls back).
        """
        with self._lock:  # one sealing thread at a time
            try:
                dummies = self._next.result()
            finally:
                self._next = self._prepare()
        real = np.frombuffer(payload, dtype=np.uint8).reshape(-1, CIPHERTEXT_LENGTH)
        if self.beta < 1.0:
            real = real[self._source.bernoulli(self.beta, real.shape[0])]
        rows = np.concatenate([real, dummies])
        return bytes(rows[secure_permutation(rows.shape[0])].tobytes())
