"""Independent brute-force laws for accountant tests: enumerate every tuple of reports."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np


def histogram_law(values, channel):
    """Law of the histogram of reports, by summing over all k^n report tuples."""
    channel = np.asarray(channel, dtype=float)
    outputs = channel.shape[1]
    law = defaultdict(float)
    for reports in itertools.product(range(outputs), repeat=len(values)):
        prob = 1.0
        for value, report in zip(values, reports, strict=True):
            prob *= channel[value, report]
        law[tuple(reports.count(j) for j in range(outputs))] += prob
    return law


def hockey_stick_both(law_a, law_b, epsilon):
    keys = set(law_a) | set(law_b)
    e = math.exp(epsilon)
    forward = sum(max(0.0, law_a.get(h, 0.0) - e * law_b.get(h, 0.0)) for h in keys)
    backward = sum(max(0.0, law_b.get(h, 0.0) - e * law_a.get(h, 0.0)) for h in keys)
    return max(forward, backward)


def krr_channel(k, epsilon0):
    a = math.exp(epsilon0) / (math.exp(epsilon0) + k - 1)
    b = 1.0 / (math.exp(epsilon0) + k - 1)
    return np.where(np.eye(k, dtype=bool), a, b)


def all_pairs(n, k, channel, epsilon):
    """{(others, x0, x1): δ} over every dataset of n users and every move x0 → x1."""
    out = {}
    for others in itertools.combinations_with_replacement(range(k), n - 1):
        laws = {x: histogram_law([*others, x], channel) for x in range(k)}
        for x0, x1 in itertools.permutations(range(k), 2):
            out[(others, x0, x1)] = hockey_stick_both(laws[x0], laws[x1], epsilon)
    return out


# --------------------------------------------------------------------------
# Exact k-RR laws in high precision (mpmath), for bounds near ε = ε₀ where a
# double-precision brute force cannot tell 1e-4 from rounding. Nothing here
# uses the package: the histogram law is built user by user from k-RR's
# definition (report the true value with probability e^ε₀/(e^ε₀ + k − 1),
# each other value with 1/(e^ε₀ + k − 1)).


def _mp():
    import mpmath

    return mpmath


def mp_krr_probabilities(k, epsilon0, dps=60):
    """(a, b) of k-RR as mpmath numbers, from the float ε₀ exactly."""
    mpmath = _mp()
    mpmath.mp.dps = dps
    e = mpmath.exp(mpmath.mpf(epsilon0))
    return e / (e + k - 1), 1 / (e + k - 1)


def mp_histogram_law(values, k, a, b):
    """Law of the histogram of k-RR reports of users holding ``values`` (dict, exact sums)."""
    mpmath = _mp()
    law = {(0,) * k: mpmath.mpf(1)}
    for value in values:
        new = defaultdict(lambda: mpmath.mpf(0))
        for hist, prob in law.items():
            for y in range(k):
                bumped = list(hist)
                bumped[y] += 1
                new[tuple(bumped)] += prob * (a if y == value else b)
        law = dict(new)
    return law


def mp_hockey_stick_both(law_a, law_b, epsilon):
    """max(H_ε(A‖B), H_ε(B‖A)) in mpmath (ε a float, taken exactly)."""
    mpmath = _mp()
    e = mpmath.exp(mpmath.mpf(epsilon))
    zero = mpmath.mpf(0)
    keys = set(law_a) | set(law_b)
    forward = sum((max(zero, law_a.get(h, zero) - e * law_b.get(h, zero)) for h in keys), zero)
    backward = sum((max(zero, law_b.get(h, zero) - e * law_a.get(h, zero)) for h in keys), zero)
    return max(forward, backward)


def mp_krr_all_datasets(n, k, epsilon0, epsilons, dps=60):
    """{ε: {(others, x0, x1): exact δ}} over every dataset of n users and every move.

    ``others`` is the sorted tuple of the other n − 1 users' values; every
    histogram of the others appears once, every ordered pair x0 ≠ x1 once.
    """
    a, b = mp_krr_probabilities(k, epsilon0, dps)
    out = {eps: {} for eps in epsilons}
    for others in itertools.combinations_with_replacement(range(k), n - 1):
        base = mp_histogram_law(list(others), k, a, b)
        laws = {x: mp_histogram_law([x], k, a, b) for x in range(k)}
        full = {}
        for x in range(k):  # convolve the others' law with the victim's report
            law = defaultdict(lambda: _mp().mpf(0))
            for h1, p1 in base.items():
                for h2, p2 in laws[x].items():
                    law[tuple(u + v for u, v in zip(h1, h2, strict=True))] += p1 * p2
            full[x] = dict(law)
        for x0, x1 in itertools.permutations(range(k), 2):
            for eps in epsilons:
                out[eps][(others, x0, x1)] = mp_hockey_stick_both(full[x0], full[x1], eps)
    return out
