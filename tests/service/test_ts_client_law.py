"""Same law, not the same bytes: the TS randomizers against Python's, per protocol.

Both sides read one task document; the TS package draws USERS users with one value
(``crypto.getRandomValues``), Python's randomizer (``Task.build_randomizer``) as many. Each
statistic of a user's messages is compared by a chi-square test of homogeneity (2 x K table,
columns pooled left to right until every expected count is at least 5), whose threshold is
the chi-square quantile at FALSE_FAILURE for K - 1 degrees of freedom: a correct pair of
samplers fails it with probability FALSE_FAILURE per statistic. Seeds are never matched:
the TS side uses the OS CSPRNG. The laws against exact pmfs are in clients/ts/test/.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _ts_client import TOOL, run_node
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from scipy.stats import chi2

from shuffledp.service.task import Task, new_id, save_task
from shuffledp.service.wire import public_key_to_b64
from shuffledp.specs import AugmentedSpec, CorrelatedSpec, FlipSpec, KRRSpec, ProtocolSpec

FALSE_FAILURE = 1e-6
USERS = 20_000
DOMAIN = ["a", "b", "c", "d"]
VALUE = "b"

#: Parameters at which every part of each law shows in 20,000 users (correlated: m = 2,
#: so each share has shape 1/2; the tiny shapes of a real calibration are tested in
#: clients/ts/test/randomizers.test.ts through P(X > 0)).
SPECS: dict[str, ProtocolSpec] = {
    "krr": KRRSpec(epsilon0=1.3),
    "flip": FlipSpec(q=0.1, fake_users=3),
    "correlated": CorrelatedSpec(alpha=0.5, flood_r=2.0, flood_q=0.6, min_honest=2),
    "augmented": AugmentedSpec(variant="sbin", beta=1.0, trials=40, calibration="fixed"),
}


def _task(spec: ProtocolSpec, path: Path) -> Task:
    task = Task(
        task_id=new_id(),
        spec=spec,
        domain=tuple(DOMAIN),
        domain_source="declared",
        epsilon=1.0,
        delta=1e-6,
        min_batch_users=2,
        public_key=public_key_to_b64(X25519PrivateKey.generate().public_key()),
        max_messages_per_submission=spec.max_messages(len(DOMAIN)),
    )
    task.check()
    save_task(task, path)
    return task


def _python_users(task: Task, users: int) -> list[list[int]]:
    index = task.index_of(VALUE)
    batch = task.build_randomizer().randomize(np.full(users, index, dtype=np.int64))
    order = np.argsort(batch.sender, kind="stable")
    ends = np.cumsum(np.bincount(batch.sender, minlength=users))
    return [sorted(m.tolist()) for m in np.split(batch.payload[order], ends[:-1])]


def homogeneity(x: list[int], y: list[int]) -> tuple[float, float, int]:
    """Chi-square statistic of two samples of a count, its threshold and degrees of freedom."""
    top = max(max(x), max(y)) + 1
    table = np.stack([np.bincount(x, minlength=top), np.bincount(y, minlength=top)])
    total = table.sum()
    columns: list[np.ndarray] = []
    pending = np.zeros(2, dtype=np.int64)
    for column in table.T:  # pool left to right until the expected counts reach 5
        pending = pending + column
        if (table.sum(axis=1) * pending.sum() / total).min() >= 5:
            columns.append(pending)
            pending = np.zeros(2, dtype=np.int64)
    if pending.sum():
        if columns:
            columns[-1] = columns[-1] + pending
        else:
            columns.append(pending)
    pooled = np.stack(columns, axis=1)
    if pooled.shape[1] < 2:
        return 0.0, 0.0, 0
    expected = np.outer(pooled.sum(axis=1), pooled.sum(axis=0)) / total
    statistic = float(((pooled - expected) ** 2 / expected).sum())
    df = pooled.shape[1] - 1
    return statistic, float(chi2.isf(FALSE_FAILURE, df)), df


def _count(index: int) -> Callable[[list[int]], int]:
    return lambda messages: messages.count(index)


#: The statistics compared, per protocol: name -> function of a user's sorted messages.
STATISTICS: dict[str, dict[str, Callable[[list[int]], int]]] = {
    "krr": {"report": lambda m: m[0]},
    "flip": {"value bin count": _count(1), "other bin count": _count(3), "messages": len},
    "correlated": {
        "(value, +1) count": _count(2),
        "(a, +1) count": _count(0),
        "(a, -1) count": _count(1),
        "(d, -1) count": _count(7),
        "messages": len,
        # the flooding makes (j, +1) and (j, -1) move together: their joint law, as one number
        "(a, +1) x 10 + (a, -1), capped": lambda m: min(m.count(0), 9) * 10 + min(m.count(1), 9),
    },
    "augmented": {"report": lambda m: m[0], "messages": len},
}


@pytest.mark.parametrize("protocol", list(SPECS))
def test_ts_randomizer_has_pythons_law(tmp_path: Path, protocol: str):
    task = _task(SPECS[protocol], tmp_path / "task.json")
    lines = tool_lines(tmp_path / "task.json")
    assert len(lines) == USERS
    python = _python_users(task, USERS)
    for messages in lines:
        assert messages == sorted(messages)
        assert all(0 <= m < task.message_domain_size for m in messages)
    if protocol == "augmented":  # no randomness at the client: the value, alone, every time
        assert lines == python == [[task.index_of(VALUE)]] * USERS
        return
    for name, statistic in STATISTICS[protocol].items():
        value, threshold, df = homogeneity(
            [statistic(m) for m in lines], [statistic(m) for m in python]
        )
        assert df >= 1, name
        assert value <= threshold, (
            f"{protocol} {name}: chi-square {value:.2f} > {threshold:.2f} (df {df})"
        )


def tool_lines(path: Path) -> list[list[int]]:
    """USERS users' messages drawn by the TS package (one JSON array a line)."""
    out = run_node(TOOL, "sample", path, VALUE, str(USERS)).stdout
    return [json.loads(line) for line in out.splitlines()]
