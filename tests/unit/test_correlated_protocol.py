"""The correlated protocol: sampler, messages, calibration, the papers' rule and the report.

Every δ a calibration reports is recomputed here from the parameters it states
(a, r, q) with the public certificate ``correlated_delta`` and, independently,
with the accountant's second algorithm (``generic_bin_delta``, which sums each
bin's two-dimensional law directly).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from shuffledp._rng import SEEDED_NOT_COVERED
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    correlated_delta,
    generic_bin_delta,
)
from shuffledp.accounting.reproductions.correlated_paper import (
    paper_correlated_noise,
    paper_flooding,
)
from shuffledp.messages import ShuffledBatch
from shuffledp.privacy import BoundKind
from shuffledp.protocols.correlated import (
    CORRELATED_PRIVACY_METHOD,
    MAX_FLOOD_MEAN,
    CorrelatedProtocol,
    calibrate_correlated,
    correlated_parameters,
    paper_correlated_calibration,
    resolve_min_honest,
)
from shuffledp.randomizers.correlated import (
    CorrelatedRandomizer,
    decode_messages,
    encode_messages,
    negative_binomial_clusters,
    sample_negative_binomial,
)

EPS, DELTA, D = 1.0, 1e-6, 100
#: The central discrete Laplace at ε = 1 under replacement, DLap(1/2), computed here.
CENTRAL_STD = math.sqrt(2.0 * math.exp(-0.5)) / (1.0 - math.exp(-0.5))


def _std(alpha: float, shares: float = 1.0) -> float:
    return math.sqrt(2.0 * shares * alpha) / (1.0 - alpha)


def _messages(alpha: float, r: float, q: float, d: int, m: int) -> float:
    return 1.0 + d * (2.0 * alpha / (1.0 - alpha) + 2.0 * r * q / (1.0 - q)) / m


@pytest.fixture(scope="module")
def calibration():
    return calibrate_correlated(100_000, D, EPS, DELTA)


# ------------------------------------------------------------------- messages and sampler


def test_payload_encodes_bin_and_sign_and_decodes_back():
    bins = np.array([0, 0, 3, 7, 99])
    signs = np.array([1, -1, 1, -1, 1])
    payload = encode_messages(bins, signs)
    assert payload.tolist() == [0, 1, 6, 15, 198]
    back_bins, back_signs = decode_messages(payload)
    assert back_bins.tolist() == bins.tolist() and back_signs.tolist() == signs.tolist()
    with pytest.raises(InvalidParameterError, match=r"signs must be \+1 or -1"):
        encode_messages(np.array([1]), np.array([0]))
    with pytest.raises(InvalidParameterError, match="bins must be >= 0, got -2"):
        encode_messages(np.array([-2]), np.array([1]))


def test_sampler_degenerate_cases_and_bad_input():
    rng = np.random.default_rng(0)
    assert sample_negative_binomial(0.0, 0.5, 5, rng).tolist() == [0] * 5
    assert sample_negative_binomial(2.0, 0.0, 3, rng).tolist() == [0] * 3
    assert sample_negative_binomial(2.0, 0.5, 0, rng).shape == (0,)
    cell, size = negative_binomial_clusters(0, 1.0, 0.5, rng)
    assert cell.shape == size.shape == (0,)
    with pytest.raises(InvalidParameterError, match=r"q must be in \[0, 1\), got 1.0"):
        sample_negative_binomial(1.0, 1.0, 3, rng)
    with pytest.raises(InvalidParameterError, match="shape must be a finite number >= 0, got -1"):
        sample_negative_binomial(-1, 0.5, 3, rng)
    with pytest.raises(InvalidParameterError, match="cells must be an integer >= 0"):
        negative_binomial_clusters(-1, 1.0, 0.5, rng)


def test_clusters_fall_in_range_with_positive_sizes():
    cell, size = negative_binomial_clusters(10**9, 1e-5, 0.9, np.random.default_rng(3))
    assert 0 < len(cell) < 10**6
    assert cell.min() >= 0 and cell.max() < 10**9 and size.min() >= 1


def test_large_expected_cluster_counts_fall_back_to_numpy():
    # 1e6 draws at shape 1e3: 1e9·ln 2 clusters expected, above MAX_EXACT_CLUSTERS.
    x = sample_negative_binomial(1e3, 0.5, 10**6, np.random.default_rng(4))
    mean, var = 1e3, 1e3 / 0.5
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / 1e6)


def test_randomizer_sends_the_value_and_noise_in_pairs():
    noise = CorrelatedNoise(0.6, 4.0, 0.8)
    randomizer = CorrelatedRandomizer(5, noise, min_honest=3)
    values = np.array([0, 4, 2])
    batch = randomizer.randomize(values, seed=1)
    assert batch.n_users == 3 and batch.sender.max() <= 2
    # Each user's first message is its value, (x, +1).
    assert batch.payload[:3].tolist() == [0, 8, 4]
    assert randomizer.share_shapes == (1.0 / 3, 4.0 / 3)
    assert randomizer.expected_messages_per_user == pytest.approx(_messages(0.6, 4.0, 0.8, 5, 3))
    one = randomizer.randomize_one(2, seed=5)
    assert np.all(np.diff(one) >= 0) and 4 in one.tolist()
    counts = randomizer.message_counts(batch.payload)
    assert counts.shape == (2, 5) and counts.sum() == len(batch)
    with pytest.raises(DataError, match=r"payload 10 is not a message of a 5-bin domain"):
        randomizer.message_counts(np.array([0, 10]))
    with pytest.raises(DataError, match="outside the domain"):
        randomizer.randomize(np.array([5]))


def test_most_users_draw_no_noise_at_large_n():
    noise = CorrelatedNoise(0.634, 15.76, 0.9507)
    n, d = 100_000, 100
    batch = CorrelatedRandomizer(d, noise, n).randomize(np.zeros(n, dtype=np.int64), seed=2)
    noisy_users = np.unique(batch.sender[n:]).size
    # A user draws no cluster with probability exp(−d·(2λ_A + λ_W)/m) (Poisson numbers).
    rate = d * (-2.0 * math.log1p(-0.634) - 15.76 * math.log1p(-0.9507)) / n
    p = -math.expm1(-rate)
    assert abs(noisy_users - n * p) < 5 * math.sqrt(n * p * (1 - p))
    assert p < 0.06


# ------------------------------------------------------------------- min_honest


def test_min_honest_counts_fractions_and_errors():
    assert resolve_min_honest(None, 1000) == 1000
    assert resolve_min_honest(250, 1000) == 250
    assert resolve_min_honest(0.9, 100_000) == 90_000  # not 90_001 from 0.9·1e5 in floating point
    assert resolve_min_honest(1.0, 7) == 7
    assert resolve_min_honest(0.5, 3) == 2  # at least 1.5 honest users means 2
    assert resolve_min_honest(1e-9, 10) == 1
    for bad in (0, 1001, -3, 0.0, 1.5, math.nan, True, "9"):
        with pytest.raises(InvalidParameterError, match=r"min_honest must be a count of users"):
            resolve_min_honest(bad, 1000)


# ------------------------------------------------------------------- calibration


def test_calibration_meets_the_target_recomputed_from_its_parameters(calibration):
    c = calibration
    noise = CorrelatedNoise(math.exp(-c.a), c.flood_r, c.flood_q)
    recomputed = correlated_delta(EPS, noise, neighbours="replacement")
    assert recomputed == c.delta <= DELTA
    assert c.delta_lower <= c.delta
    # A second algorithm (each bin's law summed on a band) agrees to its own rounding.
    direct = generic_bin_delta(EPS, alpha=c.alpha, shape=1.0, flood_r=c.flood_r, flood_q=c.flood_q)
    assert direct == pytest.approx(c.delta, rel=1e-6)


def test_calibration_accuracy_and_cost_figures(calibration):
    c = calibration
    assert c.min_honest == 100_000 and c.neighbours == "replacement" and c.method == "exact"
    assert _std(c.alpha) == pytest.approx(c.per_bin_std, rel=1e-12)
    assert _std(c.alpha) <= 1.1 * CENTRAL_STD
    assert c.central_std == pytest.approx(CENTRAL_STD, rel=1e-12)
    assert c.std_ratio <= 1.1 + 1e-12
    assert c.flood_mean == pytest.approx(c.flood_r * c.flood_q / (1 - c.flood_q))
    expected = _messages(c.alpha, c.flood_r, c.flood_q, D, 100_000)
    assert c.expected_messages_per_user == pytest.approx(expected, rel=1e-12)
    assert expected <= 2.0  # issue 18's figure at n = 1e5
    assert _messages(c.alpha, c.flood_r, c.flood_q, D, 1_000_000) <= 1.1  # and at n = 1e6


def test_calibration_at_a_million_users_and_with_fewer_honest():
    c = calibrate_correlated(1_000_000, D, EPS, DELTA, min_honest=0.5)
    assert c.min_honest == 500_000
    assert c.per_bin_std <= 1.1 * CENTRAL_STD
    assert c.per_bin_std_all_users == pytest.approx(_std(c.alpha, 2.0), rel=1e-12)
    assert c.expected_messages_per_user == pytest.approx(
        _messages(c.alpha, c.flood_r, c.flood_q, D, 500_000), rel=1e-12
    )
    noise = CorrelatedNoise(c.alpha, c.flood_r, c.flood_q)
    assert correlated_delta(EPS, noise) == c.delta <= DELTA


def test_add_remove_uses_the_one_bin_central_parameter_and_every_bin():
    # Under the usual relation the absent user's shares are missing from all d bins: the
    # certificate takes d and m, and the calibration refuses an m that cannot hide them.
    c = calibrate_correlated(100_000, 10, EPS, DELTA, neighbours="add-remove")
    central = math.sqrt(2.0 * math.exp(-1.0)) / (1.0 - math.exp(-1.0))
    assert c.per_bin_std <= 1.1 * central and c.central_std == pytest.approx(central)
    noise = CorrelatedNoise(c.alpha, c.flood_r, c.flood_q)
    kwargs = dict(neighbours="add-remove", domain_size=10, min_honest=100_000)
    assert correlated_delta(EPS, noise, **kwargs) == c.delta <= DELTA
    assert correlated_delta(EPS, noise, rounding="down", **kwargs) == c.delta_lower <= c.delta
    assert c.privacy_report().neighbouring.startswith("add-remove: one user present or absent")
    with pytest.raises(InvalidParameterError, match="raise min_honest"):
        calibrate_correlated(100_000, 10, EPS, DELTA, neighbours="add-remove", min_honest=100)


def test_calibration_rejects_bad_input_naming_it():
    cases = [
        (dict(slack=0.0), "slack must be a finite number > 0, got 0.0"),
        (dict(neighbours="swap"), "neighbours must be 'replacement' or 'add-remove', got 'swap'"),
        (dict(min_honest=0), "min_honest must be a count of users"),
    ]
    for kwargs, message in cases:
        with pytest.raises(InvalidParameterError, match=message):
            calibrate_correlated(1000, 10, EPS, DELTA, **kwargs)
    with pytest.raises(InvalidParameterError, match="delta must be in the open interval"):
        calibrate_correlated(1000, 10, EPS, 0.0)
    with pytest.raises(InvalidParameterError, match="domain_size must be an integer >= 2"):
        calibrate_correlated(1000, 1, EPS, DELTA)


def test_hand_picked_parameters_report_the_certificate():
    at_eps = correlated_parameters(a=0.4, r=20.0, q=0.9, n=5000, domain_size=8, epsilon=1.0)
    noise = CorrelatedNoise(math.exp(-0.4), 20.0, 0.9)
    assert at_eps.delta == correlated_delta(1.0, noise) and at_eps.method == "fixed"
    at_delta = correlated_parameters(a=0.4, r=20.0, q=0.9, n=5000, domain_size=8, delta=1e-6)
    assert correlated_delta(at_delta.epsilon, noise) == at_delta.delta <= 1e-6
    # The ε found is the smallest to the search's precision: a little less fails.
    assert correlated_delta(at_delta.epsilon * (1 - 1e-4), noise) > 1e-6
    with pytest.raises(InvalidParameterError, match="give exactly one of epsilon"):
        correlated_parameters(a=0.4, r=20.0, q=0.9, n=50, domain_size=8)
    with pytest.raises(InvalidParameterError, match="a must be a finite number > 0, got -1"):
        correlated_parameters(a=-1, r=20.0, q=0.9, n=50, domain_size=8, epsilon=1.0)
    with pytest.raises(InvalidParameterError, match=r"flooding mean E\[W\]"):
        correlated_parameters(a=0.4, r=1e6, q=0.99, n=50, domain_size=8, epsilon=1.0)
    assert MAX_FLOOD_MEAN == 1e7


# ------------------------------------------------------------------- the papers' rule


def test_papers_rule_as_we_read_it_and_its_exact_privacy():
    rule = paper_correlated_noise(EPS, DELTA)
    assert rule.noise.a == pytest.approx(0.45)
    assert rule.noise.flood_q == pytest.approx(math.exp(-0.2 * 0.05))
    assert rule.noise.flood_r == pytest.approx(3.0 * (1.0 + math.log(2e6)))
    # Our reading gives E[W] ≈ 4,629 per bin, not the notes' 29,115 (stated in the docstring).
    assert rule.noise.flood_mean == pytest.approx(4629.37, rel=1e-5)
    noise = CorrelatedNoise(math.exp(-0.45), rule.noise.flood_r, rule.noise.flood_q)
    assert rule.delta_at_epsilon == correlated_delta(EPS, noise) <= DELTA
    assert correlated_delta(rule.exact_epsilon, noise) == rule.delta_at_exact_epsilon <= DELTA
    assert correlated_delta(rule.exact_epsilon * (1 - 1e-4), noise) > DELTA
    assert 0.90 < rule.exact_epsilon < 0.91  # the notes: about 0.90
    calibration, same = paper_correlated_calibration(100_000, D, EPS, DELTA)
    assert calibration.method == "paper" and calibration.delta == rule.delta_at_epsilon
    assert same.noise == rule.noise
    assert calibration.expected_messages_per_user == pytest.approx(
        _messages(noise.alpha, noise.flood_r, noise.flood_q, D, 100_000)
    )
    one_bin, eps_w, delta_w = paper_flooding(EPS, DELTA, neighbours="add-remove")
    assert one_bin.a == pytest.approx(0.9) and eps_w == pytest.approx(0.1) and delta_w == DELTA
    with pytest.raises(InvalidParameterError, match="gamma must be in the open interval"):
        paper_correlated_noise(EPS, DELTA, gamma=1.0)


# ------------------------------------------------------------------- protocol and report


def test_protocol_report_estimate_and_statistic(calibration):
    protocol = CorrelatedProtocol(calibration)
    report = protocol.privacy_report()
    assert report.method == CORRELATED_PRIVACY_METHOD and report.bound is BoundKind.UPPER
    assert report.delta == calibration.delta and report.lower_bound_delta <= report.delta
    assert "at least 100000 of the 100000 users" in report.assumptions[0]
    assert report.parameters["min_honest"] == 100_000
    stat = np.array([[5, 0, 9] + [0] * 97, [2, 3, 0] + [0] * 97])
    est = protocol.estimate(stat)
    assert est.counts[:3].tolist() == [3.0, -3.0, 9.0] and est.unbiased
    assert est.stderr is not None and np.all(est.stderr == calibration.per_bin_std_all_users)
    assert protocol.messages_in(stat) == 19
    with pytest.raises(DataError, match=r"statistic must be a \(2, 100\) integer array"):
        protocol.estimate(stat[0])
    batch = ShuffledBatch(payload=np.array([0, 1, 1, 198]), n_users=2)
    assert protocol.statistic_from_messages(batch)[:, [0, 99]].tolist() == [[1, 1], [2, 0]]


def test_run_on_labels_checks_n_and_states_a_seeded_run():
    protocol = CorrelatedProtocol.from_parameters(
        a=0.4, r=20.0, q=0.9, n=300, domain=["x", "y", "z"], delta=1e-6, min_honest=200
    )
    values = ["x"] * 100 + ["y"] * 150 + ["z"] * 50
    run = protocol.run(values, seed=7)
    assert run.protocol == "correlated" and run.estimate.domain == ["x", "y", "z"]
    assert SEEDED_NOT_COVERED in run.privacy.not_covered
    assert protocol.run(values).privacy.not_covered == ()
    assert run.messages == int(run.statistic.sum())
    counted = protocol.run(values, path="count", seed=7)
    assert counted.statistic.shape == (2, 3)
    with pytest.raises(DataError, match="calibrated for n=300 users but got 2"):
        protocol.run(["x", "y"])
    with pytest.raises(InvalidParameterError, match="labels has 2 entries"):
        CorrelatedProtocol(protocol.calibration, labels=["a", "b"])
    assert protocol.parameters()["min_honest"] == 200
