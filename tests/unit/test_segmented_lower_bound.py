"""The segmented protocol's lower bound against a brute force over every dataset at n ≤ 4.

The oracle below uses no code of the package. It builds the exact law of the
whole view (the message histogram over the message domain, every user's data
and dummy messages and every blanket try included) for every dataset of n
users, and takes the largest δ(ε) over all neighbouring pairs: one user (the
victim, at the level under test) changes its set, every other user keeps its
set and its level. A lower bound must not exceed that maximum; the certified
upper bound must not fall below it.

By symmetry under permutations of the real items (the blanket and the dummy
items are uniform over the message domain, and the padding symbol is never
permuted), the victim's first set can be fixed to one representative per
number of real items.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
import pytest
from _oracle_histograms import Law, add_message

from shuffledp import InvalidParameterError
from shuffledp.accounting.certificates.segmented import level_delta, level_lower_bound
from shuffledp.accounting.segmented_parameters import optimize_parameters


@cache
def _user_law(
    items: tuple[int, ...], lam: float, variant: str, d_msg: int, tries: int, gamma: float
) -> Law:
    """One user's messages: its s slots (Eq. 2, or a uniform dummy) and its ⌈m⌉ blanket tries."""
    law: Law = {tuple([0] * d_msg): 1.0}
    for item in items:
        if variant == "paper":
            choices: dict[int | None, float] = {item: lam, None: 1.0 - lam}
        else:
            choices = {j: (1.0 - lam) / d_msg for j in range(d_msg)}
            choices[item] += lam
        law = add_message(law, choices)
    for _ in range(tries):
        law = add_message(law, {**{j: gamma / d_msg for j in range(d_msg)}, None: 1.0 - gamma})
    return law


def _sets(d: int, s: int, padding: bool) -> list[tuple[int, ...]]:
    """Every valid set of s slots: s distinct items, or (padding) fewer, padded with symbol d."""
    if not padding:
        return list(itertools.combinations(range(d), s))
    out = []
    for real in range(s + 1):
        for combo in itertools.combinations(range(d), real):
            out.append(combo + (d,) * (s - real))
    return out


class _Codes:
    """Histograms as integers (mixed radix, base M + 1 for at most M messages), laws as arrays.

    Adding two histograms adds their codes (no count exceeds M, so no digit carries).
    """

    def __init__(self, d_msg: int, most: int) -> None:
        self.radix = most + 1
        self.size = self.radix**d_msg
        self.weights = np.array([self.radix**k for k in range(d_msg)], dtype=np.int64)

    def sparse(self, law: Law) -> tuple[np.ndarray, np.ndarray]:
        codes = np.array([int(np.dot(h, self.weights)) for h in law], dtype=np.int64)
        return codes, np.array(list(law.values()))

    def convolve(
        self, a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """Dense law of the sum (each shift of ``b`` by one code of ``a`` is injective)."""
        out = np.zeros(self.size)
        for code, prob in zip(*a, strict=True):
            out[b[0] + code] += prob * b[1]
        return out


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    e = math.exp(eps)
    forward = p - e * q
    backward = q - e * p
    return max(math.fsum(forward[forward > 0].tolist()), math.fsum(backward[backward > 0].tolist()))


def worst_case_delta(
    eps: float,
    *,
    victim_lam: float,
    other_lams: tuple[float, ...],
    d: int,
    s: int,
    m: float,
    variant: str,
    padding: bool = False,
) -> float:
    """max δ(ε) over every dataset and every change of the victim's set (levels fixed)."""
    d_msg = d + (1 if padding else 0)
    tries = math.ceil(m)
    gamma = m / tries
    codes = _Codes(d_msg, (len(other_lams) + 1) * (s + tries))
    sets = _sets(d, s, padding)
    # One representative first set per number of real items (item permutations).
    firsts = {sum(1 for x in x0 if x < d): x0 for x0 in sets}.values()
    others_laws = []
    for assignment in itertools.product(sets, repeat=len(other_lams)):
        law = (np.zeros(1, dtype=np.int64), np.ones(1))
        for items, lam in zip(assignment, other_lams, strict=True):
            user = codes.sparse(_user_law(items, lam, variant, d_msg, tries, gamma))
            dense = codes.convolve(user, law)
            nonzero = np.flatnonzero(dense)
            law = (nonzero, dense[nonzero])
        others_laws.append(law)
    worst = 0.0
    for x0 in firsts:
        law0 = codes.sparse(_user_law(x0, victim_lam, variant, d_msg, tries, gamma))
        for others in others_laws:
            p = codes.convolve(law0, others)
            for x1 in sets:
                if x1 == x0:
                    continue
                law1 = codes.sparse(_user_law(x1, victim_lam, variant, d_msg, tries, gamma))
                worst = max(worst, _hockey(p, codes.convolve(law1, others), eps))
    return worst


#: The oracle's floating-point allowance: a few hundred non-negative terms of size ≤ 1,
#: each product and sum rounded (relative 2⁻⁵³ each), far below 1e-12.
_ORACLE_SLACK = 1e-12


def _calibrated(levels, counts, delta, *, d, s, m, variant, padding=False):
    return optimize_parameters(
        levels,
        counts,
        delta,
        domain_size=d,
        items_per_user=s,
        padding=padding,
        variant=variant,
        blanket_rate=m,
        workers=1,
    )


def test_issue_examples_lower_bounds_are_below_the_worst_case():
    # account segmented --n 3 --domain-size 3 --levels 0.5 --shares 1 --items-per-user 1
    #   --delta 0.05 --blanket 0.5 --variant dummy   (reported 0.04089 over a worst case 0.02059)
    params = _calibrated((0.5,), (3,), 0.05, d=3, s=1, m=0.5, variant="dummy")
    level = params.levels[0]
    lam = level.report_probability
    worst = worst_case_delta(
        0.5, victim_lam=lam, other_lams=(lam, lam), d=3, s=1, m=0.5, variant="dummy"
    )
    assert worst == pytest.approx(0.02059, abs=5e-6)
    assert level.lower_bound_delta is not None
    assert level.lower_bound_delta <= worst + _ORACLE_SLACK
    assert level.delta >= worst - _ORACLE_SLACK
    # --domain-size 4 --items-per-user 2 --delta 0.1, paper (reported 0.04060 over 0.03859):
    # d < 3s without padding, so the pair changes one slot of two.
    params = _calibrated((0.5,), (3,), 0.1, d=4, s=2, m=0.5, variant="paper")
    level = params.levels[0]
    lam = level.report_probability
    worst = worst_case_delta(
        0.5, victim_lam=lam, other_lams=(lam, lam), d=4, s=2, m=0.5, variant="paper"
    )
    assert worst == pytest.approx(0.03859, abs=5e-6)
    assert level.lower_bound_delta is not None
    assert 0 < level.lower_bound_delta <= worst + _ORACLE_SLACK
    assert level.delta >= worst - _ORACLE_SLACK


# (d, s, padding, n, m, victim λ, the other users' λ, ε): every regime of the construction
# (room for the whole set; d < 3s or 2s > d without padding: part of the set; padding), one
# or two levels, blanket rates below and above 1.
CASES = [
    (3, 1, False, 3, 0.5, 0.3, (0.3, 0.3), 0.5),
    (3, 1, False, 4, 1.5, 0.6, (0.2, 0.6, 0.9), 0.3),
    (4, 1, False, 4, 0.7, 0.8, (0.8, 0.8, 0.8), 1.0),
    (4, 2, False, 3, 0.5, 0.144, (0.144, 0.144), 0.5),
    (4, 2, False, 3, 1.2, 0.5, (0.9, 0.1), 1.0),
    (5, 2, False, 3, 0.5, 0.7, (0.7, 0.3), 0.8),
    (6, 2, False, 2, 0.8, 0.5, (0.5,), 0.6),
    (3, 2, True, 3, 0.5, 0.5, (0.5, 0.2), 0.7),
    (2, 2, True, 3, 0.9, 0.6, (0.6, 0.6), 1.0),
    (4, 2, True, 2, 1.5, 0.4, (0.7,), 0.5),
    (3, 1, True, 3, 0.6, 0.9, (0.4, 0.9), 1.5),
    (4, 2, False, 4, 0.5, 0.4, (0.4, 0.4, 0.9), 0.5),
    (3, 1, True, 4, 0.5, 0.5, (0.5, 0.2, 0.8), 0.8),
]


@pytest.mark.parametrize("variant", ["paper", "dummy"])
@pytest.mark.parametrize(("d", "s", "padding", "n", "m", "lam", "other_lams", "eps"), CASES)
def test_lower_bound_never_exceeds_the_worst_case_over_all_datasets(
    variant, d, s, padding, n, m, lam, other_lams, eps
):
    assert len(other_lams) == n - 1
    d_msg = d + (1 if padding else 0)
    others = [(other, 1) for other in other_lams]
    lower = level_lower_bound(
        eps,
        lam,
        message_domain=d_msg,
        items=s,
        n=n,
        blanket_rate=m,
        variant=variant,
        padding=padding,
        others=others,
    )
    worst = worst_case_delta(
        eps,
        victim_lam=lam,
        other_lams=other_lams,
        d=d,
        s=s,
        m=m,
        variant=variant,
        padding=padding,
    )
    assert lower is not None  # every case above leaves room for at least one slot
    assert 0.0 <= lower <= worst + _ORACLE_SLACK
    certified = level_delta(
        eps, lam, message_domain=d_msg, items=s, n=n, blanket_rate=m, variant=variant
    )
    assert certified >= worst - _ORACLE_SLACK


def test_no_lower_bound_when_the_domain_has_no_room():
    # Without padding the other users need s items off the victim's 2t: d = s + 1 leaves t = 0.
    args = dict(n=3, blanket_rate=0.5)
    assert level_lower_bound(0.5, 0.5, message_domain=3, items=2, **args) is None
    assert level_lower_bound(0.5, 0.5, message_domain=3, items=2, variant="dummy", **args) is None
    # With padding, the same domain (d′ = 4) has room for one slot.
    padded = level_lower_bound(0.5, 0.5, message_domain=4, items=2, padding=True, **args)
    assert padded is not None and padded > 0
    # λ = 0: the victim's messages do not depend on its set.
    assert level_lower_bound(0.5, 0.0, message_domain=8, items=2, **args) == 0.0


def test_other_users_must_be_the_other_n_minus_one():
    with pytest.raises(InvalidParameterError, match="other n - 1 = 2"):
        level_lower_bound(
            0.5, 0.5, message_domain=8, items=1, n=3, blanket_rate=1.0, others=[(0.5, 1)]
        )
    with pytest.raises(InvalidParameterError, match=r"\[0, 1\]"):
        level_lower_bound(
            0.5, 0.5, message_domain=8, items=1, n=3, blanket_rate=1.0, others=[(1.5, 2)]
        )


def test_dummy_lower_bound_counts_the_other_users_dummy_items():
    # More dummy noise from the others (a smaller λ) can only lower this pair's δ; the old
    # bound, which left it out, is what λ_others = 1 gives (no dummy item at all).
    args = dict(message_domain=16, items=2, n=200, blanket_rate=0.5, variant="dummy")
    noisy = level_lower_bound(1.0, 0.6, others=[(0.1, 199)], **args)
    quiet = level_lower_bound(1.0, 0.6, others=[(1.0, 199)], **args)
    assert noisy is not None and quiet is not None
    assert noisy < quiet
