import itertools
import math

import numpy as np
import pytest

from shuffledp.accounting.certificates.poisson import poisson_delta
from shuffledp.accounting.reproductions.poisson_lemma3 import poisson_delta_lemma3


def _law(blanket, d, gamma, lam, item):
    """Brute force: `blanket` messages sent w.p. gamma, uniform over d, plus the victim's."""
    grid = np.zeros((blanket + 2,) * d)
    grid[(0,) * d] = 1.0
    for _ in range(blanket):
        new = (1 - gamma) * grid
        for y in range(d):
            src = [slice(None)] * d
            dst = [slice(None)] * d
            src[y], dst[y] = slice(0, blanket + 1), slice(1, blanket + 2)
            new[tuple(dst)] += gamma / d * grid[tuple(src)]
        grid = new
    out = (1 - lam) * grid
    src = [slice(None)] * d
    dst = [slice(None)] * d
    src[item], dst[item] = slice(0, blanket + 1), slice(1, blanket + 2)
    out[tuple(dst)] += lam * grid[tuple(src)]
    return out


@pytest.mark.parametrize(
    ("blanket", "d", "gamma", "lam"),
    [(6, 3, 1.0, 0.5), (6, 3, 0.5, 0.5), (7, 4, 0.7, 0.3), (5, 2, 1.0, 0.8), (6, 3, 0.3, 0.9)],
)
def test_exact_matches_brute_force(blanket, d, gamma, lam):
    p, q = _law(blanket, d, gamma, lam, 0), _law(blanket, d, gamma, lam, 1)
    for eps in (0.1, 0.5, 1.0):
        e = math.exp(eps)
        truth = max(np.clip(p - e * q, 0, None).sum(), np.clip(q - e * p, 0, None).sum())
        up = poisson_delta(eps, lam, d, blanket, blanket_probability=gamma)
        down = poisson_delta(eps, lam, d, blanket, blanket_probability=gamma, rounding="down")
        assert down <= truth + 1e-12 and truth <= up + 1e-12
        assert up - down < 1e-6 * truth + 1e-9


def test_lemma3_falls_below_the_exact_value():
    # With a fixed number of blanket messages the total count reveals whether the
    # victim sent anything; Lemma 3's pair ignores that.
    exact = poisson_delta(0.5, 0.5, 3, 6)
    published = poisson_delta_lemma3(0.5, 0.5, 3, 6)
    assert published < 0.5 * exact


def test_more_blanket_and_less_reporting_help():
    d = 50
    seq = [poisson_delta(0.5, 0.5, d, m) for m in (100, 300, 1000, 3000)]
    assert all(a >= b for a, b in itertools.pairwise(seq))
    seq = [poisson_delta(0.5, lam, d, 1000) for lam in (0.1, 0.3, 0.6, 1.0)]
    assert all(a <= b + 1e-15 for a, b in itertools.pairwise(seq))


def test_group_composition_covers_a_user_with_two_items():
    # Thm 3 (segmented paper): a user whose whole set {0, 1} becomes {2, 3}; brute force
    # over the histogram of 5 blanket messages (gamma = 0.8) plus the user's messages.
    from shuffledp.accounting import delta

    blanket, d, gamma, lam = 5, 4, 0.8, 0.6
    base = _law(blanket, d, gamma, 0.0, 0)  # blanket only (lam = 0)

    def with_items(items):
        out = base
        for item in items:  # each item is sent independently with probability lam
            shifted = np.zeros_like(out)
            src = [slice(None)] * d
            dst = [slice(None)] * d
            src[item], dst[item] = slice(0, -1), slice(1, None)
            shifted[tuple(dst)] = out[tuple(src)]
            out = (1 - lam) * out + lam * shifted
        return out

    p, q = with_items((0, 1)), with_items((2, 3))
    for eps in (0.5, 1.0, 2.0):
        e = math.exp(eps)
        truth = max(np.clip(p - e * q, 0, None).sum(), np.clip(q - e * p, 0, None).sum())
        bound = delta(
            eps,
            n=blanket,
            mechanism="poisson",
            report_probability=lam,
            domain_size=d,
            blanket_messages=blanket,
            blanket_probability=gamma,
            items=2,
        )
        assert bound.delta >= truth - 1e-12
