"""Accounting of the segmented protocol against an exact enumeration of small protocols.

The brute force below builds the law of the whole message histogram (every
item's count) by adding messages one at a time, with no code from the package:
the victim's item slots, the other users' data messages and every blanket try.
"""

import itertools
import math
from fractions import Fraction

import pytest
from _oracle_histograms import add_message

import shuffledp.accounting.segmented_parameters as segmented_parameters
from shuffledp import InvalidParameterError
from shuffledp.accounting.certificates.segmented import (
    blanket_tries,
    calibrate_level,
    error_bound,
    group_delta,
    item_delta,
    level_delta,
    level_lower_bound,
)
from shuffledp.accounting.reproductions.segmented_eq7 import (
    paper_report_probability,
    thm3_group_delta,
)
from shuffledp.accounting.segmented_parameters import optimize_parameters


def _histogram_law(d, slots, lam, variant, tries, gamma, others=()):
    """Exact law of the histogram: the victim's slots, other users' items, blanket tries."""
    law = {tuple([0] * d): 1.0}
    for item in slots:
        if variant == "paper":
            choices = {item: lam, None: 1.0 - lam}
        else:
            choices = {j: (1.0 - lam) / d for j in range(d)}
            choices[item] += lam
        law = add_message(law, choices)
    for item, other_lam in others:
        law = add_message(law, {item: other_lam, None: 1.0 - other_lam})
    for _ in range(tries):
        law = add_message(law, {**{j: gamma / d for j in range(d)}, None: 1.0 - gamma})
    return law


def _delta(p_law, q_law, eps):
    keys = set(p_law) | set(q_law)
    e = math.exp(eps)
    forward = sum(max(0.0, p_law.get(k, 0.0) - e * q_law.get(k, 0.0)) for k in keys)
    backward = sum(max(0.0, q_law.get(k, 0.0) - e * p_law.get(k, 0.0)) for k in keys)
    return max(forward, backward)


@pytest.mark.parametrize("variant", ["paper", "dummy"])
@pytest.mark.parametrize(
    ("d", "tries", "gamma", "lam"),
    [(3, 2, 1.0, 0.6), (4, 3, 0.5, 0.3), (4, 4, 0.25, 1.0), (2, 3, 0.7, 0.8), (5, 2, 0.9, 0.05)],
)
def test_item_delta_is_the_exact_delta_of_one_slot(variant, d, tries, gamma, lam):
    # One slot changes x0 -> x1; the others' data messages are handed over (Lemma 2),
    # so the view is the victim's slot and every blanket try.
    p_law = _histogram_law(d, [0], lam, variant, tries, gamma)
    q_law = _histogram_law(d, [1], lam, variant, tries, gamma)
    for eps in (0.05, 0.4, 1.0, 2.5):
        exact = _delta(p_law, q_law, eps)
        certified = item_delta(
            eps,
            lam,
            message_domain=d,
            potential_blanket=tries,
            blanket_probability=gamma,
            variant=variant,
        )
        assert certified >= exact - 1e-15
        assert certified <= exact * 1.01 + 1e-12  # exact view, blocked sums within 1%


@pytest.mark.parametrize("variant", ["paper", "dummy"])
def test_level_delta_bounds_a_whole_set_change_with_other_users(variant):
    # Two slots per user, the victim's set {0, 1} -> {2, 3}; another user holds {0, 4}
    # (its data messages are real here, not handed over); n = 2 users, m = 1.5.
    d, lam, m, n = 5, 0.5, 1.5, 2
    tries, gamma = blanket_tries(n, m)
    other = [(0, 0.7), (4, 0.7)]
    p_law = _histogram_law(d, [0, 1], lam, variant, tries, gamma, other)
    q_law = _histogram_law(d, [2, 3], lam, variant, tries, gamma, other)
    for eps in (0.3, 1.0, 2.0):
        exact = _delta(p_law, q_law, eps)
        certified = level_delta(
            eps, lam, message_domain=d, items=2, n=n, blanket_rate=m, variant=variant
        )
        assert certified >= exact
        lower = level_lower_bound(
            eps, lam, message_domain=d, items=2, n=n, blanket_rate=m, variant=variant
        )
        # The lower bound's datasets hold no other user's items on the victim's sets.
        alone_p = _histogram_law(d, [0, 1], lam, variant, tries, gamma)
        alone_q = _histogram_law(d, [2, 3], lam, variant, tries, gamma)
        assert lower <= _delta(alone_p, alone_q, eps) + 1e-15
        assert lower <= certified


def test_group_delta_is_the_geometric_chain_and_beats_thm3():
    for item, eps, s in [(1e-6, 0.25, 4), (3e-4, 0.1, 8), (0.01, 1.0, 2)]:
        expected = item * sum(math.exp(j * eps) for j in range(s))
        assert group_delta(item, eps, s) == pytest.approx(expected, rel=1e-12)
        assert group_delta(item, eps, s) >= expected
        assert thm3_group_delta(item, eps, s) >= group_delta(item, eps, s)
    assert group_delta(1e-6, 0.3, 1) == 1e-6
    # Exactly: Fractions for the chain.
    chain = Fraction(1, 10**6) * sum(Fraction(math.exp(0.5 * j)) for j in range(3))
    assert group_delta(1e-6, 0.5, 3) >= float(chain)


def test_calibrated_lambda_is_certified_and_nearly_largest():
    params = dict(message_domain=64, items=2, n=3000, blanket_rate=2.5)
    for variant in ("paper", "dummy"):
        lam = calibrate_level(1.0, 1e-6, variant=variant, **params)
        assert 0 < lam < 1
        assert level_delta(1.0, lam, variant=variant, **params) <= 1e-6
        assert level_delta(1.0, min(1.0, lam * 1.02), variant=variant, **params) > 1e-6
        warm = calibrate_level(1.0, 1e-6, variant=variant, start=lam * 0.9, **params)
        assert warm == pytest.approx(lam, rel=2e-3)


def test_eq7_lambda_is_what_lemma3_certifies_and_is_reported_against_the_exact_view():
    params = dict(message_domain=128, items=4, n=5000, blanket_rate=3.8)
    lam = paper_report_probability(0.5, 2e-6, **params)
    assert 0 < lam < 1
    # What the exact accountant says of Eq. 7's choice, and of ours.
    ours = calibrate_level(0.5, 2e-6, **params)
    assert level_delta(0.5, ours, **params) <= 2e-6
    assert level_delta(0.5, lam, **params) > 0


def test_optimize_parameters_certifies_every_level():
    n = 4000
    counts = (1000, 2000, 1000)
    params = optimize_parameters(
        (0.5, 1.0, 2.0),
        counts,
        0.01 / n,
        domain_size=32,
        items_per_user=2,
        blanket_grid=(0.5, 1.0, 2.0, 3.0),
        workers=1,
    )
    assert params.blanket_rate in (0.5, 1.0, 2.0, 3.0)
    for level, eps in zip(params.levels, (0.5, 1.0, 2.0), strict=True):
        assert level.epsilon == eps
        assert level.delta <= 0.01 / n
        assert level.lower_bound_delta <= level.delta
        recomputed = level_delta(
            eps,
            level.report_probability,
            message_domain=32,
            items=2,
            n=n,
            blanket_rate=params.blanket_rate,
        )
        assert recomputed <= 0.01 / n
    lams = params.report_probabilities
    assert params.error_bound == pytest.approx(
        error_bound(params.blanket_rate, lams, counts, items=2)
    )
    # Every other grid point has a bound at least as large, up to the grid search's
    # precision: λ is searched to a factor 1 + r (r = 1e-2) and the bound (nm + sΛ)/Λ²
    # moves by at most (1 + r)² − 1 when every λ does.
    r = segmented_parameters._SEARCH_RTOL
    for m in (0.5, 1.0, 2.0, 3.0):
        other = optimize_parameters(
            (0.5, 1.0, 2.0),
            counts,
            0.01 / n,
            domain_size=32,
            items_per_user=2,
            blanket_rate=m,
            with_paper=False,
            workers=1,
        )
        assert other.error_bound >= params.error_bound * (1 - ((1 + r) ** 2 - 1))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"levels": (1.0, 0.5)}, "strictly increasing"),
        ({"levels": ()}, "at least one"),
        ({"level_counts": (1, 2)}, "level_counts has 2 entries"),
        ({"level_counts": (0, 0, 0)}, "at least one user"),
        ({"delta": 1.5}, "delta"),
        ({"variant": "nothing"}, "variant must be"),
        ({"blanket_rate": -1.0}, "blanket rate"),
    ],
)
def test_bad_parameters(kwargs, fragment):
    args = {
        "levels": (0.5, 1.0, 2.0),
        "level_counts": (10, 10, 10),
        "delta": 1e-6,
        "domain_size": 16,
        "items_per_user": 2,
        "blanket_rate": 1.0,
        "with_paper": False,
        "workers": 1,
    }
    args.update(kwargs)
    with pytest.raises(InvalidParameterError, match=fragment):
        optimize_parameters(args.pop("levels"), args.pop("level_counts"), args.pop("delta"), **args)


def test_blanket_tries():
    assert blanket_tries(10, 2.5) == (30, pytest.approx(2.5 / 3))
    assert blanket_tries(7, 1.0) == (7, 1.0)
    assert blanket_tries(7, 0.2) == (7, pytest.approx(0.2))
    # One blanket try more and the potential count doubles: δ is not monotone in m.
    a = level_delta(1.0, 0.5, message_domain=16, items=1, n=500, blanket_rate=1.0)
    b = level_delta(1.0, 0.5, message_domain=16, items=1, n=500, blanket_rate=1.01)
    assert a != b


def test_enumeration_helper_is_a_law():
    law = _histogram_law(4, [0, 1], 0.3, "paper", 3, 0.5, [(2, 0.4)])
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    for combo in itertools.islice(law, 5):
        assert len(combo) == 4
