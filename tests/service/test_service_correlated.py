"""The correlated protocol through real processes: signed messages, noise shares, min_honest.

Clients are seeded (their messages are then reproducible); the tolerances are
variance-derived: the estimate's error in a bin is the users' A − A′ shares,
a difference of two NB(N/m, α) counts with standard deviation
√(2(N/m)α)/(1 − α), and 6 of them hold with probability about 1 − 10⁻⁴ per bin
(the law's tails are geometric, heavier than a normal's).
"""

from __future__ import annotations

import base64
import json
import math
import os
import struct

import httpx
import numpy as np
import pytest
from _deploy import DOMAIN, expected_counts, stored_counts, wait_until
from _message_bounds import assert_release_delta

from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    correlated_delta,
    generic_bin_delta,
)
from shuffledp.cli import main
from shuffledp.schemas import schema_id, validate
from shuffledp.service.client import Submission
from shuffledp.service.shuffler import (
    DEFAULT_MAX_BODY_BYTES,
    submission_body_bytes,
)
from shuffledp.service.task import new_id
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageSealer,
    hpke_info,
    hpke_suite,
    public_key_from_b64,
)

pytestmark = pytest.mark.slow

D = len(DOMAIN)


def _noise(task) -> CorrelatedNoise:
    return CorrelatedNoise(task.spec.alpha, task.spec.flood_r, task.spec.flood_q)


def test_end_to_end_unbiased_and_certified_at_min_batch_users(deploy, tmp_path, capsys):
    dep = deploy("correlated", min_batch_users=100)
    task = dep.task
    rng = np.random.default_rng(31)
    values = [DOMAIN[i] for i in rng.choice(D, size=300, p=[0.4, 0.3, 0.15, 0.1, 0.05])]
    subs = dep.client(seed=13).submit_many(values, per_request=20)
    dep.wait_aggregated(300)

    # Every submission: its value message and a value-independent number of shares.
    counts = [len(s.ciphertexts) for s in subs]
    assert min(counts) >= 1 and max(counts) <= task.max_messages_per_submission
    for sub, value in zip(subs, values, strict=True):
        assert 2 * DOMAIN.index(value) in sub.messages.tolist()
    # The analyzer counts every (bin, sign) message the clients drew, and nothing else.
    statistic = expected_counts(subs, 2 * D)
    assert stored_counts(dep).tolist() == statistic.tolist()
    an = dep.analyzer_metrics()
    assert an["users_aggregated"] == 300 and an["batches_aggregated"] == 3
    assert an.get("messages_undecryptable", 0) == an.get("messages_undecodable", 0) == 0

    release = dep.estimate().json()
    assert release["schema"] == schema_id("correlated-release")
    validate(release)
    plus, minus = statistic[0::2], statistic[1::2]
    assert release["estimate"]["counts"] == (plus - minus).astype(float).tolist()
    assert release["messages"] == statistic.sum() and release["n"] == 300

    # Unbiased within the exact standard deviation of the users' shares.
    truth = np.bincount([DOMAIN.index(v) for v in values], minlength=D)
    alpha = task.spec.alpha
    sd = math.sqrt(2 * 3 * alpha) / (1 - alpha)  # N/m = 3 honest users' worth of noise
    assert release["accuracy"]["per_bin_std"] == pytest.approx(sd, rel=1e-12)
    assert release["estimate"]["stderr"] == pytest.approx([sd] * D, rel=1e-12)
    error = plus - minus - truth
    assert np.all(np.abs(error) <= 6 * sd), error
    assert abs(error.sum()) <= 6 * sd * math.sqrt(D)
    # The flooding cancels: the N- counts carry it, far above the error.
    assert minus.sum() > 10 * sd * D
    # Messages per user: 1 + NB(2d/m, alpha) + 2 NB(dr/m, q), whose standard deviation
    # over 300 users is about 2; a heavy right tail, so 8 of them.
    mean_count = float(np.mean(counts))
    assert abs(mean_count - release["expected_messages_per_user"]) <= 8 * 2.1

    # Certified at min_batch_users users' noise: the exact accountant's delta.
    privacy = release["privacy"]
    assert privacy["n"] == 100 and privacy["parameters"]["min_honest"] == 100
    certified = correlated_delta(1.0, _noise(task))
    assert_release_delta(privacy["delta"], certified, epsilon=1.0, parties=100)
    assert certified < privacy["delta"] <= 1e-6
    assert privacy["method"] == "correlated-exact" and privacy["covers_release"]
    stated = " ".join(privacy["assumptions"])
    assert "at least 100 users who follow the protocol and send all their noise shares" in stated
    assert "tells how much noise its user drew" in stated
    assert release["parameters"]["min_honest"] == 100
    assert release["service"] == {
        "task_id": task.task_id,
        "min_batch_users": 100,
        "batches": 3,
        "smallest_batch_users": 100,
    }

    out = tmp_path / "release.json"
    code = main(
        ["analyzer", "publish", "--task", str(dep.workdir / "task.json"),
         "--store", f"sqlite:///{dep.analyzer_db}", "--output", str(out)]
    )  # fmt: skip
    assert code == 0 and json.loads(out.read_text()) == release
    capsys.readouterr()
    # the backends do not count (bin, sign) messages: export refuses, in one line
    code = main(
        ["analyzer", "export", "--task", str(dep.workdir / "task.json"),
         "--store", f"sqlite:///{dep.analyzer_db}", "--output", str(tmp_path / "ds")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "handles flip and krr tasks, not correlated" in err


def test_hostile_submissions(deploy):
    dep = deploy("correlated", min_batch_users=100)
    task = dep.task
    cap = task.max_messages_per_submission
    key = public_key_from_b64(task.public_key)
    sealer = MessageSealer(key, task.task_id, task.message_domain_size)

    # More messages than an honest client sends but with probability 1e-30: refused.
    plus_zero = sealer.seal(0)
    too_many = dep.post_ciphertexts([plus_zero] * (cap + 1))
    assert too_many.status_code == 400, too_many.text
    assert too_many.json()["reason"] == "invalid_ciphertexts"
    # No message at all: every user sends its value (j, +1).
    empty = dep.post_ciphertexts([])
    assert empty.status_code == 400 and empty.json()["reason"] == "invalid_ciphertexts"

    # Wrong sign encodings: index 2d (no such (bin, sign)), 2^32 - 1, and format version 2.
    # The shuffler cannot read them (it accepts them); the analyzer counts none of them.
    beyond = MessageSealer(key, task.task_id, 2**32)
    version2 = hpke_suite().encrypt(struct.pack(">BI", 2, 1), key, info=hpke_info(task.task_id))
    bad = [beyond.seal(2 * D), beyond.seal(2**32 - 1), version2]
    assert dep.post_ciphertexts(bad).status_code == 200
    # The same ciphertext twice is a copy: refused (400), even below the cap.
    twice = dep.post_ciphertexts([plus_zero] * 2)
    assert twice.status_code == 400 and "a ciphertext repeats" in twice.json()["error"]
    # At the cap, each sealed afresh: accepted, and it moves bin 0 by the whole cap (the
    # poisoning a cap allows).
    assert dep.post_ciphertexts(sealer.seal_all([0] * cap)).status_code == 200

    honest = dep.client(seed=4).submit_many([DOMAIN[i % D] for i in range(98)], per_request=49)
    dep.wait_aggregated(100)
    an = dep.analyzer_metrics()
    assert an["messages_undecodable"] == 3 and an.get("messages_undecryptable", 0) == 0
    expected = expected_counts(honest, 2 * D)
    expected[0] += cap
    assert stored_counts(dep).tolist() == expected.tolist()
    rejected = dep.shuffler_metrics()["rejected"]
    assert rejected["invalid_ciphertexts"] == 3
    clean = expected_counts(honest, 2 * D)
    assert dep.estimate().json()["estimate"]["counts"][0] == clean[0] - clean[1] + cap


def test_an_implausible_batch_is_refused(deploy):
    dep = deploy("correlated", min_batch_users=100)
    task = dep.task

    def batch(n_users: int, n_messages: int) -> dict:
        return {
            "format": "shuffledp-batch/1",
            "task_id": task.task_id,
            "batch_id": new_id(),
            "n_users": n_users,
            "n_messages": n_messages,
            "payload": base64.b64encode(bytes(53 * n_messages)).decode(),
        }

    fewer = dep.post_batch(batch(100, 99))  # every user sends its value message
    assert fewer.status_code == 422 and fewer.json()["reason"] == "implausible_batch"
    more = dep.post_batch(batch(100, 100 * task.max_messages_per_submission + 1))
    assert more.status_code == 422 and more.json()["reason"] == "implausible_batch"


def test_sybils_sending_no_noise_do_not_change_the_certificate(deploy):
    """100 honest users and 100 submissions of the adversary's that carry no noise shares."""
    dep = deploy("correlated", min_batch_users=100)
    task = dep.task
    client = dep.client(seed=9)
    rng = np.random.default_rng(5)
    honest = client.prepare_many([DOMAIN[i] for i in rng.integers(0, D, size=100)])
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, 2 * D)
    sybils = [
        Submission(new_id(), (sealer.seal(0),), np.array([0], dtype=np.int64)) for _ in range(100)
    ]
    client.post(honest + sybils)  # one request: one batch of 200 submissions
    dep.wait_aggregated(200)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="batch sent")
    release = dep.estimate().json()
    assert release["service"]["smallest_batch_users"] == 200 and release["n"] == 200

    # The release is certified for the 100 honest users' noise, as if the sybils were not there.
    noise = _noise(task)
    certified = correlated_delta(1.0, noise)
    assert release["privacy"]["n"] == 100 and release["privacy"]["delta"] <= 1e-6
    assert_release_delta(release["privacy"]["delta"], certified, epsilon=1.0, parties=100)
    # Had the task counted the 200 submissions as honest (each share NB(1/200, .)), the
    # 100 honest users would carry half the noise: delta at epsilon = 1 about 0.27.
    half = generic_bin_delta(
        1.0, alpha=noise.alpha, shape=0.5, flood_r=0.5 * noise.flood_r, flood_q=noise.flood_q
    )
    assert half > 0.2 > 1e5 * certified
    assert (
        stored_counts(dep).tolist()
        == (expected_counts(honest, 2 * D) + np.eye(2 * D, dtype=np.int64)[0] * 100).tolist()
    )


def test_a_submission_at_the_cap_past_4_mib_is_within_the_default_body_limit(deploy):
    """d = 10,000 bins, min_batch_users 100: one user's mean share count is ~61,000 (4.4 MiB).

    The shuffler's default body limit grows to one submission at the task's cap
    (81,641 ciphertexts), so an honest user is never refused for its noise shares.
    """
    domain = [f"v{i}" for i in range(10_000)]
    dep = deploy("correlated", min_batch_users=100, domain=domain)
    task = dep.task
    cap = task.max_messages_per_submission
    limit = submission_body_bytes(cap)
    assert limit > DEFAULT_MAX_BODY_BYTES
    # Distinct ciphertexts (a copy would be refused); random bytes, which the shuffler
    # cannot tell from sealed messages, are enough for the body's size.
    at_cap = dep.post_ciphertexts([os.urandom(CIPHERTEXT_LENGTH) for _ in range(cap)])
    assert at_cap.status_code == 200, at_cap.text
    over = httpx.post(
        dep.submissions_url,
        content=b"x" * (limit + 1),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert over.status_code == 413 and over.json()["reason"] == "body_too_large"
