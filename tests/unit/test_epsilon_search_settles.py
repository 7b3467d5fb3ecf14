"""An ε reported for a target δ meets that δ by the package's own δ(ε), exactly.

Every certified method's ε(δ) (and every calibration) proposes its answer with
cheaper sums (deciding mode, a δ(·) curve) and then settles on the public
δ(ε), the number :func:`shuffledp.accounting.delta` reports. These tests ask
the public function again, in a fresh call, at the reported ε: it must be at
most the target with no tolerance, and equal to the row's δ.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.optimize import brentq

from _sampling import full
from shuffledp.accounting import amplified_epsilon, calibrate, delta
from shuffledp.accounting.calibration import settle_epsilon
from shuffledp.accounting.numerics.gaussian_guess import (
    gaussian_epsilon_guess,
    polished_epsilon_guess,
)
from shuffledp.accounting.numerics.two_counts import (
    sampled_line_sum,
    two_count_delta_direct,
    two_count_delta_lines,
)
from shuffledp.accounting.published.variation_ratio import fmt2021_numeric_pair, vr_generic_pair

_GENERIC = (
    "erlingsson2019",
    "bbgn2019-hoeffding",
    "bbgn2019-bennett",
    "fmt2021-closed",
    "fmt2021-numeric",
    "vr2024",
)
#: Settings per method family; the heavy certificates get fewer draws at huge n.
_DRAWS = {"generic": 150, "krr": 90, "flip": 40, "poisson": 40}


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def _settings() -> list[tuple[str, dict[str, Any], float]]:
    """Random (method, mechanism parameters, δ) over the corners the issue names."""
    rng = np.random.default_rng(20261126)
    out: list[tuple[str, dict[str, Any], float]] = []
    for family, count in _DRAWS.items():
        for draw in range(count):
            target = _log_uniform(rng, 1e-12, 1e-2)
            n = round(_log_uniform(rng, 2, 1e8))
            epsilon0 = _log_uniform(rng, 0.05, 20.0)
            if family == "generic":
                method = str(rng.choice(_GENERIC))
                params: dict[str, Any] = {"mechanism": "generic", "epsilon0": epsilon0}
            elif family == "krr":
                method = "krr-blanket"
                params = {
                    "mechanism": "krr",
                    "epsilon0": epsilon0,
                    # k = 2 (binary RR, the tightest corner) in one draw of six.
                    "domain_size": 2 if draw % 6 == 0 else int(rng.integers(2, 51)),
                }
                n = min(n, 3_000_000)  # each search is a mixture over the blanket count
            elif family == "flip":
                method = "flip-exact"
                n = min(n, 10_000_000)
                params = {
                    "mechanism": "flip",
                    "q": _log_uniform(rng, 1e-4 / n, 0.45),
                    "fake_users": int(rng.integers(0, 201)),
                }
            else:
                method = "poisson-exact"
                n = min(n, 300_000)  # the received-count mixture; slow above ~1e6 messages
                params = {
                    "mechanism": "poisson",
                    "report_probability": _log_uniform(rng, 1e-3, 1.0),
                    "domain_size": int(rng.integers(2, 201)),
                    "blanket_messages": int(rng.integers(0, 3 * n + 1)),
                    "blanket_probability": float(rng.choice([1.0, 0.5, 0.17])),
                }
            out.append((method, {"n": n, **params}, target))
    return out


_SETTINGS = _settings()


def _heavy(setting: tuple[str, dict[str, Any], float]) -> bool:
    """poisson-exact with thinned blanket messages at n >= 1e4: 1 to 5 s each (the rest < 1 s)."""
    method, params, _ = setting
    return method == "poisson-exact" and params["blanket_probability"] < 1 and params["n"] >= 1e4


def _heavy_sample() -> set[int]:
    """The heavy settings every run checks: per blanket probability, the largest n and the
    smallest target (all of them with SHUFFLEDP_TEST_FULL=1, see tests/_sampling.py)."""
    heavy = [i for i, setting in enumerate(_SETTINGS) if _heavy(setting)]
    if full():
        return set(heavy)
    chosen = set()
    for probability in {_SETTINGS[i][1]["blanket_probability"] for i in heavy}:
        same = [i for i in heavy if _SETTINGS[i][1]["blanket_probability"] == probability]
        chosen.add(max(same, key=lambda i: (_SETTINGS[i][1]["n"], -i)))
        chosen.add(min(same, key=lambda i: (_SETTINGS[i][2], i)))
    return chosen


_CHECKED = [
    (i, setting)
    for i, setting in enumerate(_SETTINGS)
    if not _heavy(setting) or i in _heavy_sample()
]


def test_the_property_covers_at_least_300_settings_and_every_certified_method():
    assert len(_SETTINGS) >= 300
    checked = [setting for _, setting in _CHECKED]
    assert len(checked) >= 300 or not full()
    methods = {method for method, _, _ in checked}
    assert methods >= {*_GENERIC, "krr-blanket", "flip-exact", "poisson-exact"}
    ks = [p["domain_size"] for _, p, _ in checked if "domain_size" in p]
    assert min(ks) == 2 and max(ks) >= 45
    # the sampled heavy corners: both thinnings, the n cap and targets down to 1e-11
    heavy = [setting for setting in checked if _heavy(setting)]
    assert {p["blanket_probability"] for _, p, _ in heavy} == {0.5, 0.17}
    assert max(p["n"] for _, p, _ in heavy) == 300_000
    assert min(target for _, _, target in heavy) < 1e-11
    assert len(checked) >= 305  # 11 heavy settings sampled out


@pytest.mark.parametrize(
    ("method", "params", "target"),
    [setting for _, setting in _CHECKED],
    ids=[f"{i}-{m}" for i, (m, _, _) in _CHECKED],
)
def test_reported_epsilon_meets_the_target_by_the_public_delta(method, params, target):
    row = amplified_epsilon(target, method=method, **params)
    if row.epsilon is None:
        # No number: then no δ either, and a reason.
        assert row.delta is None and row.note
        return
    again = delta(row.epsilon, method=method, **params)
    assert again.delta is not None
    if row.certified:
        assert again.delta <= target  # exactly: no tolerance
    # The row states the very δ the package gives at that ε.
    assert row.delta == again.delta


def test_the_krr_example_from_the_issue_now_meets_its_target():
    # krr-blanket at eps0 = 3, k = 3, n = 1e5 reported 0.06402 with delta(0.06402) = 1.0007e-6.
    row = amplified_epsilon(1e-6, n=100_000, mechanism="krr", epsilon0=3.0, domain_size=3)
    assert row.method == "krr-blanket" and row.certified
    assert delta(row.epsilon, n=100_000, mechanism="krr", epsilon0=3.0, domain_size=3).delta <= 1e-6
    assert row.delta <= 1e-6


@pytest.mark.parametrize(
    ("mechanism", "params", "parameter"),
    [
        ("generic", {}, None),
        ("krr", {"domain_size": 3}, None),
        ("krr", {"domain_size": 2}, None),
        ("krr", {"domain_size": 40}, None),
        ("flip", {"fake_users": 50}, None),
        ("poisson", {"domain_size": 20, "blanket_messages": 30_000}, "report_probability"),
        ("poisson", {"domain_size": 20, "report_probability": 0.3}, "blanket_messages"),
    ],
)
@pytest.mark.parametrize(("epsilon", "target", "n"), [(1.0, 1e-6, 20_000), (0.3, 1e-9, 300_000)])
def test_calibration_meets_the_target_by_the_public_delta(
    mechanism, params, parameter, epsilon, target, n
):
    found = calibrate(epsilon, target, n=n, mechanism=mechanism, parameter=parameter, **params)
    name = {
        "epsilon0": "epsilon0",
        "q": "q",
        "report_probability": "report_probability",
        "blanket_messages": "blanket_messages",
    }[found.parameter]
    value: Any = int(found.value) if name == "blanket_messages" else found.value
    again = delta(epsilon, n=n, mechanism=mechanism, **{**params, name: value})
    assert again.delta is not None and again.delta <= target
    assert found.result.delta == again.delta


@pytest.mark.parametrize(("method", "k"), [("krr-two-count", 3), ("krr-homogeneous", 3)])
def test_a_lower_bound_above_the_target_halfway_to_epsilon0_still_gives_its_epsilon(method, k):
    # n = 2, eps0 = 5: the lower bound exceeds 1e-6 at eps0/2 (0.9 there), so the true
    # epsilon(1e-6) is above eps0/2; the row once showed no number ("no epsilon up to 5").
    params = {"n": 2, "mechanism": "krr", "epsilon0": 5.0, "domain_size": k}
    assert delta(2.5, method=method, **params).delta > 1e-6
    row = amplified_epsilon(1e-6, method=method, **params)
    upper = amplified_epsilon(1e-6, method="krr-blanket", **params)
    assert row.epsilon is not None and row.delta is not None
    assert 2.5 < row.epsilon <= upper.epsilon
    assert row.delta == delta(row.epsilon, method=method, **params).delta > 1e-6


# -- tightness: the generic answer is not looser than the variation-ratio value -------------


def _exact_crossing(pair_delta, target: float) -> float:
    """ε where a δ(ε) computed without certificates crosses the target (to 1e-12)."""
    return brentq(
        lambda e: math.log(max(pair_delta(e), 1e-300)) - math.log(target),
        1e-6,
        20.0,
        xtol=1e-15,
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    ("epsilon0", "peer"),
    # Wang et al. (VLDB 2024)'s variation-ratio ε at δ = 1e-6, n = 1e4, generic parameters,
    # as their numerical reduction gives it.
    [(0.5, 0.0181179), (1.0, 0.0432072), (2.0, 0.114401)],
)
def test_generic_answer_is_not_looser_than_the_variation_ratio_value(epsilon0, peer):
    row = amplified_epsilon(1e-6, n=10_000, mechanism="generic", epsilon0=epsilon0)
    assert row.method == "vr2024" and row.certified
    assert row.epsilon <= peer
    assert delta(peer, n=10_000, mechanism="generic", epsilon0=epsilon0).delta <= 1e-6


@pytest.mark.parametrize("n", [3, 40, 400])
@pytest.mark.parametrize("epsilon0", [0.3, 1.0, 4.0])
def test_vr2024_is_within_its_precision_of_the_uncertified_direct_sum(n, epsilon0):
    # Every (x, y) summed in floating point, no rounding allowance: the peer's computation.
    pair = vr_generic_pair(epsilon0, n)
    target = 1e-3
    row = amplified_epsilon(target, n=n, mechanism="generic", epsilon0=epsilon0, method="vr2024")
    if two_count_delta_direct(pair, 1e-7) <= target:
        return  # already below the target at ~0: nothing to compare
    exact = _exact_crossing(lambda e: two_count_delta_direct(pair, e), target)
    assert exact <= row.epsilon <= exact * (1.0 + 3e-6)


@pytest.mark.parametrize("n", [10_000, 1_000_000, 100_000_000])
@pytest.mark.parametrize("epsilon0", [0.5, 2.0, 6.0])
def test_vr2024_is_within_its_precision_of_the_line_sum_at_scale(n, epsilon0):
    pair = vr_generic_pair(epsilon0, n)
    row = amplified_epsilon(1e-6, n=n, mechanism="generic", epsilon0=epsilon0, method="vr2024")
    exact = _exact_crossing(lambda e: two_count_delta_lines(pair, e), 1e-6)
    assert row.epsilon <= exact * (1.0 + 3e-6)


# -- the settling step itself -----------------------------------------------------------------


def test_settle_moves_a_failing_candidate_up_until_the_public_delta_passes():
    calls: list[float] = []

    def public(eps: float) -> float:
        calls.append(eps)
        return math.exp(-40.0 * eps)  # a smooth, steep δ(ε)

    target = 1e-6
    crossing = math.log(1e6) / 40.0
    eps, value = settle_epsilon(public, target, crossing * 0.99, 5.0, precision=1e-6)
    assert value == public(eps) <= target
    assert crossing <= eps <= crossing * (1.0 + 1e-6)
    # And from above: it comes down to the crossing.
    eps, value = settle_epsilon(public, target, crossing * 1.3, 5.0, precision=1e-6)
    assert value <= target and eps <= crossing * (1.0 + 1e-6)


def test_settle_never_returns_a_point_that_fails_even_when_delta_wobbles():
    # A certificate refined differently at each ε need not be monotone in its last digits.
    def public(eps: float) -> float:
        base = math.exp(-40.0 * eps)
        return base * (1.0 + 1e-3 * math.sin(1e7 * eps))

    rng = np.random.default_rng(5)
    for _ in range(200):
        start = float(rng.uniform(0.2, 0.5))
        eps, value = settle_epsilon(public, 1e-6, start, 5.0, precision=1e-7)
        assert value == public(eps) <= 1e-6


def test_largest_passing_below_returns_a_passing_point_within_rtol_or_zero():
    from shuffledp.accounting.numerics.search import largest_passing_below

    calls: list[float] = []

    def passes(x: float) -> bool:
        calls.append(x)
        return x <= 0.0123

    found = largest_passing_below(passes, 1.0, rtol=1e-3)
    assert passes(found) and 0.0123 / (1.0 + 1e-3) <= found <= 0.0123
    # A known passing lower end skips the downward probes.
    calls.clear()
    found = largest_passing_below(passes, 0.02, rtol=1e-3, lo=0.01)
    assert passes(found) and 0.0123 / (1.0 + 1e-3) <= found
    assert min(calls) >= 0.01
    # Nothing above the floor passes: 0.0, never a failing point.
    assert largest_passing_below(lambda x: x <= 1e-12, 1.0, rtol=1e-3) == 0.0


# -- the segmented protocol and its baselines settle too -------------------------------------


@pytest.mark.parametrize("variant", ["paper", "dummy"])
def test_segmented_levels_state_the_public_delta_within_the_target(variant):
    from shuffledp.accounting.certificates.segmented import level_delta
    from shuffledp.accounting.segmented_parameters import optimize_parameters

    params = optimize_parameters(
        (0.5, 1.0, 2.0),
        (3000, 4000, 3000),
        1e-6,
        domain_size=20,
        items_per_user=2,
        variant=variant,
        blanket_rate=2.5,
        with_paper=False,
        workers=1,
    )
    for level in params.levels:
        again = level_delta(
            level.epsilon,
            level.report_probability,
            message_domain=params.message_domain,
            items=params.items_per_user,
            n=params.n,
            blanket_rate=params.blanket_rate,
            variant=variant,
        )
        assert level.delta == again <= 1e-6


@pytest.mark.parametrize("blanket", ["lwy", "alg2"])
def test_mm_blanket_rate_states_the_public_delta_within_the_target(blanket):
    from shuffledp.baselines.mm_shuffle import calibrate_blanket_rate, mm_level_delta

    rate, stated = calibrate_blanket_rate(
        1.0, 1e-6, message_domain=21, items=2, n=5000, blanket=blanket
    )
    again = mm_level_delta(
        1.0, message_domain=21, items=2, n=5000, blanket_rate=rate, blanket=blanket
    )
    assert stated == again <= 1e-6


def test_smallest_passing_integer_finds_every_threshold_by_brute_force():
    from shuffledp.accounting.numerics.search import smallest_passing_integer

    for start in (0, 1, 3, 17):
        for threshold in range(start, 300):
            calls: list[int] = []

            def passes(n: int, t: int = threshold, seen: list[int] = calls) -> bool:
                seen.append(n)
                return n >= t

            assert smallest_passing_integer(passes, start=start) == threshold
            assert len(calls) <= 2 * (threshold.bit_length() + 2)  # doubling, then bisection
    with pytest.raises(ValueError, match="no integer from 0 up to 100 passes"):
        smallest_passing_integer(lambda n: n >= 101, limit=100)
    assert smallest_passing_integer(lambda n: n >= 100, limit=100) == 100


# -- the few-evaluation settle, and how tight the answers are ---------------------------------


def _curve(steepness: float, wobble: float, frequency: float):
    """A smooth, steep δ(ε) with a certificate's wobble in its last digits, and its calls."""
    calls: list[float] = []

    def public(eps: float) -> float:
        calls.append(eps)
        return math.exp(-steepness * eps) * (1.0 + wobble * math.sin(frequency * eps))

    return public, calls


@pytest.mark.parametrize("round_down", [False, True])
def test_settle_crossing_brackets_the_crossing_between_evaluated_points(round_down):
    from shuffledp.accounting.numerics.search import settle_crossing

    rng = np.random.default_rng(17)
    precision = 1e-6
    for _ in range(400):
        steepness = float(10 ** rng.uniform(-1, 3))
        wobble = float(10 ** rng.uniform(-9, -4)) * float(rng.integers(0, 2))
        public, calls = _curve(steepness, wobble, float(10 ** rng.uniform(3, 9)))
        target = float(10 ** rng.uniform(-12, -2))
        crossing = math.log(1.0 / target) / steepness
        if crossing > 40.0:
            continue
        start = crossing * math.exp(rng.normal(0.0, 10 ** rng.uniform(-6, -1)))
        slope = -steepness * crossing * math.exp(rng.normal(0.0, 0.05))
        given = slope if rng.random() < 0.8 else None
        eps, value = settle_crossing(
            public, target, start, 50.0, precision=precision, slope=given, round_down=round_down
        )
        evaluated = {e: public(e) for e in list(calls)}  # the same values, evaluated again
        assert evaluated[eps] == value  # the point returned was evaluated, with this δ
        if round_down:
            assert value > target
            partner = [
                e for e, v in evaluated.items() if eps < e <= eps * (1 + precision) and v <= target
            ]
        else:
            assert value <= target
            partner = [
                e for e, v in evaluated.items() if eps / (1 + precision) <= e < eps and v > target
            ]
        assert partner  # and one within the precision on the other side


def test_settle_crossing_needs_two_or_three_evaluations_with_a_good_start():
    from shuffledp.accounting.numerics.search import settle_crossing

    counts = []
    for steepness in (5.0, 40.0, 400.0):
        for offset in (-3e-5, -1e-6, 2e-7, 4e-6, 2e-4):
            public, calls = _curve(steepness, 0.0, 1.0)
            crossing = math.log(1e8) / steepness
            settle_crossing(
                public,
                1e-8,
                crossing * (1 + offset),
                50.0,
                precision=1e-6,
                slope=-steepness * crossing * 1.02,
            )
            counts.append(len(set(calls)))
    # settle_epsilon's growing steps took 4 to 8 here; the predictions need 2 to 4.
    assert max(counts) <= 4 and sum(counts) <= 3 * len(counts)


def test_settle_crossing_reports_a_failure_and_a_bound_that_says_nothing():
    from shuffledp._validation import InvalidParameterError
    from shuffledp.accounting.numerics.search import settle_crossing

    with pytest.raises(InvalidParameterError, match="no epsilon up to 2 reaches"):
        settle_crossing(lambda e: 1.0, 1e-6, 1.0, 2.0)
    # A lower bound at or below the target down to ε → 0: a passing point comes back.
    eps, value = settle_crossing(lambda e: 1e-9, 1e-6, 1.0, 2.0, round_down=True)
    assert value <= 1e-6 and eps < 1e-6


_TIGHT = [
    ("vr2024", {"n": 1000, "mechanism": "generic", "epsilon0": 4.0}, 1e-10),
    ("vr2024", {"n": 50_000, "mechanism": "generic", "epsilon0": 0.7}, 1e-7),
    ("vr2024", {"n": 3_000_000, "mechanism": "generic", "epsilon0": 2.0}, 1e-6),
    ("fmt2021-numeric", {"n": 200_000, "mechanism": "generic", "epsilon0": 1.0}, 1e-9),
    ("krr-blanket", {"n": 20_000, "mechanism": "krr", "epsilon0": 2.0, "domain_size": 5}, 1e-6),
    ("krr-two-count", {"n": 300_000, "mechanism": "krr", "epsilon0": 1.0, "domain_size": 8}, 1e-8),
]


@pytest.mark.parametrize(("method", "params", "target"), _TIGHT)
def test_the_settled_epsilon_is_the_public_crossing_to_a_millionth(method, params, target):
    # Just below (above, for a lower bound) the reported ε, by more than the precision,
    # the public δ is on the other side of the target: the answer is no looser than that.
    row = amplified_epsilon(target, method=method, **params)
    assert row.epsilon is not None and row.delta is not None
    assert row.delta == delta(row.epsilon, method=method, **params).delta
    if method == "krr-two-count":  # a lower bound: δ above the target, at most at ε(1 + 1e-6)
        assert row.delta > target
        assert delta(row.epsilon * (1 + 1.001e-6), method=method, **params).delta <= target
    else:
        assert row.delta <= target
        assert delta(row.epsilon / (1 + 1.001e-6), method=method, **params).delta > target


@pytest.mark.parametrize(
    ("n", "epsilon", "target"), [(10_000, 1.0, 1e-6), (2_000_000, 0.1, 1e-8), (300, 2.0, 1e-3)]
)
def test_a_generic_calibration_is_the_largest_epsilon0_to_its_precision(n, epsilon, target):
    found = calibrate(epsilon, target, n=n)
    assert found.parameter == "epsilon0" and found.value < 20.0
    assert delta(epsilon, n=n, epsilon0=found.value).delta <= target
    assert delta(epsilon, n=n, epsilon0=found.value * (1 + 1.001e-5)).delta > target


def test_the_gaussian_guess_lands_near_the_answer_where_it_applies():
    for n, epsilon0, target in ((10**6, 0.5, 1e-6), (10**5, 1.0, 1e-8), (3 * 10**7, 2.0, 1e-10)):
        guess = gaussian_epsilon_guess(vr_generic_pair(epsilon0, n), target)
        row = amplified_epsilon(target, n=n, epsilon0=epsilon0, method="vr2024")
        assert guess is not None and row.epsilon is not None
        assert abs(guess[0] / row.epsilon - 1.0) < 1e-3 and guess[1] < 0.0
    # Too few blanket messages for a Gaussian: no guess (the search starts elsewhere).
    assert gaussian_epsilon_guess(vr_generic_pair(4.0, 1000), 1e-10) is None


@pytest.mark.parametrize(
    ("pair", "epsilon"),
    [
        (vr_generic_pair(4.0, 10**7), 0.0164),
        (vr_generic_pair(0.5, 10**7), 3.8e-4),
        (vr_generic_pair(2.5, 2 * 10**6), 0.01),
        (fmt2021_numeric_pair(1.5, 4 * 10**6), 0.006),
    ],
)
def test_the_sampled_line_sum_is_near_the_exact_line_sum(pair, epsilon):
    # A starting point only, but one that places a search's first evaluation: within
    # 1e-5 of the exact line sum, at the answer's scale and a little off it.
    for scale in (0.99, 1.0, 1.0003):
        exact = two_count_delta_lines(pair, epsilon * scale)
        assert abs(sampled_line_sum(pair, epsilon * scale) / exact - 1.0) < 1e-5


@pytest.mark.parametrize(
    ("n", "epsilon0", "target"),
    [(10**7, 4.0, 1e-10), (6 * 10**6, 3.3, 7e-11), (1_500_000, 2.5, 2e-6), (10**7, 0.5, 1e-6)],
)
def test_a_polished_guess_meets_the_public_crossing_in_two_evaluations(n, epsilon0, target):
    # Far in the tail the Gaussian guess is 1e-5 .. 6e-5 below the crossing; polished on
    # the pair's own lines it lands within the final bracket, so the search evaluates
    # the public delta twice: the answer and its failing partner one precision below.
    from shuffledp.accounting import api

    pair = vr_generic_pair(epsilon0, n)
    guess, slope = gaussian_epsilon_guess(pair, target)
    polished = polished_epsilon_guess(pair, target, guess, slope)
    asked: list[float] = []
    public = api._PublicDelta.bound

    def counting(self, epsilon):
        if epsilon not in self.bounds and epsilon < epsilon0:
            asked.append(epsilon)
        return public(self, epsilon)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api._PublicDelta, "bound", counting)
        row = amplified_epsilon(target, n=n, epsilon0=epsilon0, method="vr2024")
    assert row.epsilon is not None and row.delta is not None and row.delta <= target
    assert abs(polished / row.epsilon - 1.0) < 1e-6
    assert len(asked) == 2 and min(asked) == pytest.approx(row.epsilon / (1 + 1e-6), rel=1e-12)
    assert delta(min(asked), n=n, epsilon0=epsilon0, method="vr2024").delta > target
