"""End to end through real processes: clients -> shuffler -> analyzer -> release."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _deploy import DOMAIN, expected_counts, stored_counts, wait_until

from shuffledp.cli import main
from shuffledp.service.task import build_protocol

pytestmark = pytest.mark.slow


def _run_json(protocol: str, tmp_path, capsys) -> dict:
    """The JSON of ``shuffledp run PROTOCOL`` on a small file with the same domain."""
    csv = tmp_path / "users.csv"
    csv.write_text("v\n" + "\n".join(DOMAIN * 40) + "\n")
    code = main(
        ["run", protocol, "--input", str(csv), "--column", "v", "--domain", ",".join(DOMAIN),
         "--epsilon", "1", "--delta", "1e-6", "--quiet"]
    )  # fmt: skip
    assert code == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("protocol", ["krr", "flip"])
def test_counts_equal_the_clients_messages_and_release_has_the_run_shape(
    deploy, protocol, tmp_path, capsys
):
    dep = deploy(protocol, min_batch_users=100)
    rng = np.random.default_rng(11)
    values = [DOMAIN[i] for i in rng.choice(5, size=300, p=[0.4, 0.3, 0.15, 0.1, 0.05])]
    subs = dep.client(seed=5).submit_many(values, per_request=20)
    dep.wait_aggregated(300)

    sh = dep.shuffler_metrics()
    assert sh["submissions_accepted"] == 300 and sh["batches_cut"] == 3
    assert sh["batches_forwarded"] == 3 and sh["batches_unsent"] == 0
    an = dep.analyzer_metrics()
    assert an["batches_aggregated"] == 3 and an["users_aggregated"] == 300
    assert an.get("messages_undecryptable", 0) == an.get("messages_undecodable", 0) == 0

    statistic = expected_counts(subs)
    assert statistic.sum() == sum(len(s.ciphertexts) for s in subs)
    assert stored_counts(dep).tolist() == statistic.tolist()

    response = dep.estimate()
    assert response.status_code == 200
    release = response.json()
    truth = build_protocol(dep.task, 300).estimate(statistic, DOMAIN)
    np.testing.assert_allclose(release["estimate"]["counts"], truth.counts, rtol=1e-12)
    assert release["n"] == 300 and release["messages"] == statistic.sum()
    assert release["protocol"] == protocol and release["domain"] == DOMAIN
    privacy = release["privacy"]
    assert privacy["n"] == 100  # min_batch_users: the honest users each batch holds
    assert privacy["epsilon"] == 1.0 and privacy["delta"] <= 1e-6 == privacy["target_delta"]
    assert privacy["calibration"] == "exact" and privacy["covers_release"]
    assert any("exactly one batch" in a for a in privacy["assumptions"])
    assert release["service"] == {
        "task_id": dep.task.task_id,
        "min_batch_users": 100,
        "batches": 3,
        "smallest_batch_users": 100,
    }

    reference = _run_json(protocol, tmp_path, capsys)
    assert set(release) == (set(reference) - {"input"}) | {"service"}
    assert set(release["privacy"]) == set(reference["privacy"])
    assert set(release["estimate"]) == set(reference["estimate"])
    assert set(release["parameters"]) == set(reference["parameters"])

    # the offline publisher gives the same release, and says nothing is pending
    out = tmp_path / "release.json"
    code = main(
        ["analyzer", "publish", "--task", str(dep.workdir / "task.json"),
         "--store", f"sqlite:///{dep.analyzer_db}", "--output", str(out)]
    )  # fmt: skip
    assert code == 0
    assert json.loads(out.read_text()) == release
    assert "not aggregated" not in capsys.readouterr().err


def test_single_submissions_and_a_clean_restart(deploy):
    """One request per user (what devices do); a graceful restart loses nothing."""
    dep = deploy("krr", min_batch_users=100)
    client = dep.client()
    subs = [client.submit(DOMAIN[i % 5]) for i in range(60)]
    dep.shuffler.stop()
    dep.shuffler.start()
    subs += [client.submit(DOMAIN[i % 3]) for i in range(40)]
    dep.wait_aggregated(100)
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="batch sent")
