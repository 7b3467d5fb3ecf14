"""The §6 baselines of the segmented paper: randomizers, estimators and certified guarantees.

Guarantees are recomputed by independent routes: the subset-selection
randomizer's probabilities by enumerating every subset of a small domain, the
shuffle δ by calling the accountants again at the returned parameters, and
the MM accountant against an exact enumeration of the whole message histogram
of a tiny protocol (no package code).
"""

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.accounting import delta as accounting_delta
from shuffledp.accounting.certificates.segmented import level_delta
from shuffledp.baselines import (
    PAD,
    SetFrequencyMechanism,
    calibrate_mm,
    calibrate_sepmm,
    calibrate_subexp_local,
    calibrate_subexp_shuffle,
    calibrate_weighted_sepmm,
)
from shuffledp.baselines.mm_shuffle import (
    blanket_count_moments,
    calibrate_blanket_rate,
    lwy_item_delta,
    mm_level_delta,
)
from shuffledp.baselines.privset import (
    SubsetSelection,
    optimal_subset_size,
    subset_error,
    subset_rates,
)
from shuffledp.baselines.sepmm import paper_weights
from shuffledp.privacy import BoundKind


def _uniform_sets(n, d, s, rng):
    return np.argsort(rng.random((n, d)), axis=1)[:, :s].astype(np.int64)


def _skewed_sets(n, d, s, rng, padded=0):
    """Users holding s items drawn with Zipf-like weights; the last ``padded`` rows padded."""
    weights = 1.0 / np.arange(1, d + 1)
    keys = rng.random((n, d)) ** (1.0 / weights)  # weighted sampling without replacement
    items = np.argsort(-keys, axis=1)[:, :s].astype(np.int64)
    if padded:
        sizes = rng.integers(0, s, size=padded)
        for row, size in zip(range(n - padded, n), sizes, strict=True):
            items[row, size:] = PAD
    return items


def _frequencies(items, d):
    flat = items.ravel()
    return np.bincount(flat[flat != PAD], minlength=d) / items.shape[0]


# --- PrivSet's subset selection: the distribution by enumeration -----------------------------


def _brute_subset_law(big_d, x, k, eps):
    """P[Z | x] for every k-subset Z, from e^{ε·[Z ∩ x ≠ ∅]} normalized by direct summation."""
    subsets = list(itertools.combinations(range(big_d), k))
    weights = np.array([math.exp(eps) if set(z) & set(x) else 1.0 for z in subsets])
    return subsets, weights / weights.sum()


def _valid_padded_sets(d, s, padding):
    """Every input the randomizer can see: s real items, or fewer plus dummies d, d+1, …"""
    out = []
    for size in range(0 if padding else s, s + 1):
        for real in itertools.combinations(range(d), size):
            out.append(tuple(real) + tuple(d + j for j in range(s - size)))
    return out


@pytest.mark.parametrize(("d", "s", "padding"), [(5, 2, False), (4, 2, True), (6, 3, False)])
def test_subset_selection_is_exactly_epsilon_ldp(d, s, padding):
    eps = 1.3
    big_d = d + (s if padding else 0)
    for k in range(1, big_d - s + 1):
        laws = {}
        for x in _valid_padded_sets(d, s, padding):
            subsets, law = _brute_subset_law(big_d, x, k, eps)
            laws[x] = law
        stacked = np.array(list(laws.values()))
        ratio = float(np.max(stacked.max(axis=0) / stacked.min(axis=0)))
        assert ratio == pytest.approx(math.exp(eps), rel=1e-12)  # attained, never exceeded
        # Closed-form marginals and intersection law against the enumeration.
        x = next(iter(laws))
        law = laws[x]
        t, f = subset_rates(big_d, s, k, eps)
        hold = sum(p for z, p in zip(subsets, law, strict=True) if x[0] in z)
        outside = next(j for j in range(big_d) if j not in x)
        miss = sum(p for z, p in zip(subsets, law, strict=True) if outside in z)
        assert t == pytest.approx(hold, rel=1e-12)
        assert f == pytest.approx(miss, rel=1e-12)
        sel = SubsetSelection(d, s, eps, k, padding)
        brute_inter = np.zeros(min(s, k) + 1)
        for z, p in zip(subsets, law, strict=True):
            brute_inter[len(set(z) & set(x))] += p
        np.testing.assert_allclose(sel.intersection_law(), brute_inter, rtol=1e-12, atol=1e-300)


def test_subset_sampler_matches_the_enumerated_law():
    d, s, k, eps = 5, 2, 2, 1.0
    sel = SubsetSelection(d, s, eps, k, padding=True)  # D = 7
    items = np.tile(np.array([[3, PAD]]), (60_000, 1))  # padded to {3, 5}
    subsets = sel.randomize(items, seed=11)
    assert subsets.shape == (60_000, k)
    assert np.all(np.diff(subsets, axis=1) > 0)  # distinct, sorted
    counts = defaultdict(int)
    for row in map(tuple, subsets.tolist()):
        counts[row] += 1
    all_z, law = _brute_subset_law(7, (3, 5), k, eps)
    observed = np.array([counts[z] for z in all_z])
    assert sum(counts.values()) == observed.sum()  # no subset outside the law
    _, p_value = stats.chisquare(observed, law * observed.sum())
    assert p_value > 1e-4


def test_subset_size_is_variance_optimal():
    for d, s, eps, padding in [(128, 4, 2.0, False), (17, 4, 0.5, True), (7, 2, 3.0, True)]:
        big_d = d + (s if padding else 0)
        errors = [subset_error(d, s, k, eps, padding=padding) for k in range(1, big_d - s + 1)]
        assert optimal_subset_size(d, s, eps, padding=padding) == int(np.argmin(errors)) + 1
    assert optimal_subset_size(128, 4, 2.0, padding=False) == 4

    # The authors' reference criterion (one-item histogram) picks a neighbour.
    def reference(k):
        t, f = subset_rates(128, 4, k, 2.0)
        return (t * (1 - t) + 127 * f * (1 - f)) / (t - f) ** 2

    assert abs(min(range(1, 125), key=reference) - 4) <= 1


@pytest.mark.parametrize("padding", [False, True])
def test_subset_estimator_is_unbiased(padding):
    rng = np.random.default_rng(5)
    d, s, n, reps = 10, 3, 1500, 300
    items = _skewed_sets(n, d, s, rng, padded=400 if padding else 0)
    w = _frequencies(items, d)
    mech = calibrate_subexp_local(n, d, s, epsilon=1.0, padding=padding)
    runs = np.array([mech.run(items, seed=rep, path="count").frequencies for rep in range(reps)])
    t, f = mech.randomizer.rates
    var = (w * t * (1 - t) + (1 - w) * f * (1 - f)) / (n * (t - f) ** 2)
    z = (runs.mean(axis=0) - w) / np.sqrt(var / reps)
    assert np.max(np.abs(z)) < 4.0
    ratio = runs.var(axis=0, ddof=1) / var
    assert 0.75 < ratio.mean() < 1.25
    assert mech.expected_error(w) == pytest.approx(var.sum())
    # Plug-in standard errors are close to the true ones.
    est = mech.run(items, seed=1)
    np.testing.assert_allclose(est.stderr, np.sqrt(var), rtol=0.2)


def test_subexp_message_and_count_paths_agree():
    rng = np.random.default_rng(2)
    items = _uniform_sets(800, 12, 3, rng)
    mech = calibrate_subexp_shuffle(800, 12, 3)
    msg = np.array([mech.run(items, seed=r).statistic for r in range(150)])
    cnt = np.array([mech.run(items, seed=r + 1000, path="count").statistic for r in range(150)])
    assert msg.sum(axis=1).tolist() == [800 * mech.randomizer.subset_size] * 150
    se = np.sqrt(msg.var(axis=0) / 150 + cnt.var(axis=0) / 150)
    assert np.max(np.abs(msg.mean(axis=0) - cnt.mean(axis=0)) / se) < 4.5


# --- Subexp guarantees --------------------------------------------------------------------


def test_subexp_local_guarantee():
    mech = calibrate_subexp_local(5000, 128, 4)
    (report,) = mech.privacy_reports()
    assert (report.epsilon, report.delta, report.bound) == (2.0, 0.0, BoundKind.EXACT)
    assert mech.randomizer.epsilon == 2.0 and mech.randomizer.subset_size == 4
    assert isinstance(mech, SetFrequencyMechanism)


@pytest.mark.parametrize("n", [5000, 50_000])
def test_subexp_shuffle_guarantee_is_recomputed(n):
    target = 0.01 / n
    mech = calibrate_subexp_shuffle(n, 128, 4)
    (report,) = mech.privacy_reports()
    eps0 = mech.randomizer.epsilon
    assert report.epsilon == 0.5 and report.delta <= target
    again = accounting_delta(0.5, n=n, mechanism="generic", method="vr2024", epsilon0=eps0)
    assert again.certified and again.delta <= target
    # ε₀ is (nearly) the largest certified: 0.1% more is not.
    above = accounting_delta(0.5, n=n, mechanism="generic", method="vr2024", epsilon0=eps0 * 1.001)
    assert above.delta > target
    assert report.parameters["epsilon0"] == eps0


# --- MM: accounting ---------------------------------------------------------------------


def _add_message(law, choices):
    out = defaultdict(float)
    for hist, p in law.items():
        for item, q in choices.items():
            new = list(hist)
            if item is not None:
                new[item] += 1
            out[tuple(new)] += p * q
    return dict(out)


def _lwy_histogram_law(d, victim, others, n, m):
    """Exact law of the message histogram (the total is its sum): all slots, LWY blanket."""
    law = {tuple([0] * d): 1.0}
    for item in (*victim, *others):
        law = _add_message(law, {item: 1.0})
    whole, frac = math.floor(m), m - math.floor(m)
    uniform = {j: 1.0 / d for j in range(d)}
    for _ in range(n):
        for _ in range(whole):
            law = _add_message(law, uniform)
        if frac > 0:
            law = _add_message(law, {**{j: frac / d for j in range(d)}, None: 1.0 - frac})
    return law


def _exact_delta(p_law, q_law, eps):
    keys = set(p_law) | set(q_law)
    one = sum(max(0.0, p_law.get(k, 0.0) - math.exp(eps) * q_law.get(k, 0.0)) for k in keys)
    two = sum(max(0.0, q_law.get(k, 0.0) - math.exp(eps) * p_law.get(k, 0.0)) for k in keys)
    return max(one, two)


@pytest.mark.parametrize(("m", "eps"), [(1.5, 0.4), (0.6, 0.8), (2.0, 0.3), (2.3, 1.0)])
def test_lwy_slot_delta_matches_exact_enumeration(m, eps):
    d, n = 3, 3
    others = (2, 1)  # the other users' items, sent unchanged
    p = _lwy_histogram_law(d, (0,), others, n, m)
    q = _lwy_histogram_law(d, (1,), others, n, m)
    exact = _exact_delta(p, q, eps)
    ours = lwy_item_delta(eps, message_domain=d, n=n, blanket_rate=m)
    assert exact <= ours <= exact * 1.01 + 1e-15


def test_lwy_user_delta_bounds_the_whole_set_change():
    d, n, m, eps = 4, 2, 1.5, 0.8
    p = _lwy_histogram_law(d, (0, 1), (3, 2), n, m)
    q = _lwy_histogram_law(d, (2, 3), (3, 2), n, m)
    exact = _exact_delta(p, q, eps)
    ours = mm_level_delta(eps, message_domain=d, items=2, n=n, blanket_rate=m, blanket="lwy")
    assert exact <= ours


@pytest.mark.parametrize("m", [1.0, 3.0, 7.0])
def test_lwy_and_alg2_agree_at_integer_rates(m):
    kw = {"message_domain": 128, "items": 4, "n": 5000, "blanket_rate": m}
    lwy = mm_level_delta(0.5, blanket="lwy", **kw)
    alg2 = mm_level_delta(0.5, blanket="alg2", **kw)
    assert lwy == pytest.approx(alg2, rel=1e-3)
    assert blanket_count_moments(5000, m, "lwy") == blanket_count_moments(5000, m, "alg2")


def test_alg2_delta_is_not_monotone_in_the_blanket_rate():
    kw = {"message_domain": 32, "items": 2, "n": 2000, "blanket": "alg2"}
    at_two = mm_level_delta(0.5, blanket_rate=2.0, **kw)
    just_above = mm_level_delta(0.5, blanket_rate=2.0001, **kw)
    assert just_above > at_two  # ⌈m⌉ jumps: more spread in the blanket count
    # LWY's count grows stochastically with m: no jump.
    lwy = {**kw, "blanket": "lwy"}
    assert mm_level_delta(0.5, blanket_rate=2.0001, **lwy) <= mm_level_delta(
        0.5, blanket_rate=2.0, **lwy
    )


@pytest.mark.parametrize("blanket", ["lwy", "alg2"])
@pytest.mark.parametrize(("n", "eps"), [(5000, 0.5), (1250, 0.5), (12_500, 2.0)])
def test_mm_calibration_is_certified_and_minimal(blanket, n, eps):
    target = 1e-6
    d_msg, s = 128, 4
    m, certified = calibrate_blanket_rate(
        eps, target, message_domain=d_msg, items=s, n=n, blanket=blanket
    )
    assert certified <= target
    recomputed = mm_level_delta(
        eps, message_domain=d_msg, items=s, n=n, blanket_rate=m, blanket=blanket
    )
    assert recomputed <= target
    if blanket == "alg2":  # the package's accountant, called directly
        assert level_delta(eps, 1.0, message_domain=d_msg, items=s, n=n, blanket_rate=m) <= target
    # Every smaller rate on a grid fails (δ evaluated, not assumed monotone).
    for smaller in np.linspace(m * 0.05, m * (1 - 2e-3), 25):
        value = mm_level_delta(
            eps, message_domain=d_msg, items=s, n=n, blanket_rate=float(smaller), blanket=blanket
        )
        assert value > target


def test_mm_guarantee_report():
    mech = calibrate_mm(5000, 128, 4, blanket="alg2")
    (report,) = mech.privacy_reports()
    assert report.epsilon == 0.5 and report.delta <= 0.01 / 5000
    assert report.bound is BoundKind.UPPER
    assert report.lower_bound_delta is not None and report.lower_bound_delta <= report.delta
    m = report.parameters["blanket_rate"]
    assert m == mech.blanket_rate
    again = level_delta(0.5, 1.0, message_domain=128, items=4, n=5000, blanket_rate=m)
    assert again <= 0.01 / 5000


# --- MM: estimator ---------------------------------------------------------------------


@pytest.mark.parametrize(("blanket", "padding"), [("lwy", False), ("alg2", True)])
def test_mm_estimator_is_unbiased_and_paths_agree(blanket, padding):
    rng = np.random.default_rng(9)
    d, s, n, reps = 16, 3, 600, 300
    items = _skewed_sets(n, d, s, rng, padded=150 if padding else 0)
    w = _frequencies(items, d)
    mech = calibrate_mm(n, d, s, epsilon=1.0, delta=1e-4, padding=padding, blanket=blanket)
    assert mech.message_domain == d + (1 if padding else 0)
    count = np.array([mech.run(items, seed=r, path="count").frequencies for r in range(reps)])
    message = np.array([mech.run(items, seed=r + 10**6).frequencies for r in range(reps)])
    var = mech.blanket_variance() / n**2
    for runs in (count, message):
        z = (runs.mean(axis=0) - w) / math.sqrt(var / reps)
        assert np.max(np.abs(z)) < 4.0
        assert 0.75 < float(np.mean(runs.var(axis=0, ddof=1))) / var < 1.25
    assert mech.expected_error() == pytest.approx(d * var)
    est = mech.run(items, seed=3)
    np.testing.assert_allclose(est.stderr, math.sqrt(var))
    expected_messages = n * s + n * mech.blanket_rate
    assert abs(est.messages - expected_messages) < 6 * math.sqrt(
        blanket_count_moments(n, mech.blanket_rate, blanket)[1] + 1
    )


# --- SepMM --------------------------------------------------------------------------------


def _levels(n, shares, rng):
    counts = [round(n * f) for f in shares[:-1]]
    counts.append(n - sum(counts))
    levels = np.repeat(np.arange(len(counts)), counts)
    rng.shuffle(levels)
    return levels, tuple(counts)


def test_paper_weights_formula():
    w = paper_weights(
        (0.5, 1.0, 2.0), (1250, 2500, 1250), domain_size=128, items_per_user=4, delta=2e-6
    )
    raw = [
        1 / math.sqrt(128 * 16 * math.log(1 / 2e-6) / (nk * ek) ** 2 + 4 / nk)
        for ek, nk in [(0.5, 1250), (1.0, 2500), (2.0, 1250)]
    ]
    np.testing.assert_allclose(w, np.array(raw) / sum(raw))
    assert w.sum() == pytest.approx(1.0)


def test_sepmm_levels_are_certified_separately():
    rng = np.random.default_rng(4)
    n = 5000
    _, counts = _levels(n, (0.25, 0.5, 0.25), rng)
    mech = calibrate_weighted_sepmm(counts, 128, 4)
    reports = mech.privacy_reports()
    assert [r.epsilon for r in reports] == [0.5, 1.0, 2.0]
    for report, part, nk in zip(reports, mech.parts, counts, strict=True):
        assert report.delta <= 0.01 / n and report.n == nk and part.n == nk
        again = mm_level_delta(
            report.epsilon, message_domain=128, items=4, n=nk, blanket_rate=part.blanket_rate
        )
        assert again <= 0.01 / n
    # Looser levels need fewer blanket messages.
    rates = [part.blanket_rate for part in mech.parts]
    assert rates[0] > rates[1] > rates[2]
    assert mech.weights == pytest.approx(
        tuple(
            paper_weights(
                (0.5, 1.0, 2.0), counts, domain_size=128, items_per_user=4, delta=0.01 / n
            )
        )
    )


def test_sepmm_estimator_is_unbiased_for_the_weighted_levels():
    rng = np.random.default_rng(8)
    d, s, n, reps = 12, 2, 900, 250
    items = _skewed_sets(n, d, s, rng)
    levels, counts = _levels(n, (0.25, 0.5, 0.25), rng)
    for weighting in ("equal", "paper", "inverse_variance"):
        mech = calibrate_sepmm(counts, d, s, delta=1e-4, weighting=weighting)
        assert sum(mech.weights) == pytest.approx(1.0)
        if weighting == "equal":
            assert mech.weights == pytest.approx((1 / 3, 1 / 3, 1 / 3))
        target = sum(a * _frequencies(items[levels == k], d) for k, a in enumerate(mech.weights))
        runs = np.array(
            [
                mech.run(items, user_levels=levels, seed=r, path="count").frequencies
                for r in range(reps)
            ]
        )
        est = mech.run(items, user_levels=levels, seed=0)
        assert len(est.parts) == 3 and est.weights == mech.weights
        var = est.stderr**2
        z = (runs.mean(axis=0) - target) / np.sqrt(var / reps)
        assert np.max(np.abs(z)) < 4.0
        assert mech.expected_error() == pytest.approx(var.sum())


# --- Bad inputs ---------------------------------------------------------------------------


def test_bad_parameters_raise_invalid_parameter_error():
    with pytest.raises(InvalidParameterError, match="epsilon must be a finite number > 0"):
        calibrate_subexp_local(100, 10, 2, epsilon=0.0)
    with pytest.raises(InvalidParameterError, match="items_per_user must be an integer between"):
        calibrate_subexp_local(100, 10, 11)
    with pytest.raises(InvalidParameterError, match="subset_size"):
        calibrate_subexp_local(100, 10, 2, subset_size=9)
    with pytest.raises(InvalidParameterError, match="delta must be in the open interval"):
        calibrate_subexp_shuffle(100, 10, 2, delta=1.5)
    with pytest.raises(InvalidParameterError, match="blanket must be 'lwy' or 'alg2'"):
        calibrate_mm(100, 10, 2, blanket="poisson")
    with pytest.raises(InvalidParameterError, match="blanket_rate m must be a finite number"):
        mm_level_delta(0.5, message_domain=10, items=2, n=100, blanket_rate=-1.0)
    with pytest.raises(InvalidParameterError, match="strictly increasing"):
        calibrate_sepmm((10, 10), 10, 2, levels=(1.0, 0.5))
    with pytest.raises(InvalidParameterError, match="one per level"):
        calibrate_sepmm((10, 10), 10, 2)
    with pytest.raises(InvalidParameterError, match="at least one user"):
        calibrate_sepmm((10, 0, 10), 10, 2)
    with pytest.raises(InvalidParameterError, match="weighting must be one of"):
        calibrate_sepmm((10, 10, 10), 10, 2, weighting="snr")
    with pytest.raises(InvalidParameterError, match="sets weighting"):
        calibrate_weighted_sepmm((10, 10, 10), 10, 2, weighting="equal")
    with pytest.raises(InvalidParameterError, match="domain_size"):
        calibrate_mm(100, 1, 1)


def test_bad_data_raise_data_error():
    rng = np.random.default_rng(0)
    mech = calibrate_mm(50, 8, 2, epsilon=2.0, delta=1e-3)
    good = _uniform_sets(50, 8, 2, rng)
    with pytest.raises(DataError, match="calibrated for n=50"):
        mech.run(good[:40])
    with pytest.raises(DataError, match="3 columns"):
        mech.run(np.zeros((50, 3), dtype=np.int64))
    bad = good.copy()
    bad[0] = [1, 1]
    with pytest.raises(DataError, match="lists an item twice"):
        mech.run(bad)
    bad[0] = [1, 8]
    with pytest.raises(DataError, match="outside the domain"):
        mech.run(bad)
    bad[0] = [1, PAD]
    with pytest.raises(DataError, match="padding=True"):
        mech.run(bad)
    padded = calibrate_mm(50, 8, 2, epsilon=2.0, delta=1e-3, padding=True)
    as_symbol = good.copy()
    as_symbol[:10, 1] = 8  # the segmented protocol's padding symbol d
    as_pad = np.where(as_symbol == 8, PAD, as_symbol)
    assert padded.run(as_symbol.astype(np.int16), seed=1, path="count").statistic.tolist() == (
        padded.run(as_pad, seed=1, path="count").statistic.tolist()
    )
    with pytest.raises(DataError, match="integer matrix"):
        mech.run(good.astype(float))
    with pytest.raises(InvalidParameterError, match="path must be"):
        mech.run(good, path="fast")
    with pytest.raises(DataError, match="user_levels"):
        mech.run(good, user_levels=np.zeros(3, dtype=np.int64))
    sep = calibrate_sepmm((20, 30), 8, 2, levels=(1.0, 2.0), delta=1e-3)
    with pytest.raises(DataError, match="needs user_levels"):
        sep.run(good)
    with pytest.raises(DataError, match="calibrated for"):
        sep.run(good, user_levels=np.zeros(50, dtype=np.int64))
