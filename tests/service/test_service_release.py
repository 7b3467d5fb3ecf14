"""The release holds when sybils fill the batch: certified for min_batch_users honest users.

A batch's size counts every submission, the adversary's included; the task
promises only ``min_batch_users`` users who follow the protocol. The release
must state the δ of that many users (the package's exact accountant at n =
min_batch_users), not the δ at the batch's submission count.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _message_bounds import assert_release_delta

from shuffledp.accounting import api as accounting
from shuffledp.cli import main
from shuffledp.privacy import BoundKind
from shuffledp.service.release import build_release
from shuffledp.service.store import AggregateTotals
from shuffledp.service.task import create_task

pytestmark = pytest.mark.slow

LABELS = ["a", "b", "c"]  # k = 3


def test_a_batch_half_filled_by_sybils_is_certified_at_the_honest_users(deploy, tmp_path, capsys):
    # k = 3, target (1, 1e-6), min_batch_users 1000, one batch of 2000 submissions.
    dep = deploy(
        "krr",
        min_batch_users=1000,
        domain=LABELS,
        shuffler_args=["--max-submissions-per-request", "2000"],
        analyzer_args=["--max-batch-users", "2999"],
    )
    rng = np.random.default_rng(17)
    honest = [LABELS[i] for i in rng.integers(0, 3, size=1000)]
    sybils = ["a"] * 1000  # the adversary's own submissions, values it knows
    dep.client(seed=6).submit_many(honest + sybils, per_request=2000)
    dep.wait_aggregated(2000)
    release = dep.estimate().json()
    assert release["service"]["smallest_batch_users"] == 2000 and release["n"] == 2000

    eps0 = dep.task.spec.epsilon0
    at_honest = accounting.delta(1.0, n=1000, mechanism="krr", epsilon0=eps0, domain_size=3)
    honest_lower = accounting.delta(
        1.0, n=1000, mechanism="krr", method="krr-homogeneous", epsilon0=eps0, domain_size=3
    )
    at_batch = accounting.delta(1.0, n=2000, mechanism="krr", epsilon0=eps0, domain_size=3)
    assert at_honest.certified and honest_lower.bound is BoundKind.LOWER

    privacy = release["privacy"]
    assert privacy["n"] == 1000
    assert privacy["delta"] == at_honest.delta <= 1e-6
    # If 1000 of the 2000 are the adversary's, the honest users' δ is at least this:
    assert privacy["delta"] >= honest_lower.delta
    assert honest_lower.delta > 9.87e-7
    # ... which the δ at the batch's 2000 submissions understates 20,000-fold.
    assert at_batch.delta <= 4.86e-11 and honest_lower.delta / at_batch.delta > 20_000
    stated = " ".join(privacy["assumptions"])
    assert "at least 1000 users who follow the protocol" in stated
    assert "certified for exactly 1000 such users" in stated

    out = tmp_path / "release.json"
    code = main(
        ["analyzer", "publish", "--task", str(dep.workdir / "task.json"),
         "--store", f"sqlite:///{dep.analyzer_db}", "--output", str(out)]
    )  # fmt: skip
    assert code == 0 and json.loads(out.read_text()) == release
    assert "certified for 1000 honest users per batch" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", ["krr", "flip"])
def test_the_release_delta_does_not_depend_on_the_batch_sizes(protocol):
    task, _ = create_task(protocol, ["x", "y", "z", "w"], 1.0, 1e-6, 500)
    if protocol == "krr":
        params = {"mechanism": "krr", "epsilon0": task.spec.epsilon0, "domain_size": 4}
    else:
        spec = task.spec
        params = {"mechanism": "flip", "q": spec.q, "fake_users": spec.fake_users, "domain_size": 4}
    at_min = accounting.delta(1.0, n=500, **params)
    assert at_min.certified and at_min.delta is not None and at_min.delta <= 1e-6
    for smallest, batches in ((500, 1), (2500, 1), (4000, 3)):
        users = smallest * batches
        totals = AggregateTotals(
            counts=np.full(4, users, dtype=np.int64),
            n_users=users,
            n_messages=4 * users,
            n_batches=batches,
            smallest_batch_users=smallest,
            pending_batches=0,
        )
        release = build_release(task, totals)
        assert release["privacy"]["n"] == 500
        parties = 500 if protocol == "flip" else 0  # FLIP clients may exceed their bound
        assert_release_delta(
            release["privacy"]["delta"], at_min.delta, epsilon=1.0, parties=parties
        )
        assert release["service"]["smallest_batch_users"] == smallest
        if smallest > 500:  # the batch's own size would have claimed more
            at_smallest = accounting.delta(1.0, n=smallest, **params)
            assert at_smallest.delta is not None and at_smallest.delta < at_min.delta
