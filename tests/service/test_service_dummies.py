"""The augmented shuffler's step on its own: CSPRNG dummy laws, sealing, sampling, permutation.

The draws come from the operating system's CSPRNG and cannot be seeded, so
every statistical check has a tolerance exceeded with probability below about
10⁻⁶ when the sampler follows its law (chi-square p-value > 10⁻⁶; counts
within 6 standard deviations).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from scipy.stats import chisquare

from shuffledp.accounting.certificates.augmented import SBinLaw, s1geo_law, sageo_law
from shuffledp.service.augment import DummyAugmenter, SecureUniforms, secure_dummy_counts
from shuffledp.service.client import Client
from shuffledp.service.task import TaskError, create_task
from shuffledp.service.wire import CIPHERTEXT_LENGTH, MessageOpener

DOMAIN = ["a", "b", "c", "d", "e"]
DRAWS = 200_000


def _chi_square_p(draws: np.ndarray, pmf) -> float:
    """Chi-square p-value of draws against a pmf, the cells with expectation < 20 pooled."""
    top = int(draws.max())
    support = np.arange(0, top + 1)
    expected = DRAWS * pmf(support)
    observed = np.bincount(draws, minlength=top + 1).astype(float)
    expected = np.append(expected, DRAWS - expected.sum())  # the mass beyond the largest draw
    observed = np.append(observed, 0.0)
    keep = expected >= 20
    pooled_e, pooled_o = expected[keep], observed[keep]
    if expected[~keep].sum() > 1e-6:
        pooled_e = np.append(pooled_e, expected[~keep].sum())
        pooled_o = np.append(pooled_o, observed[~keep].sum())
    return float(chisquare(pooled_o, pooled_e * pooled_o.sum() / pooled_e.sum()).pvalue)


@pytest.mark.parametrize(
    "law",
    [
        sageo_law(1.0, 1.0, 25),  # beta = 1: q_l = q_r
        sageo_law(1.0, 0.7, 15),  # beta < 1: q_l != q_r
        sageo_law(4.0, 1.0, 3),  # a short left side
        s1geo_law(1.0)[0],  # nu = 0, q_l = 0: the right side only
        SBinLaw(148),
    ],
    ids=["sageo", "sageo-beta", "sageo-eps4", "s1geo", "sbin"],
)
def test_secure_dummy_counts_follow_the_law(law):
    draws = secure_dummy_counts(law, DRAWS)
    assert draws.dtype == np.int64 and draws.min() >= 0
    assert _chi_square_p(draws, law.pmf) > 1e-6
    assert abs(draws.mean() - law.mean) <= 6 * np.sqrt(law.variance / DRAWS)


def test_secure_uniforms():
    source = SecureUniforms()
    coins = source.bernoulli(0.7, DRAWS)
    assert abs(coins.mean() - 0.7) <= 6 * np.sqrt(0.21 / DRAWS)
    assert source.bernoulli(1.0, 10).all() and not source.bernoulli(0.0, 10).any()
    unit = source.open_unit(DRAWS)
    assert unit.min() > 0 and unit.max() <= 1
    assert abs(unit.mean() - 0.5) <= 6 * np.sqrt(1 / 12 / DRAWS)
    half = source.binomial_half(3, DRAWS)
    assert _chi_square_p(half, SBinLaw(3).pmf) > 1e-6
    # two calls never repeat (64-bit words from the OS)
    assert len(set(source.words(1000).tolist()) | set(source.words(1000).tolist())) == 2000


@pytest.fixture(scope="module")
def tasks():
    return {
        "sageo": create_task("augmented", DOMAIN, 1.0, 1e-6, 100),
        "beta": create_task("augmented", DOMAIN, 1.0, 1e-6, 100, beta=0.5),
    }


def _client_payload(task, n=100):
    client = Client(task, "http://127.0.0.1:9")
    subs = client.prepare_many([DOMAIN[i % 5] for i in range(n)])
    client.close()
    return subs, b"".join(s.ciphertexts[0] for s in subs)


def _rows(payload: bytes) -> list[bytes]:
    return [payload[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(payload), CIPHERTEXT_LENGTH)]


def test_the_augmenter_adds_sealed_dummies_the_analyzer_reads_like_real_messages(tasks):
    task, key = tasks["sageo"]
    subs, payload = _client_payload(task)
    out = DummyAugmenter(task)(payload)
    rows = _rows(out)
    real = [s.ciphertexts[0] for s in subs]
    assert set(real) <= set(rows)  # beta = 1: every real message kept
    dummies = [r for r in rows if r not in set(real)]
    assert len(rows) == 100 + len(dummies) and len(dummies) <= task.max_dummies_per_batch()
    opener = MessageOpener(key, task.task_id, task.domain_size)
    opened = opener.open_payload(out)
    assert opened.undecryptable == opened.undecodable == 0  # same key, info and format
    truth = np.bincount([i % 5 for i in range(100)], minlength=5)
    z = np.bincount(opened.indices, minlength=5) - truth
    assert z.min() >= 0 and z.sum() == len(dummies)
    # every message is a fresh encapsulation: no encapsulated key repeats
    assert len({r[:32] for r in rows}) == len(rows)
    # the real messages are spread over the batch, not gathered at one end
    positions = np.array([rows.index(c) for c in real]) / (len(rows) - 1)
    assert abs(positions.mean() - 0.5) <= 6 * np.sqrt(1 / 12 / 100)


def test_the_augmenter_keeps_each_message_with_probability_beta(tasks):
    task, _ = tasks["beta"]
    subs, payload = _client_payload(task, 400)
    rows = _rows(DummyAugmenter(task)(payload))
    real = {s.ciphertexts[0] for s in subs}
    kept = sum(1 for r in rows if r in real)
    assert abs(kept - 200) <= 6 * np.sqrt(400 * 0.25)


def test_the_augmenter_is_for_augmented_tasks_only():
    task, _ = create_task("krr", DOMAIN, 1.0, 1e-6, 100)
    with pytest.raises(TaskError, match="no dummies"):
        DummyAugmenter(task)


def test_dummies_are_sealed_outside_the_cut_and_each_set_goes_to_one_batch(tasks):
    """The cut holds the store's write transaction: it only samples and permutes."""
    task, _ = tasks["sageo"]
    subs, payload = _client_payload(task)
    real = {s.ciphertexts[0] for s in subs}
    augmenter = DummyAugmenter(task)
    sealer = augmenter._sealer
    threads: list[str] = []

    class Recording:
        def seal_all(self, indices):
            threads.append(threading.current_thread().name)
            return sealer.seal_all(indices)

    class Broken:
        def seal_all(self, indices):
            raise RuntimeError("sealing failed")

    augmenter._next.result(timeout=60)
    augmenter._sealer = Recording()
    first, second = set(_rows(augmenter(payload))), set(_rows(augmenter(payload)))
    augmenter._next.result(timeout=60)
    assert threads == ["augmented-dummies"] * 2  # the two after the first, none in a cut
    assert (first - real) and (second - real) and not (first - real) & (second - real)

    # A failure to seal fails the cut that needs those dummies; the one after it recovers.
    augmenter._sealer = Broken()
    assert real <= set(_rows(augmenter(payload)))  # its dummies were sealed before
    with pytest.raises(RuntimeError, match="sealing failed"):
        augmenter(payload)
    assert augmenter._next.exception(timeout=60) is not None
    augmenter._sealer = sealer
    with pytest.raises(RuntimeError, match="sealing failed"):
        augmenter(payload)
    assert real <= set(_rows(augmenter(payload)))


def test_a_process_exiting_while_dummies_are_sealed_exits_cleanly_at_once():
    """d = 1,000: the first batch's ~26,000 dummies take about 2 s to seal, from construction.

    The sealing thread stops at its next chunk once the main thread is done (a
    daemon thread killed inside the HPKE library at exit aborted the process).
    """
    code = (
        "from shuffledp.service.augment import DummyAugmenter\n"
        "from shuffledp.service.task import create_task\n"
        "task, _ = create_task('augmented', [f'v{i}' for i in range(1000)], 1.0, 1e-6, 100)\n"
        "import time; augmenter = DummyAugmenter(task); time.sleep(0.3)\n"
        "assert not augmenter._next.done()\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30
