"""The service certifies a task once: later releases reuse the certificate.

A correlated release used to rebuild its calibration three times (six exact δ
evaluations) per publish, for a certificate that depends on the task alone.
The certificate at ``min_batch_users`` is now computed at a task's first
release and kept with the task; the estimate at N users reuses it (the
correlated and augmented certificates do not depend on N).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import shuffledp.accounting.certificates.correlated as correlated_certificate
from shuffledp.service.release import build_release, certified_protocol
from shuffledp.service.store_protocols import AggregateTotals
from shuffledp.service.task import create_task

DOMAIN = ["a", "b", "c"]


def _totals(d: int, n_users: int, batches: int) -> AggregateTotals:
    return AggregateTotals(
        counts=np.full(d, 10 * n_users // d, dtype=np.int64),
        n_users=n_users,
        n_messages=10 * n_users,
        n_batches=batches,
        smallest_batch_users=n_users // batches,
        pending_batches=0,
    )


def test_a_correlated_task_is_certified_once_for_all_its_releases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, _ = create_task("correlated", DOMAIN, 1.0, 1e-6, 200)
    calls: list[Any] = []
    original = correlated_certificate.correlated_delta

    def counting(*args: Any, **kwargs: Any) -> float:
        calls.append(kwargs.get("rounding", "up"))
        return original(*args, **kwargs)

    monkeypatch.setattr(correlated_certificate, "correlated_delta", counting)
    certified_protocol.cache_clear()
    first = build_release(task, _totals(2 * len(DOMAIN), 400, 2))
    assert sorted(calls) == ["down", "up"]  # the upper bound and the lower bound, once
    second = build_release(task, _totals(2 * len(DOMAIN), 1000, 5))
    assert len(calls) == 2  # nothing evaluated again
    # The same certificate, stated at the task's n; the standard errors follow N.
    assert first["privacy"]["delta"] == second["privacy"]["delta"]
    assert first["privacy"]["n"] == second["privacy"]["n"] == 200
    assert first["n"] == 400 and second["n"] == 1000
    assert second["accuracy"]["per_bin_std"] > first["accuracy"]["per_bin_std"]


def test_the_cached_certificate_is_the_one_computed_afresh() -> None:
    task, _ = create_task("correlated", DOMAIN, 1.0, 1e-6, 200)
    cached = certified_protocol(task).privacy_report()
    fresh = task.spec.protocol(200, DOMAIN, 1.0, 1e-6).privacy_report()
    assert (cached.delta, cached.lower_bound_delta) == (fresh.delta, fresh.lower_bound_delta)
