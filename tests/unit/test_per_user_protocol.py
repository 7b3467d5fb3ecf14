"""The per-user histogram protocol (Alg. 1, Alg. 2 and baselines): mechanics and its report."""

import json

import numpy as np
import pytest

from shuffledp._rng import SEEDED_NOT_COVERED
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.synthetic_users import clustered_users
from shuffledp.protocols import PerUserHistograms
from shuffledp.protocols.per_user import PER_USER_METHOD, RELEASES

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def users():
    return clustered_users(600, 8, 4, separation=1.2, radius=0.15, total=200, seed=1)


def _protocol(release="t", **kwargs):
    kwargs.setdefault("clusters", 4)
    return PerUserHistograms(4.0, 1.0, 0.1, release=release, **kwargs)


@pytest.mark.parametrize("release", ["t", "r", "single", "uniform-shuffle", "oracle"])
def test_release_is_the_copy_permuted_within_groups(users, release):
    run = _protocol(release).run(users.counts, seed=3, true_labels=users.labels)
    a = run.analysis
    copy = {"t": a.t, "r": a.r, "z": a.w}[a.released_copy]
    np.testing.assert_array_equal(run.estimates, copy[a.permutation])
    np.testing.assert_array_equal(a.labels[a.permutation], a.labels)
    np.testing.assert_array_equal(np.sort(a.permutation), np.arange(users.n))
    np.testing.assert_allclose(a.normalized, users.normalized)


def test_copies_and_weights(users):
    protocol = _protocol("r")
    run = protocol.run(users.counts, seed=4)
    a = run.analysis
    assert a.weight == pytest.approx(1 / 10)  # eps1^2 / (eps1^2 + eps2^2) = 1 / (1 + 9)
    np.testing.assert_allclose(a.r, a.weight * a.w + (1 - a.weight) * a.t)
    # Noise scales (E|Lap(b)| = b): 2c / eps1 on W and 2c / (eps - eps1) on T by default.
    assert np.abs(a.w - a.normalized).mean() == pytest.approx(0.2, rel=0.05)
    assert np.abs(a.t - a.normalized).mean() == pytest.approx(0.2 / 3, rel=0.05)
    l1 = PerUserHistograms(4.0, 1.0, 0.1, neighbouring="l1-distance", clusters=4).run(
        users.counts, seed=4
    )
    assert np.abs(l1.analysis.w - a.normalized).mean() == pytest.approx(0.1, rel=0.05)


def test_single_copy_variant_clusters_and_releases_the_same_copy(users):
    run = _protocol("single").run(users.counts, seed=5)
    a = run.analysis
    assert a.w is a.t is a.r and a.released_copy == "z" and a.weight is None
    assert np.abs(a.w - a.normalized).mean() == pytest.approx(0.2 / 4, rel=0.05)
    assert run.report.parameters["copies"] == 1


def test_baselines(users):
    ldp = _protocol("laplace-ldp").run(users.counts, seed=6)
    np.testing.assert_array_equal(ldp.analysis.permutation, np.arange(users.n))
    np.testing.assert_array_equal(ldp.estimates, ldp.analysis.t)
    ldp_r = _protocol("laplace-ldp", baseline_copy="r").run(users.counts, seed=6)
    np.testing.assert_array_equal(ldp_r.estimates, ldp_r.analysis.r)
    full = _protocol("laplace-full").run(users.counts, seed=6)
    np.testing.assert_array_equal(full.estimates, full.analysis.w)
    uniform = _protocol("uniform-shuffle").run(users.counts, seed=6)
    assert uniform.analysis.n_groups == 1 and uniform.analysis.moved.mean() > 0.9
    oracle = _protocol("oracle").run(users.counts, seed=6, true_labels=users.labels)
    np.testing.assert_array_equal(oracle.analysis.labels, users.labels)
    with pytest.raises(InvalidParameterError, match="needs true_labels"):
        _protocol("oracle").run(users.counts, seed=6)


def test_clustering_keeps_utility_close_to_the_oracle(users):
    # Well-separated clusters and W's noise Lap(2c/epsilon1) = Lap(0.1): k-means on W finds
    # the true groups, so "t" ~ "oracle".
    err = {}
    for release in ("t", "oracle", "uniform-shuffle"):
        protocol = PerUserHistograms(8.0, 2.0, 0.1, release=release, clusters=4)
        run = protocol.run(users.counts, seed=7, true_labels=users.labels)
        err[release] = np.abs(run.estimates - users.normalized).sum(axis=1).mean()
    assert err["t"] < 1.2 * err["oracle"] < err["uniform-shuffle"]


def test_dbscan_variant_runs_and_noise_points_stay_put(users):
    protocol = _protocol("t", clustering="dbscan", clusters=None, eps_radius=0.05, min_samples=50)
    run = protocol.run(users.counts, seed=8)
    sizes = run.analysis.group_sizes
    singles = sizes == 1
    assert singles.any()
    np.testing.assert_array_equal(run.analysis.permutation[singles], np.flatnonzero(singles))


def test_seeds_reproduce_and_no_seed_uses_fresh_randomness(users):
    a = _protocol().run(users.counts, seed=9)
    b = _protocol().run(users.counts, seed=9)
    np.testing.assert_array_equal(a.estimates, b.estimates)
    c = _protocol().run(users.counts)
    d = _protocol().run(users.counts)
    assert not np.array_equal(c.estimates, d.estimates)


@pytest.mark.parametrize("release", RELEASES)
def test_report_states_the_worst_case_guarantee_only(users, release):
    run = _protocol(release).run(users.counts, seed=10, true_labels=users.labels)
    report = run.report
    assert report.epsilon == 4.0 and report.delta == 0.0
    assert report.method == PER_USER_METHOD and report.bound.value == "upper"
    assert report.n == users.n
    # Seeded: the report says the shuffle was not cryptographic, and nothing else.
    assert report.not_covered == (SEEDED_NOT_COVERED,) and not report.covers_release
    # (the fixed seeded statement speaks of "the shuffle is a ... permutation": not data)
    text = json.dumps(report.to_dict()).replace(json.dumps(SEEDED_NOT_COVERED)[1:-1], "")
    for word in ("group_size", "n_groups", "true_labels", "permutation", "amplified"):
        assert word not in text
    # Parameters are the same whatever the data: nothing data-dependent in the report.
    other = _protocol(release).run(users.counts[::-1].copy(), seed=11, true_labels=users.labels)
    assert other.report.to_dict() == report.to_dict()


def test_report_states_the_neighbouring_relation_in_words(users):
    report = PerUserHistograms(2.0, 0.5, 0.1, clusters=4).privacy_report(10)
    assert report.epsilon == 2.0
    assert report.parameters["neighbouring"] == "moved-items"
    assert report.parameters["laplace_scale_w"] == pytest.approx(0.4)  # 2c / epsilon1
    assert report.parameters["l1_sensitivity"] == pytest.approx(0.2)
    assert "moving at most floor(0.1*s) of its items" in report.neighbouring
    assert "includes every H' with ||H - H'||_1 <= floor(0.1*s)" in report.neighbouring
    assert any("moving at most floor(0.1*s)" in a for a in report.assumptions)
    l1 = PerUserHistograms(2.0, 0.5, 0.1, neighbouring="l1-distance", clusters=4)
    l1_report = l1.privacy_report(10)
    assert l1_report.epsilon == 2.0
    assert l1_report.parameters["laplace_scale_w"] == pytest.approx(0.2)  # c / epsilon1
    assert "||H - H'||_1 <= floor(0.1*s)" in l1_report.neighbouring
    assert "only (4, 0, c)-hDP" in l1_report.notes


def test_analysis_is_not_in_the_repr(users):
    run = _protocol().run(users.counts, seed=12)
    assert "analysis" not in repr(run) and "PerUserRun(n=600" in repr(run)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"epsilon1": 4.0}, "epsilon1 must be <"),
        ({"epsilon1": 5.0}, "epsilon1 must be <"),
        ({"epsilon1": 0.0}, "epsilon1 must be a finite number > 0"),
        ({"c": 0.0}, r"c must be a number in \(0, 1\]"),
        ({"c": 1.5}, r"c must be a number in \(0, 1\]"),
        ({"release": "x"}, "release must be one of"),
        ({"weighting": "x"}, "weighting must be one of"),
        ({"neighbouring": "paper"}, "neighbouring must be one of moved-items, l1-distance"),
        ({"clusters": None}, "needs clusters"),
        ({"clustering": "dbscan", "eps_radius": 0.1}, "clusters is the number of k-means"),
        ({"eps_radius": 0.1}, "eps_radius is DBSCAN's radius"),
    ],
)
def test_parameter_validation(kwargs, message):
    args = {"epsilon": 4.0, "epsilon1": 1.0, "c": 0.1, "clusters": 3}
    args.update(kwargs)
    with pytest.raises(InvalidParameterError, match=message):
        PerUserHistograms(args.pop("epsilon"), args.pop("epsilon1"), args.pop("c"), **args)


def test_run_rejects_bad_counts_and_too_many_clusters():
    protocol = PerUserHistograms(4.0, 1.0, 0.1, clusters=3)
    with pytest.raises(DataError, match="negative count"):
        protocol.run(np.array([[1, -1], [2, 2], [3, 0]]), seed=0)
    with pytest.raises(DataError, match="total count 0"):
        protocol.run(np.array([[1, 1], [0, 0], [3, 0]]), seed=0)
    with pytest.raises(InvalidParameterError, match="clusters must be an integer between 1 and 2"):
        protocol.run(np.array([[1, 1], [2, 3]]), seed=0)
    with pytest.raises(InvalidParameterError, match="true_labels must be 3 integer labels"):
        protocol.run(np.array([[1, 1], [2, 3], [1, 0]]), true_labels=np.array([0, 1]))
