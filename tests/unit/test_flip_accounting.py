"""The FLIP accountant against independent computations.

The brute force below builds the joint law of the whole count vector report by
report (every report is a random binary vector with independent bits, Alg. 2),
without using the per-bin factorisation or the sorted-loss summation of the
accountant, and takes the hockey-stick divergence over every pair of
neighbouring datasets.
"""

import itertools
import math

import mpmath
import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.calibration import calibrate_flip_q
from shuffledp.accounting.certificates.flip import (
    flip_delta,
    flip_delta_for_pair,
    flip_delta_lower_bound,
    flip_epsilon,
    flip_local_epsilon,
)
from shuffledp.accounting.numerics.binomial import binomial_window
from shuffledp.accounting.numerics.hockey_stick import rounding_allowance
from shuffledp.accounting.reproductions.flip_paper import paper_flip_q


def _report_law(one_hot_bin: int | None, d: int, q: float) -> dict[tuple[int, ...], float]:
    law = {}
    for bits in itertools.product((0, 1), repeat=d):
        prob = 1.0
        for j, bit in enumerate(bits):
            original = 1 if j == one_hot_bin else 0
            prob *= q if bit != original else 1.0 - q
        law[bits] = prob
    return law


def _count_vector_law(histogram, k: int, q: float) -> np.ndarray:
    d = len(histogram)
    reports = [j for j, h in enumerate(histogram) for _ in range(h)]
    reports += [None] * (sum(histogram) * k)
    total = len(reports)
    law = np.zeros((total + 1,) * d)
    law[(0,) * d] = 1.0
    for value in reports:
        new = np.zeros_like(law)
        for bits, prob in _report_law(value, d, q).items():
            src = tuple(slice(0, total + 1 - b) for b in bits)
            dst = tuple(slice(b, total + 1) for b in bits)
            new[dst] += prob * law[src]
        law = new
    return law


def _histograms(n: int, d: int):
    for combo in itertools.combinations_with_replacement(range(d), n):
        yield tuple(np.bincount(combo, minlength=d))


def _brute_force(n: int, d: int, k: int, q: float, eps: float):
    """Return {(h, a, b): δ} over all neighbouring pairs, computed from full joint laws."""
    laws = {h: _count_vector_law(h, k, q) for h in _histograms(n, d)}
    out = {}
    for h, law in laws.items():
        for a in range(d):
            if h[a] == 0:
                continue
            for b in range(d):
                if b == a:
                    continue
                h2 = list(h)
                h2[a] -= 1
                h2[b] += 1
                other = laws[tuple(h2)]
                fwd = np.clip(law - math.exp(eps) * other, 0, None).sum()
                bwd = np.clip(other - math.exp(eps) * law, 0, None).sum()
                out[(h, a, b)] = max(fwd, bwd)
    return out


@pytest.mark.parametrize(
    ("n", "d", "k", "q"),
    [(3, 3, 1, 0.1), (3, 3, 1, 0.3), (2, 3, 2, 0.15), (4, 2, 1, 0.2), (3, 4, 0, 0.25)],
)
def test_exact_pair_and_certificate_against_brute_force(n, d, k, q):
    for eps in (0.1, 0.5, 1.5):
        brute = _brute_force(n, d, k, q, eps)
        for (h, a, b), value in brute.items():
            exact = flip_delta_for_pair(eps, q, k, n, h[a], h[b])
            assert exact == pytest.approx(value, abs=1e-11), (h, a, b, eps)
        worst = max(brute.values())
        assert flip_delta(eps, q, k, n) >= worst - 1e-15
        assert flip_delta_lower_bound(eps, q, k, n, d) <= worst + 1e-15


def test_certificate_covers_every_split_at_moderate_n():
    n, k, q = 40, 2, 0.05
    for eps in (0.3, 1.0):
        cert = flip_delta(eps, q, k, n)
        worst = max(
            flip_delta_for_pair(eps, q, k, n, h_a, h_b)
            for h_a in range(1, n + 1)
            for h_b in range(0, n - h_a + 1)
        )
        assert worst <= cert
        # The certificate loses only the noise of the real users' reports.
        assert flip_delta_lower_bound(eps, q, k, n, 3) <= worst


def test_symmetric_case_against_mpmath():
    # δ with Bin(M, q) backgrounds, summed over the full support at 40 digits.
    mpmath.mp.dps = 40
    M, q, eps = 400, mpmath.mpf(3) / 100, mpmath.mpf(1) / 2
    b = [mpmath.binomial(M, x) * q**x * (1 - q) ** (M - x) for x in range(M + 1)]

    def shifted(one):
        return [
            (one * (b[x - 1] if x > 0 else 0)) + (1 - one) * (b[x] if x <= M else 0)
            for x in range(M + 2)
        ]

    f, g = shifted(1 - q), shifted(q)
    e = mpmath.exp(eps)
    total = mpmath.mpf(0)
    for x in range(M + 2):
        for y in range(M + 2):
            term = f[x] * g[y] - e * g[x] * f[y]
            if term > 0:
                total += term
    # flip_delta with n·k = M background reports.
    computed = flip_delta(0.5, 0.03, 4, 100)
    window = binomial_window(M, 0.03)
    assert computed >= float(total)
    assert computed - float(total) <= rounding_allowance(window.rel_error, 2 * (M + 2)) + 2e-20


@pytest.mark.parametrize(
    ("m", "p"),
    [
        (3, 0.1),
        (20, 0.3),
        (200, 0.49),
        (5000, 0.3),
        (10**5, 0.4999),
        (10**6, 3e-4),
        (10**7, 0.01),
        (10**8, 0.2),
        (10**9, 2e-7),
        (10**10, 5e-8),
        (10**12, 1e-9),
    ],
)
def test_binomial_window_pmf_accuracy_and_dropped_mass(m, p):
    mpmath.mp.dps = 50
    w = binomial_window(m, p)
    xs = np.unique(
        np.r_[np.linspace(w.lo, w.hi, 25).astype(int), np.arange(w.lo, min(w.hi, w.lo + 10) + 1)]
    )
    mp_p = mpmath.mpf(p)  # the float p exactly
    for x in xs:
        exact = mpmath.binomial(m, int(x)) * mp_p ** int(x) * (1 - mp_p) ** (m - int(x))
        rel = abs(w.pmf[x - w.lo] - float(exact)) / float(exact)
        assert rel <= w.rel_error, (m, p, x, rel, w.rel_error)
    # The Bernstein window leaves out at most 1e-20 per side, so at most that is missing.
    assert w.dropped <= 2e-20
    assert w.pmf.sum() == pytest.approx(1.0, abs=1e-12)


def test_monotone_in_q_epsilon_and_n():
    n, k = 1000, 10
    qs = np.geomspace(1e-4, 0.2, 12)
    deltas = [flip_delta(1.0, q, k, n) for q in qs]
    # Compare above the ~4e-20 floor of the windows' left-out mass.
    above = [x for x in deltas if x > 1e-18]
    assert len(above) >= 5
    assert all(x > y for x, y in itertools.pairwise(above))
    eps_grid = [0.1, 0.3, 1.0, 2.0]
    deltas = [flip_delta(e, 0.002, k, n) for e in eps_grid]
    assert all(x >= y for x, y in itertools.pairwise(deltas))
    deltas = [flip_delta(1.0, 0.002, k, m) for m in (100, 300, 1000, 3000)]
    assert all(x >= y for x, y in itertools.pairwise(deltas))


def test_no_fake_users_gives_local_privacy_only():
    q = 0.2
    eps_local = flip_local_epsilon(q)
    assert eps_local == pytest.approx(2 * math.log(4))
    assert flip_delta(eps_local * 1.0001, q, 0, 50) < 1e-11
    assert flip_delta(eps_local * 0.9, q, 0, 50) > 1e-3


@pytest.mark.parametrize(
    ("n", "eps", "delta", "k"),
    [
        (10**4, 1.0, 1e-6, 100),
        (10**5, 0.5, 1e-8, 100),
        (10**6, 2.0, 1e-6, 20),
        (2000, 0.2, 1e-5, 5000),
    ],
)
def test_calibration_is_certified_and_minimal(n, eps, delta, k):
    q = calibrate_flip_q(eps, delta, n, k)
    assert flip_delta(eps, q, k, n) <= delta
    assert flip_delta(eps, q * (1 - 1e-5), k, n) > delta
    # The paper's q meets the same target (Claim III.1) and is larger.
    q_paper = paper_flip_q(eps, delta, n, k)
    assert flip_delta(eps, q_paper, k, n) <= delta
    assert q_paper > 5 * q


def test_calibration_at_large_n_and_below_the_floor():
    q = calibrate_flip_q(2.0, 1e-9, 10**7, 100)
    assert flip_delta(2.0, q, 100, 10**7) <= 1e-9
    with pytest.raises(InvalidParameterError, match="below what the FLIP accountant can certify"):
        calibrate_flip_q(1e-9, 1e-21, 100, 10)


def test_flip_epsilon_inverts_delta():
    n, k, q = 10**4, 50, 1e-4
    eps = flip_epsilon(1e-6, q, k, n)
    assert flip_delta(eps, q, k, n) <= 1e-6
    assert flip_delta(eps * (1 - 1e-4), q, k, n) > 1e-6


def test_pair_arguments_checked():
    with pytest.raises(InvalidParameterError, match="count_from"):
        flip_delta_for_pair(1.0, 0.1, 1, 5, 0, 0)
    with pytest.raises(InvalidParameterError, match="count_to"):
        flip_delta_for_pair(1.0, 0.1, 1, 5, 3, 3)
    with pytest.raises(InvalidParameterError, match="q must be"):
        flip_delta(1.0, 0.5, 1, 5)
