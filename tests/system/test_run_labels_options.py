"""``run`` on labels as a data engineer has them (issue 24 §2): integer columns read as labels
on every path, and ``--normalize-labels`` for case and surrounding spaces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from shuffledp.cli import main

PRIVACY = ["--epsilon", "1", "--delta", "1e-6"]
#: A release's estimate lies within this many of its standard errors of the truth (a
#: normal tail of 2e-9 per bin; FLIP's counts are sums of many independent flips).
Z = 6.0


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _close_to(release: dict[str, object], truth: np.ndarray) -> None:
    estimate = release["estimate"]
    assert isinstance(estimate, dict)
    counts, stderr = np.array(estimate["counts"]), np.array(estimate["stderr"])
    assert np.all(np.abs(counts - truth) <= Z * stderr), (counts, truth, stderr)


@pytest.fixture
def devices(tmp_path: Path) -> dict[str, Path]:
    """3,000 users: an integer code 1..3, and an OS written as people write it."""
    rng = np.random.default_rng(3)
    code = rng.choice([1, 2, 3], size=3000, p=[0.6, 0.3, 0.1])
    os_ = rng.choice(["Android", "android", " Android ", "ANDROID", "iOS", "ios ", "IOS"], 3000)
    frame = pd.DataFrame({"code": code, "os": os_})
    paths = {"csv": tmp_path / "devices.csv", "parquet": tmp_path / "devices.parquet"}
    frame.to_csv(paths["csv"], index=False)
    frame.to_parquet(paths["parquet"], index=False)  # code: an int64 column
    return paths


@pytest.mark.parametrize("kind", ["csv", "parquet"])
@pytest.mark.parametrize("path", ["message", "count"])
@pytest.mark.parametrize("domain", [["--domain", "1,2,3"], ["--domain-name", "range:1-3"]])
def test_integer_labels_run_on_every_path(kind, path, domain, devices, tmp_path, capsys):
    """The loaded bin indices went to a guessing run(): 'ambiguous ... pass a pandas Series'."""
    output = tmp_path / "release.json"
    argv = ["run", "flip", "--input", str(devices[kind]), "--column", "code", *domain,
            *PRIVACY, "--path", path, "--output", str(output), "--quiet"]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert code == 0 and out == "", err  # the release went to --output
    release = json.loads(output.read_text())
    assert release["domain"] == ["1", "2", "3"] and release["n"] == 3000
    truth = np.bincount(pd.read_csv(devices["csv"])["code"] - 1, minlength=3)
    _close_to(release, truth)


@pytest.mark.parametrize("protocol", ["flip", "krr", "correlated", "augmented"])
def test_normalize_labels(protocol, devices, tmp_path, capsys):
    argv = ["run", protocol, "--input", str(devices["parquet"]), "--column", "os",
            "--domain", "android,iOS", *PRIVACY, "--path", "count"]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "differ from a domain label only by case or surrounding spaces" in err
    assert re.search(r"such as '[ a-zA-Z]+' vs '(android|iOS)'", err)
    assert "pass --normalize-labels" in err and "normalize_labels=True" not in err
    output = tmp_path / "release.json"
    code, _, err = _run([*argv, "--normalize-labels", "--output", str(output)], capsys)
    assert code == 0, err
    release = json.loads(output.read_text())
    assert release["domain"] == ["android", "iOS"]  # the declared labels, as declared
    rule = [note for note in release["notes"] if "--normalize-labels" in note]
    assert rule and "ignoring case and surrounding spaces" in rule[0]
    assert not any("normalize_labels=True" in note for note in release["notes"])
    raw = pd.read_csv(devices["csv"])["os"].str.strip().str.casefold()
    truth = np.array([(raw == "android").sum(), (raw == "ios").sum()])
    if protocol == "flip":  # FLIP's standard errors are exact, not estimated
        _close_to(release, truth)
    assert release["n"] == 3000


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--domain", "Android,android ,iOS"], "labels 'Android' and 'android' are the same"),
        (["--domain", "android,ios", "--other", "IOS"], "--other IOS is the domain label 'ios'"),
    ],
)
def test_normalize_labels_refuses_what_it_would_merge(options, message, devices, capsys):
    argv = ["run", "flip", "--input", str(devices["csv"]), "--column", "os", *options,
            *PRIVACY, "--normalize-labels"]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert message in err and "--normalize-labels" in err


def test_normalize_labels_with_missing_values_and_other(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("os\nAndroid\n n/a\nOSLO\nios\n\nIOS \n")
    output = tmp_path / "release.json"
    argv = ["run", "flip", "--input", str(data), "--column", "os", "--domain", "android,ios",
            *PRIVACY, "--normalize-labels", "--other", "other", "--drop-missing",
            "--output", str(output)]  # fmt: skip
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    release = json.loads(output.read_text())
    assert release["n"] == 4 and release["domain"] == ["android", "ios", "other"]
    assert "2 row(s) with a missing value" in err  # ' n/a' is N/A once normalized; '' is missing
    assert "1 value(s)" in err and "counted in 'other'" in err
    text = json.dumps(release)
    assert "2 row(s)" not in text and "1 value(s)" not in text  # counts stay on stderr


def test_help_lists_normalize_labels(capsys):
    with pytest.raises(SystemExit):
        main(["run", "krr", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--normalize-labels" in out and "ignoring case and surrounding spaces" in out
