"""Per-user estimates have error bars: ``PerUserRun.stderr`` and the report's ``stderr``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.cli.run.per_user import STDERR_MEANING
from shuffledp.data.synthetic_users import clustered_users
from shuffledp.protocols.per_user import PerUserHistograms
from shuffledp.schemas import validate

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def users():
    return clustered_users(2000, 6, 3, separation=1.0, radius=0.15, total=60, seed=8)


@pytest.mark.parametrize(
    ("release", "neighbouring"), [("t", "moved-items"), ("r", "moved-items"), ("t", "l1-distance")]
)
def test_stderr_is_the_noise_of_the_released_copy(users, release, neighbouring):
    protocol = PerUserHistograms(
        4.0, 1.0, 0.2, clusters=3, release=release, neighbouring=neighbouring
    )
    run = protocol.run(users.counts, seed=3)
    assert run.stderr.shape == (users.d,)
    assert np.all(run.stderr == run.stderr[0]) and run.stderr[0] > 0
    # Row i holds the copy of user perm[i]: its noise is the estimate minus that user's H/s.
    owners = run.analysis.normalized[run.analysis.permutation]
    noise = run.estimates - owners
    measured = noise.std(axis=0, ddof=0)
    # 2000 Laplace draws per class: the sample std is within ~3% (4 s.e.) of the true one.
    np.testing.assert_allclose(measured, run.stderr, rtol=0.12)
    np.testing.assert_allclose(noise.std(), run.stderr[0], rtol=0.04)
    # 95% intervals around each value cover the copy owner's true value about 95% of the time.
    covered = np.abs(noise) <= 1.959964 * run.stderr
    assert abs(covered.mean() - 0.95) < 0.02


def test_the_report_states_the_standard_errors(users, tmp_path: Path, capsys):
    lines = ["user," + ",".join(f"c{j}" for j in range(users.d))]
    lines += [f"u{i}," + ",".join(str(x) for x in users.counts[i]) for i in range(users.n)]
    data = tmp_path / "wide.csv"
    data.write_text("\n".join(lines) + "\n")
    report = tmp_path / "report.json"
    argv = [
        "run",
        "per-user",
        "--input",
        str(data),
        "--wide",
        "--user-column",
        "user",
        "--epsilon",
        "4",
        "--epsilon1",
        "1",
        "--c",
        "0.2",
        "--clusters",
        "3",
        "--output",
        str(tmp_path / "est.csv"),
        "--report",
        str(report),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    result = json.loads(report.read_text())
    validate(result)
    stderr = result["stderr"]
    variance = result["parameters"]["noise_variance_per_coordinate"]
    assert stderr["per_class"] == pytest.approx([np.sqrt(variance)] * users.d)
    assert stderr["meaning"] == STDERR_MEANING
    assert f"stderr {stderr['per_class'][0]:.3g} per value" in err
