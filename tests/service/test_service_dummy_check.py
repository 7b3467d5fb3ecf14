"""The analyzer refuses an augmented batch without the shuffler's dummies (issue 24 §4.2).

Before the check, a batch posted with the forward token holding the users'
messages alone was aggregated and published with the usual (ε, δ). Now a batch
of n users needs at least L(n) messages, the count an honest batch falls below
with probability at most 10⁻³⁰; L(n) is checked here against the exact law in
50-digit arithmetic, against the shuffler's own sampler, and end to end.
"""

from __future__ import annotations

import base64
import math

import mpmath
import numpy as np
import pytest
from _deploy import DOMAIN

from shuffledp.accounting.certificates.augmented import SAGeoLaw, SBinLaw
from shuffledp.service._server import RejectedError
from shuffledp.service.analyzer import parse_batch
from shuffledp.service.augment import SecureUniforms, secure_dummy_counts
from shuffledp.service.dummy_check import (
    DUMMY_CHECK_TAIL,
    chernoff_log_lower_tail,
    fewest_honest_messages,
    honest_lower_tail,
    task_fewest_messages,
)
from shuffledp.service.task import create_task, new_id
from shuffledp.service.wire import MessageSealer, public_key_from_b64

mpmath.mp.dps = 50
_TASKS: dict[tuple, object] = {}


def _task(d: int, **options):
    key = (d, tuple(sorted(options.items())))
    if key not in _TASKS:
        _TASKS[key] = create_task(
            "augmented", [f"v{i}" for i in range(d)], 1.0, 1e-6, 100, **options
        )[0]
    return _TASKS[key]


def _exact_law(law, top: int) -> list:
    """The dummy law on {0, ..., top} in 50-digit arithmetic, from the law's float parameters."""
    if isinstance(law, SBinLaw):
        return [
            mpmath.binomial(law.trials, k) / mpmath.mpf(2) ** law.trials for k in range(top + 1)
        ]
    q_l, q_r = mpmath.mpf(law.q_left), mpmath.mpf(law.q_right)
    nu = law.nu
    left = sum(q_l**j for j in range(1, nu + 1)) if q_l > 0 else mpmath.mpf(0)
    z = left + 1 / (1 - q_r)
    return [(q_l ** (nu - k) if k < nu else q_r ** (k - nu)) / z for k in range(top + 1)]


def _convolve(a: list, b: list, top: int) -> list:
    return [sum(a[i] * b[k - i] for i in range(k + 1)) for k in range(top + 1)]


def _exact_cdf(law, d: int, beta: float, n: int, top: int) -> list:
    """P[T <= k], k = 0..top, T = Bin(n, beta) + d dummy counts, in 50-digit arithmetic."""
    f = _exact_law(law, top)
    z = [mpmath.mpf(1)] + [mpmath.mpf(0)] * top
    for _ in range(d):
        z = _convolve(z, f, top)
    b = mpmath.mpf(beta)
    kept = [
        mpmath.binomial(n, r) * b**r * (1 - b) ** (n - r) if r <= n else mpmath.mpf(0)
        for r in range(top + 1)
    ]
    total = _convolve(kept, z, top)
    out, running = [], mpmath.mpf(0)
    for value in total:
        running += value
        out.append(running)
    return out


@pytest.mark.parametrize(
    ("d", "options", "n"),
    [
        (5, {}, 0),  # beta = 1: T = n + Z, the bound on Z alone
        (8, {}, 0),
        (3, {"beta": 0.7}, 6),
        (2, {"variant": "sbin"}, 0),
        (3, {"variant": "s1geo"}, 4),
    ],
    ids=["sageo-d5", "sageo-d8", "sageo-beta0.7", "sbin-d2", "s1geo"],
)
def test_the_bound_is_the_exact_quantile_of_the_honest_law(d, options, n):
    task = _task(d, **options)
    law, beta = task.dummy_law(), task.spec.beta
    fewest, method = fewest_honest_messages(law, d, beta, n)
    assert method == "exact"
    top = fewest + 2
    exact = _exact_cdf(law, d, beta, n, top)
    computed = honest_lower_tail(law, d, beta, n, top)
    for k in range(top + 1):  # an upper bound, tight to a millionth
        assert computed[k] >= exact[k]
        assert computed[k] <= exact[k] * (1 + 1e-6) + 1e-270
    # L is the exact 1e-30 quantile: an honest batch falls below it with probability
    # at most 1e-30, and at L itself the tail is already above it.
    if fewest > 0:
        assert exact[fewest - 1] <= DUMMY_CHECK_TAIL
    assert exact[fewest] > DUMMY_CHECK_TAIL
    # Chernoff's bound (used beyond the exact limit) is above the exact tail.
    for k in range(top + 1):
        assert chernoff_log_lower_tail(law, d, beta, n, k) >= float(mpmath.log(exact[k])) - 1e-9


def test_which_batches_without_dummies_are_refused():
    """A batch of its users' messages alone (n of them) is refused iff L(n) > n."""
    n = 100
    refused = {
        (d, name): task_fewest_messages(_task(d, **options), n) > n
        for d in (3, 5, 8)
        for name, options in (
            ("sageo", {}),
            ("s1geo", {"variant": "s1geo"}),
            ("sbin", {"variant": "sbin"}),
        )
    }
    # SAGeo at epsilon 1, delta 1e-6 (f(0) = 9.1e-7): no dummy at all with probability
    # f(0)^d, 7.6e-19 at d = 3 (not refusable at 1e-30), 6.3e-31 at d = 5, 4.8e-49 at d = 8.
    assert [refused[(d, "sageo")] for d in (3, 5, 8)] == [False, True, True]
    assert not any(refused[(d, "s1geo")] for d in (3, 5, 8))  # few dummies: f(0) = 0.62
    assert all(refused[(d, "sbin")] for d in (3, 5, 8))  # 2^(-dM)
    assert task_fewest_messages(_task(5), n) == n + 1
    assert task_fewest_messages(_task(8), n) == n + 46


@pytest.mark.parametrize(
    ("d", "options", "n"),
    [(2, {}, 2), (2, {"beta": 0.7}, 2), (2, {"variant": "sbin"}, 2), (2, {"variant": "s1geo"}, 2),
     (5, {}, 100), (5, {"beta": 0.7}, 100)],
    ids=["sageo-d2", "beta0.7-d2", "sbin-d2", "s1geo-d2", "sageo-d5", "beta0.7-d5"],
)  # fmt: skip
def test_honest_batches_pass(d, options, n):
    """The shuffler's own sampler, 100,000 batches at the smallest sizes: none below L(n).

    Also a check of the law itself, with a variance-derived threshold: the
    fraction of batches at or below the exact 1% quantile is within 6 standard
    deviations of its exact probability.
    """
    task = _task(d, **options)
    law, beta = task.dummy_law(), task.spec.beta
    batches = 100_000
    source = SecureUniforms()
    dummies = secure_dummy_counts(law, batches * d, source).reshape(batches, d).sum(axis=1)
    kept = (
        np.full(batches, n)
        if beta == 1.0
        else source.bernoulli(beta, batches * n).reshape(batches, n).sum(axis=1)
    )
    messages = kept + dummies
    fewest, _ = fewest_honest_messages(law, d, beta, n)
    assert messages.min() >= fewest
    top = int(np.quantile(messages, 0.05))
    cdf = honest_lower_tail(law, d, beta, n, top)
    k = int(np.searchsorted(cdf, 0.01))
    p = float(cdf[k])
    observed = float(np.mean(messages <= k))
    assert abs(observed - p) <= 6 * math.sqrt(p * (1 - p) / batches), (observed, p)


def test_the_largest_domains_fall_back_to_chernoff():
    task = _task(300)
    fewest, method = fewest_honest_messages(task.dummy_law(), 300, 1.0, 0)
    assert method == "chernoff"
    law = task.dummy_law()
    # below the mean by about 13 standard deviations of Z, and P[T < L] <= 1e-30 by Chernoff
    sd = math.sqrt(300 * law.variance)
    assert 300 * law.mean - 15 * sd < fewest < 300 * law.mean - 10 * sd
    assert chernoff_log_lower_tail(law, 300, 1.0, 0, fewest - 1) <= math.log(DUMMY_CHECK_TAIL / 2)
    assert isinstance(law, SAGeoLaw)


def _batch_body(task, ciphertexts: list[bytes], n_users: int) -> dict:
    return {
        "format": "shuffledp-batch/1",
        "task_id": task.task_id,
        "batch_id": new_id(),
        "n_users": n_users,
        "n_messages": len(ciphertexts),
        "payload": base64.b64encode(b"".join(ciphertexts)).decode(),
    }


def test_parse_batch_refuses_a_batch_without_dummies():
    task = _task(8)
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, 8)
    users = sealer.seal_all([i % 8 for i in range(100)])
    with pytest.raises(RejectedError) as refused:
        parse_batch(_batch_body(task, users, 100), task)
    assert refused.value.status == 422 and refused.value.reason == "missing_dummies"
    assert "at least 146" in refused.value.message
    dummies = sealer.seal_all([i % 8 for i in range(46)])
    assert parse_batch(_batch_body(task, users + dummies, 100), task).n_messages == 146


@pytest.mark.slow
def test_a_batch_without_dummies_posted_with_the_forward_token_is_refused(deploy):
    dep = deploy("augmented", min_batch_users=100)  # d = 5: L(100) = 101
    task = dep.task
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, len(DOMAIN))
    users = sealer.seal_all([i % len(DOMAIN) for i in range(100)])
    answer = dep.post_batch(_batch_body(task, users, 100))
    assert answer.status_code == 422 and answer.json()["reason"] == "missing_dummies"
    metrics = dep.analyzer_metrics()
    assert metrics["rejected"]["missing_dummies"] == 1 and metrics["batches_stored"] == 0
    assert dep.estimate().status_code == 409  # nothing published
    assert "refused a batch without the shuffler's dummies" in dep.analyzer.log_path.read_text()
    # An honest batch of the same users through the shuffler passes.
    dep.client().submit_many([DOMAIN[i % len(DOMAIN)] for i in range(100)], per_request=50)
    dep.wait_aggregated(100)
    assert dep.estimate().status_code == 200
