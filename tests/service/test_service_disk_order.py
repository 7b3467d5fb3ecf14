"""The shuffler's files, read as an attacker would, arrivals 0.1 to 0.35 s apart (issue 24 §4.3).

With arrivals that far apart each request is its own commit and, in the
code before issue 24, the 5-second WAL checkpoints moved every page into the
database file, where rows sat inside their pages in arrival order: the
client ids' byte offsets followed arrival order exactly (ρ = −1.0, within-page
z = −14.7 with 100 users 0.3 to 1 s apart, ``benchmarks/service_disk_order.py``).
Now nothing a waiting submission leaves is written in arrival order. The gaps
were 0.3 to 1 s (46 s of test); 0.1 s is still twice the longest a requested
checkpoint waits (``CHECKPOINT_SECONDS``, at once when idle), so each arrival
is its own commit and its own checkpoint as before, and the code before
issue 24 (2b051eb^) still fails at these gaps (submission ids ρ = −1.0,
z = −11.3). Tolerances are the null law's (offsets independent of arrival
order): |ρ| ≤ 5/√(n − 1), |z| ≤ 5, at most 8 right pairs, each exceeded with
probability about 10⁻⁶.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from shuffledp.service.disk_audit import linked_pairs, order_leak, read_files
from shuffledp.service.tokens import issue_tokens

pytestmark = pytest.mark.slow

USERS = 60


def _file_state(files):
    return tuple((p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else None for p in files)


def test_spaced_arrivals_leave_no_order_and_an_idle_shuffler_writes_nothing(deploy):
    dep = deploy("krr", min_batch_users=USERS + 1, one_submission_per_client=True)
    tokens = issue_tokens(dep.token_key, dep.task.task_id, USERS)
    client = dep.client(token=tokens[0])
    gaps = np.random.default_rng(24).uniform(0.1, 0.35, size=USERS)
    subs = []
    for i in range(USERS):
        subs += client.submit_many(["red", "green", "blue"][i % 3 : i % 3 + 1], tokens=[tokens[i]])
        time.sleep(float(gaps[i]))
    files = [dep.workdir / f"shuffler.db{suffix}" for suffix in ("", "-wal")]
    data = read_files(files)
    kinds = {
        "submission ids": [s.submission_id for s in subs],
        "client ids": [t.split(".")[0] for t in tokens],
        "ciphertexts": [s.ciphertexts[0][:20] for s in subs],
    }
    for name, ids in kinds.items():
        leak = order_leak(data, ids)
        assert leak.found == USERS, (name, leak)
        assert abs(leak.spearman) <= 5 / math.sqrt(USERS - 1), (name, leak)
        assert leak.pages < leak.found and abs(leak.within_page_z) <= 5, (name, leak)
    for left, right in (("client ids", "submission ids"), ("client ids", "ciphertexts")):
        assert linked_pairs(data, kinds[left], kinds[right]) <= 8

    # Idle (nothing arrives) past a dispatcher poll (every 5 s): no commit, no checkpoint.
    state = _file_state(files)
    assert dep.workdir.joinpath("shuffler.db-wal").stat().st_size == 0  # truncated after the last
    time.sleep(6.0)
    assert _file_state(files) == state
