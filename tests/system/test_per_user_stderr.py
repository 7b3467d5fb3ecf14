"""Per-user estimates have error bars: ``PerUserRun.stderr`` and the report's ``stderr``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.cli.run.per_user import STDERR_MEANING
from shuffledp.data.synthetic_users import clustered_users
from shuffledp.protocols.per_user import LAPLACE_95_STDERRS, PerUserHistograms
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
    # The sample std of m Laplace draws (kurtosis 6) has a relative s.e. of sqrt(5 / (4 m)):
    # 2.5% per class (m = 2000; rtol 0.12 is about 5 s.e.), 1% pooled (m = 12000; 4 s.e.).
    np.testing.assert_allclose(measured, run.stderr, rtol=0.12)
    np.testing.assert_allclose(noise.std(), run.stderr[0], rtol=0.04)
    # The noise is Laplace, not normal: +- LAPLACE_95_STDERRS covers 95% of one copy's noise
    # (95% to 95.5% for r's weighted sum of two), +- 1.96 only 1 - exp(-1.96 sqrt 2) = 93.75%
    # of one copy's. Coverage of 12000 values has an s.e. of 0.2%: tolerances are 4 s.e.
    covered = np.abs(noise) <= LAPLACE_95_STDERRS * run.stderr
    assert 0.95 - 0.008 < covered.mean() < 0.955 + 0.008
    if release == "t":
        normal = np.abs(noise) <= 1.959964 * run.stderr
        assert abs(normal.mean() - (1 - np.exp(-1.959964 * np.sqrt(2)))) < 0.008


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
