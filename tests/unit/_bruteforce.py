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
