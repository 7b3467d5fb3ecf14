"""Audit of the blocked certified bounds against independent exact computations.

Every exact value here is built from the mechanisms' definitions in mpmath
(no package code): the two-count pair by enumerating (C, A, victim), the k-RR
histogram of every dataset of a few users, and the Poisson randomizer's full
histogram over d items. The package's numbers must be upper bounds (and the
"down" roundings lower bounds) of them.
"""

import itertools
import math
from collections import defaultdict

import mpmath
import numpy as np
import pytest
from scipy.stats import binom

from shuffledp.accounting import amplified_epsilon, calibrate
from shuffledp.accounting.certificates.krr import krr_delta, krr_delta_curve
from shuffledp.accounting.certificates.poisson import poisson_delta, poisson_delta_curve
from shuffledp.accounting.numerics.binomial import DEFAULT_TAIL, binomial_window
from shuffledp.accounting.numerics.two_counts import (
    TwoCountPair,
    two_count_delta,
    two_count_delta_direct,
    two_count_delta_lines,
)

mpmath.mp.dps = 45


def _hockey_both(law_a, law_b, epsilon):
    e = mpmath.exp(mpmath.mpf(epsilon))
    zero = mpmath.mpf(0)
    forward = backward = zero
    for key in law_a.keys() | law_b.keys():
        p, q = law_a.get(key, zero), law_b.get(key, zero)
        forward += max(zero, p - e * q)
        backward += max(zero, q - e * p)
    return max(forward, backward)


def _mp_two_count(m, rate, w1, w2, w0, epsilon):
    """Exact H_ε of the two-count pair from its definition (both directions)."""
    r, w1, w2 = mpmath.mpf(rate), mpmath.mpf(w1), mpmath.mpf(w2)
    w0 = 1 - w1 - w2 if w0 is None else mpmath.mpf(w0)
    p, q = defaultdict(mpmath.mpf), defaultdict(mpmath.mpf)
    for c in range(m + 1):
        pc = mpmath.binomial(m, c) * r**c * (1 - r) ** (m - c)
        for a in range(c + 1):
            pa = pc * mpmath.binomial(c, a) / mpmath.mpf(2) ** c
            for (d1, d2), w in (((1, 0), w1), ((0, 1), w2), ((0, 0), w0)):
                p[(a + d1, c - a + d2)] += pa * w
                q[(a + d2, c - a + d1)] += pa * w
    return _hockey_both(dict(p), dict(q), epsilon)


# Edge cases of claim 1 whose computed line weights do not underflow (see the audit
# report: with a γ that underflows to 0, rounding="down" is not a lower bound).
_RATES = [(0.0, None), (1e-3, None), (0.3, None), (0.5, None), (1 - 2**-30, 2**-30), (1.0, 0.0)]
_WEIGHTS = [
    (1.0, 0.0, 0.0),
    (0.5, 0.5, None),
    (0.3, 0.0, 0.7),
    (0.7, 0.2, 0.1),
    (0.7, 0.2, None),
    (0.999, 0.001, 0.0),
    (0.5, 0.5 - 1e-12, 1e-12),
]
_EPSILONS = [0.0, 1e-300, 1e-6, 0.05, 1.0, 5.0, 29.99, 30.01, 100.0, 700.0, 1000.0]


def test_two_count_brackets_exact_enumeration_on_edge_cases():
    for (rate, comp), (w1, w2, w0), m in itertools.product(_RATES, _WEIGHTS, (0, 1, 2, 5)):
        pair = TwoCountPair(blanket=m, rate=rate, w1=w1, w2=w2, w0=w0, rate_complement=comp)
        for eps in _EPSILONS:
            exact = _mp_two_count(m, rate, w1, w2, w0, eps)
            assert mpmath.mpf(two_count_delta(pair, eps)) >= exact, (pair, eps)
            assert mpmath.mpf(two_count_delta(pair, eps, rounding="down")) <= exact, (pair, eps)


def test_blocked_two_count_brackets_direct_sum_with_many_lines():
    # 522 lines (> 512), so blocks of lines are used; direct O(m²) sum as the reference.
    pair = TwoCountPair(blanket=2_600, rate=0.5, w1=0.55, w2=0.05, w0=0.4)
    for eps in (0.03, 0.1):
        direct = two_count_delta_direct(pair, eps)
        assert two_count_delta(pair, eps) >= direct * (1 - 1e-10)
        assert two_count_delta(pair, eps, rounding="down") <= direct * (1 + 1e-10)
    # More shapes against the exact line sum (rounded down).
    for pair in (
        TwoCountPair(blanket=40_000, rate=0.5, w1=1.0, w2=0.0, w0=0.0),
        TwoCountPair(blanket=40_000, rate=0.5, w1=0.55, w2=0.45, w0=0.0),
        TwoCountPair(blanket=400_000, rate=0.01, w1=0.3, w2=0.0, w0=0.7),
        TwoCountPair(blanket=400_000, rate=1 - 2**-7, w1=0.6, w2=0.1, rate_complement=2**-7),
    ):
        sd = math.sqrt(pair.blanket * pair.rate * (1 - pair.rate))
        for eps in (0.0, 1e-9, 0.3 / sd, 3.0 / sd, 0.5, 30.5, 700.0):
            assert two_count_delta(pair, eps) >= two_count_delta_lines(pair, eps, rounding="down")
            assert two_count_delta(pair, eps, rounding="down") <= two_count_delta_lines(pair, eps)


def test_default_tail_windows_with_blocks_never_start_at_zero():
    # The first block's upper virtual line sits at the window's first line s = lo; a
    # line s = 0 contributes nothing in line_divergence_each, so a blocked window
    # starting at 0 would drop that block (it does with tail=1e-300, see the report).
    # With the default tail a window of more than 512 lines needs a mean of ~620.
    for mean in (600, 620, 640, 700, 1000):
        for rate in (0.001, 0.01, 0.5):
            window = binomial_window(int(mean / rate), rate, DEFAULT_TAIL)
            if len(window.pmf) + 1 > 512:
                assert window.lo > 0


def _line_divergence(lam, s, eps):
    x = np.arange(s + 1)
    u, v = binom.pmf(x - 1, s - 1, 0.5), binom.pmf(x, s - 1, 0.5)
    p, q = lam * u + (1 - lam) * v, (1 - lam) * u + lam * v
    e = math.exp(eps)
    return max(np.sum(np.clip(p - e * q, 0, None)), np.sum(np.clip(q - e * p, 0, None)))


def test_line_divergence_monotone_on_a_dense_grid():
    lams = np.linspace(0.5, 1.0, 41)
    for eps in (0.0, 0.01, 0.1, 0.5, 2.0, 5.0):
        table = np.array([[_line_divergence(lam, s, eps) for lam in lams] for s in range(1, 61)])
        assert np.all(np.diff(table, axis=1) >= -1e-15)  # non-decreasing in λ
        assert np.all(np.diff(table, axis=0) <= 1e-15)  # non-increasing in s


def _krr_laws(others, k, a, b):
    """Histogram laws with the victim on 0 and on 1; others[j] users hold j."""
    law = {(0,) * k: mpmath.mpf(1)}
    values = [v for v, count in enumerate(others) for _ in range(count)]
    for value in [*values, None]:
        new = defaultdict(mpmath.mpf)
        for h, p in law.items():
            for y in range(k):
                bumped = list(h)
                bumped[y] += 1
                new[tuple(bumped)] += p * (a if y == value else b)
        law = dict(new) if value is not None else law
    out = []
    for x in (0, 1):
        full = defaultdict(mpmath.mpf)
        for h, p in law.items():
            for y in range(k):
                bumped = list(h)
                bumped[y] += 1
                full[tuple(bumped)] += p * (a if y == x else b)
        out.append(dict(full))
    return out


def _krr_worst(n, k, epsilon0, epsilons):
    """Exact worst δ over every dataset of n users (moves 0 → 1 up to relabelling, both ways)."""
    e = mpmath.exp(mpmath.mpf(epsilon0))
    a, b = e / (e + k - 1), 1 / (e + k - 1)
    best = {eps: mpmath.mpf(0) for eps in epsilons}
    m = n - 1
    for c0 in range(m + 1):
        for c1 in range(m + 1 - c0):
            rests = (
                [()]
                if k == 2
                else itertools.combinations_with_replacement(range(k - 2), m - c0 - c1)
            )
            if k == 2 and c0 + c1 != m:
                continue
            for combo in rests:
                counts = [c0, c1] + [list(combo).count(j) for j in range(k - 2)]
                p, q = _krr_laws(counts, k, a, b)
                for eps in epsilons:
                    best[eps] = max(best[eps], _hockey_both(p, q, eps))
    return best


@pytest.mark.parametrize(("k", "epsilon0"), [(2, 2.0), (3, 0.5), (3, 5.0), (3, 12.0), (4, 2.0)])
def test_krr_bound_curve_and_deciding_mode_dominate_every_dataset(k, epsilon0):
    epsilons = [0.01, 0.3 * epsilon0, 0.8 * epsilon0, epsilon0 - 1e-6]
    for n in (1, 2, 4) if k == 4 else (1, 2, 5):
        worst = _krr_worst(n, k, epsilon0, epsilons)
        curves = [krr_delta_curve(e, epsilon0, k, n) for e in (0.01, 0.9 * epsilon0)]
        for eps in epsilons:
            exact = worst[eps]
            assert mpmath.mpf(krr_delta(eps, epsilon0, k, n)) >= exact
            for curve in curves:
                assert mpmath.mpf(curve(eps)) >= exact
            for target in (1e-300, float(exact) * 0.99, float(exact) * 1.06, 1.0):
                value = krr_delta(eps, epsilon0, k, n, target=max(target, 1e-300))
                assert mpmath.mpf(value) >= exact


def _poisson_laws(lam, d, n_msg, gamma):
    """Full histogram over d items: n_msg potential uniform messages (each w.p. γ) + victim."""
    lam, gamma = mpmath.mpf(lam), mpmath.mpf(gamma)
    probs = [gamma / d] * d + [1 - gamma]
    base = {(0,) * d: mpmath.mpf(1)}
    for _ in range(n_msg):
        new = defaultdict(mpmath.mpf)
        for h, p in base.items():
            for j in range(d + 1):
                bumped = list(h)
                if j < d:
                    bumped[j] += 1
                new[tuple(bumped)] += p * probs[j]
        base = dict(new)
    laws = []
    for x in (0, 1):
        law = defaultdict(mpmath.mpf)
        for h, p in base.items():
            law[h] += p * (1 - lam)
            bumped = list(h)
            bumped[x] += 1
            law[tuple(bumped)] += p * lam
        laws.append(dict(law))
    return laws


@pytest.mark.parametrize("d", [2, 3, 4])
def test_poisson_bound_dominates_the_full_histogram_view(d):
    for n_msg, lam, gamma in itertools.product((0, 1, 4), (0.05, 0.5, 1.0), (0.1, 0.5, 1.0)):
        p, q = _poisson_laws(lam, d, n_msg, gamma)
        curve = poisson_delta_curve(2.0, lam, d, n_msg, blanket_probability=gamma)
        for eps in (0.01, 0.1, 0.5, 2.0):
            exact = _hockey_both(p, q, eps)
            up = poisson_delta(eps, lam, d, n_msg, blanket_probability=gamma)
            down = poisson_delta(eps, lam, d, n_msg, blanket_probability=gamma, rounding="down")
            assert mpmath.mpf(up) >= exact and mpmath.mpf(down) <= exact
            assert mpmath.mpf(curve(eps)) >= exact
            for target in (1e-300, float(exact) * 0.99 or 1e-300, float(exact) * 1.06 or 1.0):
                decided = poisson_delta(
                    eps, lam, d, n_msg, blanket_probability=gamma, target=target
                )
                assert mpmath.mpf(decided) >= exact


def test_amplified_epsilon_and_calibration_are_certified_by_brute_force():
    k, epsilon0, n = 3, 5.0, 5
    for target in (1e-2, 1e-4):
        row = amplified_epsilon(target, n=n, mechanism="krr", epsilon0=epsilon0, domain_size=k)
        assert row.certified
        assert _krr_worst(n, k, epsilon0, [row.epsilon])[row.epsilon] <= target
    lam_d, n_msg, gamma = 3, 4, 0.5
    row = amplified_epsilon(
        0.05,
        n=n_msg + 1,
        mechanism="poisson",
        report_probability=0.3,
        domain_size=lam_d,
        blanket_messages=n_msg,
        blanket_probability=gamma,
    )
    p, q = _poisson_laws(0.3, lam_d, n_msg, gamma)
    assert row.certified and _hockey_both(p, q, row.epsilon) <= 0.05
    cal = calibrate(
        1.0,
        0.05,
        n=n_msg + 1,
        mechanism="poisson",
        domain_size=lam_d,
        blanket_messages=n_msg,
        blanket_probability=gamma,
    )
    p, q = _poisson_laws(cal.value, lam_d, n_msg, gamma)
    assert _hockey_both(p, q, 1.0) <= 0.05
    cal = calibrate(1.0, 1e-2, n=n, mechanism="krr", domain_size=k)
    e0 = cal.value
    assert e0 <= 1.0 or _krr_worst(n, k, e0, [1.0])[1.0] <= 1e-2
