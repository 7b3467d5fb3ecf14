"""``shuffledp experiment per-user`` end to end (one --quick run per data set) and its bad input."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import figure_checks
from shuffledp.cli import main
from shuffledp.experiments.per_user import (
    ATTACK_FIELDS,
    BASELINE_FIELDS,
    EPSILON_PRIME_FIELDS,
    SWEEP_FIELDS,
    THM3_FIELDS,
    PerUserExperimentConfig,
    _t_and_r,
    mean_l1_to_groups,
    top_k_precision,
)
from shuffledp.protocols.per_user import PerUserHistograms
from shuffledp.schemas import schema_id, validate

CSV_FILES = {
    "eps1_sweep.csv": SWEEP_FIELDS,
    "baselines.csv": BASELINE_FIELDS,
    "epsilon_prime.csv": EPSILON_PRIME_FIELDS,
    "attack.csv": ATTACK_FIELDS,
    "thm3.csv": THM3_FIELDS,
}
PNG_FILES = ("eps1_sweep.png", "baselines.png", "epsilon_prime.png", "thm3.png")


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _header(path: Path) -> tuple[str, ...]:
    with path.open(encoding="utf-8") as handle:
        return tuple(next(csv.reader(handle)))


def _run(tmp_path_factory: pytest.TempPathFactory, data: str) -> dict[str, Any]:
    out = tmp_path_factory.mktemp(f"per_user_{data}")
    code, stdout, err = _cli(
        ["experiment", "per-user", "--quick", "--data", data, "--output-dir", str(out)]
    )
    # A missing data set or extra is a failure with its message, never a skip.
    assert code == 0, f"per-user --data {data} failed: {err.strip()}"
    return {
        "dir": out,
        "stdout": stdout,
        "summary": json.loads((out / "summary.json").read_text(encoding="utf-8")),
        **{name: _rows(out / name) for name in CSV_FILES},
    }


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory, "synthetic")


@pytest.fixture(scope="module")
def movielens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory, "movielens")


def _f(value: str) -> float:
    return float(value) if value != "" else math.nan


# -- files -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["synthetic", "movielens"])
def test_files_and_columns(fixture: str, request: pytest.FixtureRequest) -> None:
    result = request.getfixturevalue(fixture)
    out: Path = result["dir"]
    for name, fields in CSV_FILES.items():
        assert _header(out / name) == fields, name
        assert result[name], f"{name} is empty"
    for name in PNG_FILES:
        assert (out / name).stat().st_size > 5000, name
        assert figure_checks.checked(out / name), name  # drawn and readable (conftest)
    for column in ("l1_mean", "topk_precision_mean", "pure_group_fraction_mean", "groups_mean"):
        assert column in SWEEP_FIELDS
    assert "wrote" in result["stdout"] and "epsilon'" in result["stdout"]
    assert result["summary"]["schema"] == schema_id("experiment-per-user-summary")
    validate(result["summary"])


# -- synthetic ---------------------------------------------------------------------------------


def test_sweep_optimum_and_thm4(synthetic: dict[str, Any]) -> None:
    rows = synthetic["eps1_sweep.csv"]
    quick = PerUserExperimentConfig.for_data("synthetic", quick=True)
    assert {float(r["epsilon1_fraction"]) for r in rows} == set(quick.fractions)
    assert {r["release"] for r in rows} == {"t", "r"}
    for release in ("t", "r"):
        mine = [r for r in rows if r["release"] == release]
        best = [r for r in mine if r["empirical_optimum"] == "True"]
        assert len(best) == 1
        assert float(best[0]["l1_mean"]) == min(float(r["l1_mean"]) for r in mine)
    t_best = next(r for r in rows if r["release"] == "t" and r["empirical_optimum"] == "True")
    assert synthetic["summary"]["chosen_epsilon1"] == pytest.approx(float(t_best["epsilon1"]))
    # Thm 4: 4 d log(n/delta) / R with R = separation / c, far above epsilon.
    expected = 4 * 20 * math.log(2000 / 1e-6) / (1.5 / 0.1)
    assert float(rows[0]["thm4_epsilon1"]) == pytest.approx(expected)
    assert expected > 4.0
    for r in rows:
        assert 0 <= float(r["pure_group_fraction_mean"]) <= 1
        assert 0 <= float(r["topk_precision_mean"]) <= 1
        assert float(r["groups_mean"]) == 10


def test_r_not_worse_than_t_beyond_noise(synthetic: dict[str, Any]) -> None:
    rows = synthetic["eps1_sweep.csv"]
    for fraction in {r["epsilon1_fraction"] for r in rows}:
        t = next(r for r in rows if r["release"] == "t" and r["epsilon1_fraction"] == fraction)
        r = next(r for r in rows if r["release"] == "r" and r["epsilon1_fraction"] == fraction)
        se = math.hypot(float(t["l1_se"]), float(r["l1_se"]))
        assert float(r["l1_mean"]) <= float(t["l1_mean"]) + 3 * se, fraction


def test_baselines(synthetic: dict[str, Any]) -> None:
    rows = {r["release"]: r for r in synthetic["baselines.csv"]}
    assert set(rows) == {
        "t",
        "r",
        "laplace-ldp(t)",
        "laplace-ldp(r)",
        "laplace-full(z)",
        "uniform-shuffle(t)",
        "oracle(t)",
    }
    for row in rows.values():
        assert row["status"] == "ok"
        assert float(row["guarantee_epsilon"]) == 4.0
        assert float(row["guarantee_delta"]) == 0.0
        assert float(row["guarantee_c"]) == 0.1

    def l1(name: str) -> float:
        return float(rows[name]["l1_mean"])

    def tol(*names: str) -> float:
        return 3 * math.sqrt(sum(float(rows[n]["l1_se"]) ** 2 for n in names))

    # Shuffling one's copy with others' never helps in expectation at equal local epsilon:
    # E|a + eta| >= E|eta| for symmetric noise, so the oracle cannot beat the unshuffled copy.
    assert l1("laplace-ldp(t)") <= l1("oracle(t)") + tol("laplace-ldp(t)", "oracle(t)")
    # Noise variance: whole-epsilon Z < min-variance R < T.
    assert l1("laplace-full(z)") <= l1("laplace-ldp(r)") + tol("laplace-full(z)", "laplace-ldp(r)")
    assert l1("laplace-ldp(r)") <= l1("laplace-ldp(t)") + tol("laplace-ldp(r)", "laplace-ldp(t)")
    # Grouping by the true clusters beats grouping by noisy W, which beats one uniform shuffle.
    assert l1("oracle(t)") <= l1("t") + tol("oracle(t)", "t")
    assert l1("t") < l1("uniform-shuffle(t)") - tol("t", "uniform-shuffle(t)")
    assert float(rows["t"]["topk_precision_mean"]) > float(
        rows["uniform-shuffle(t)"]["topk_precision_mean"]
    )


def test_epsilon_prime_between_epsilon1_and_epsilon(synthetic: dict[str, Any]) -> None:
    rows = synthetic["epsilon_prime.csv"]
    assert {float(r["c"]) for r in rows} == {0.1, 0.5, 1.0}
    for r in rows:
        eps, eps1 = float(r["epsilon"]), float(r["epsilon1"])
        assert eps1 - 1e-9 <= float(r["epsilon_prime"]) <= eps + 1e-9
        assert int(r["users_in_ball"]) <= int(r["group_size"])
        if r["paper_epsilon"] != "":
            assert eps1 - 1e-9 <= float(r["paper_epsilon"]) <= eps + 1e-9
            assert r["paper_method"] == "computed"  # quick groups are small
    assert {r["grouping"] for r in rows} == {"k-means", "true clusters"}
    per_job = {
        (c, g): [r for r in rows if float(r["c"]) == c and r["grouping"] == g]
        for c in (0.1, 0.5, 1.0)
        for g in ("k-means", "true clusters")
    }
    users = [sorted(int(r["user"]) for r in mine) for mine in per_job.values()]
    assert all(u == users[0] for u in users)  # the same fixed sample everywhere
    truth = [r for r in rows if r["grouping"] == "true clusters"]
    assert all(r["group"] == r["true_cluster"] for r in truth)
    assert all(r["paper_epsilon"] == "" for r in truth)
    assert len(set(users[0])) == int(rows[0]["sample_size"]) == 16
    assert any(r["paper_epsilon"] != "" for r in rows)
    summary = synthetic["summary"]["epsilon_prime"]
    for entry in summary.values():
        assert entry["fraction_at_most_epsilon"] == 1.0
        assert 0 < entry["ceiling_largest_group"] <= 4.0


def test_attack_recovers_single_copy_groups_exactly(synthetic: dict[str, Any]) -> None:
    rows = {r["release"]: r for r in synthetic["attack.csv"]}
    single, t = rows["single"], rows["t"]
    # Well separated (centre L1 distance 1.5, noise scale c/epsilon = 0.025): exact every time.
    assert float(single["exact_recovery_rate"]) == 1.0
    assert float(single["ari_vs_groups_mean"]) == pytest.approx(1.0)
    assert float(t["ari_vs_groups_mean"]) <= float(single["ari_vs_groups_mean"])
    assert 0 <= float(t["exact_recovery_rate"]) <= 1


def test_thm3_bound_holds(synthetic: dict[str, Any]) -> None:
    rows = {r["release"]: r for r in synthetic["thm3.csv"]}
    assert set(rows) == {"t", "r"}
    for row in rows.values():
        # The printed bound (log(n/delta) factor) is loose: nobody exceeds it.
        assert float(row["fraction_measured_above_printed"]) == 0.0
        assert float(row["bound_printed_mean"]) > float(row["bound_expectation_mean"])
    # For t the groups are independent of T's noise: the expectation version holds on average.
    t = rows["t"]
    assert float(t["shuffle_averaged_l1_mean"]) <= float(t["bound_expectation_mean"])
    # The default scale 2c/epsilon2 (moved-items): d * (2c/epsilon2) * log(n/delta) for T.
    assert t["neighbouring"] == "moved-items"
    eps2 = float(t["epsilon2"])
    expected = 20 * 2 * 0.1 / eps2 * math.log(2000 / 1e-6)
    assert float(t["noise_term_printed"]) == pytest.approx(expected)


# -- movielens ---------------------------------------------------------------------------------


def test_movielens_says_what_is_unavailable(movielens: dict[str, Any]) -> None:
    sweep = movielens["eps1_sweep.csv"]
    assert {int(r["n"]) for r in sweep} == {671}
    assert all(r["pure_group_fraction_mean"] == "" for r in sweep)
    assert all(r["ari_groups_vs_true_mean"] == "" for r in sweep)
    assert all("no true clusters" in r["notes"] for r in sweep)
    rows = {r["release"]: r for r in movielens["baselines.csv"]}
    assert rows["oracle(t)"]["status"] == "unavailable"
    assert rows["oracle(t)"]["l1_mean"] == ""
    assert all(r["status"] == "ok" for name, r in rows.items() if name != "oracle(t)")
    for r in movielens["epsilon_prime.csv"]:
        assert r["grouping"] == "k-means"
        assert float(r["epsilon1"]) - 1e-9 <= float(r["epsilon_prime"]) <= 4 + 1e-9
        assert r["true_cluster"] == ""
    summary = movielens["summary"]
    assert summary["amplification_ceiling_all_users"]["n"] == 671
    assert any("no true clusters" in note for note in summary["notes"])
    thm4 = summary["thm4"]["default_c"]
    assert "k-means" in thm4["data_level_clusters"]
    assert thm4["epsilon1_recommended"] > 4.0


# -- pieces ------------------------------------------------------------------------------------


def test_derived_r_release_equals_the_protocols() -> None:
    rng = np.random.default_rng(5)
    counts = rng.multinomial(40, rng.dirichlet(np.ones(6), size=300))
    counts[:, 0] += 1
    kwargs: dict[str, Any] = {"clusters": 4, "n_init": 2}
    run_t = PerUserHistograms(2.0, 0.8, 0.2, release="t", **kwargs).run(
        counts, seed=np.random.default_rng(11)
    )
    run_r = PerUserHistograms(2.0, 0.8, 0.2, release="r", **kwargs).run(
        counts, seed=np.random.default_rng(11)
    )
    np.testing.assert_array_equal(_t_and_r(run_t)[1], run_r.estimates)


def test_top_k_precision_and_group_means() -> None:
    truth = np.array([[0.5, 0.3, 0.2, 0.0], [0.25, 0.25, 0.25, 0.25]])
    estimates = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 0.1, 0.2, 0.3]])
    # Row 0: estimate's top 2 = {3, 2}; true top 2 = {0, 1}: none. Row 1: all tied, all true.
    np.testing.assert_allclose(top_k_precision(estimates, truth, 2), [0.0, 1.0])
    points = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    labels = np.array([0, 0, 1])
    got = mean_l1_to_groups(points, np.array([0, 2]), points, labels)
    np.testing.assert_allclose(got, [1.0, 0.0])


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--data", "bogus"], "invalid choice"),
        (["--repetitions", "0"], "--repetitions"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, extra: list[str], needle: str) -> None:
    code, out, err = _cli(
        ["experiment", "per-user", "--quick", "--output-dir", str(tmp_path / "o"), *extra]
    )
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err
    assert not (tmp_path / "o").exists()


def test_unwritable_output_dir_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("x", encoding="utf-8")
    for target in (blocker, blocker / "sub"):
        code, out, err = _cli(["experiment", "per-user", "--quick", "--output-dir", str(target)])
        assert code == 2, target
        assert len(err.strip().splitlines()) == 1 and "--output-dir" in err
        assert out == ""
