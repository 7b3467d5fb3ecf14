"""The registry of accounting methods: one entry per bound, named after its source.

Each :class:`Method` knows which mechanisms it applies to, what kind of number
it returns (:class:`shuffledp.privacy.BoundKind`), where it comes from, and how
to evaluate δ(ε) for a :class:`Mechanism`. ε(δ) is found by bisection on δ(ε),
rounded towards the safe side for the kind of bound.

:meth:`Method.evaluate` returns a :class:`Bound` whose ``certified`` flag means
"inside the method's proven range" (for a lower bound: a value some existing
dataset attains). Whether a number is a guarantee a user may rely on is
decided in :mod:`shuffledp.accounting.api` (only upper bounds can be). A
method whose own range is exceeded, or that raises
:class:`~shuffledp._validation.InvalidParameterError` for these parameters,
gives NaN with the reason; it never fails the other methods.

Group: the questions users ask (``api``, ``methods``, ``calibration``,
``segmented_parameters``, ``per_user_epsilons``); may import every other group.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any, Literal

from shuffledp._validation import (
    InvalidParameterError,
    check_epsilon,
    check_flip_probability,
    check_int,
    check_probability,
)
from shuffledp.accounting.certificates.flip import _flip_delta, flip_delta_lower_bound
from shuffledp.accounting.certificates.krr import (
    ALL_SPLITS_UP_TO,
    LOG_RANGE,
    _krr_delta,
    _krr_delta_curve,
    krr_binary_split_delta,
    krr_delta_homogeneous,
    krr_delta_two_count_marginal,
    krr_probabilities,
    krr_two_count_pair,
)
from shuffledp.accounting.certificates.poisson import poisson_delta, poisson_delta_curve
from shuffledp.accounting.numerics.two_counts import TwoCountPair, two_count_delta
from shuffledp.accounting.published.generic_bounds import (
    Bound,
    bbgn2019_bennett_delta,
    bbgn2019_hoeffding_delta,
    erlingsson2019_delta,
    fmt2021_closed_delta,
)
from shuffledp.accounting.published.variation_ratio import (
    fmt2021_numeric_pair,
    group_composition,
    vr_generic_pair,
)
from shuffledp.accounting.reproductions.bbgn2019_bennett import bbgn2019_bennett_published_delta
from shuffledp.accounting.reproductions.biswas import biswas2023_delta
from shuffledp.accounting.reproductions.poisson_lemma3 import poisson_delta_lemma3
from shuffledp.privacy import BoundKind

__all__ = ["MECHANISMS", "METHODS", "Mechanism", "Method", "methods_for"]

MechanismKind = Literal["generic", "krr", "flip", "poisson"]
MECHANISMS: tuple[str, ...] = ("generic", "krr", "flip", "poisson")


@dataclass(frozen=True)
class Mechanism:
    """What is shuffled, with the parameters its accountants need.

    Attributes:
        kind: ``"generic"`` (any ε₀-LDP randomizer), ``"krr"`` (k-randomized
            response), ``"flip"`` (FLIP) or ``"poisson"`` (Poisson randomizer with
            blanket messages).
        n: Number of users.
        epsilon0: Local ε₀ (generic, krr).
        k: Deprecated spelling of k-RR's ``domain_size`` (a constructor argument
            only: it sets ``domain_size``, with a :class:`DeprecationWarning`).
        q: FLIP's flip probability.
        fake_users: FLIP's fake users per real user.
        domain_size: The domain size d: k-RR's (the paper's k), FLIP's, or the
            Poisson randomizer's number of items.
        report_probability: The Poisson randomizer's λ.
        blanket_messages: Potential blanket messages from the other users (Poisson).
        blanket_probability: Probability each is sent (Poisson; Thm 2's γ).
        items: Items per user for the Poisson randomizer (Thm 3's s).
        n_x0: Other users holding the victim's value, for the k-RR paper's formula.
    """

    kind: str
    n: int
    epsilon0: float | None = None
    k: InitVar[int | None] = None
    q: float | None = None
    fake_users: int | None = None
    domain_size: int | None = None
    report_probability: float | None = None
    blanket_messages: int | None = None
    blanket_probability: float = 1.0
    items: int = 1
    n_x0: int | None = None

    def __post_init__(self, k: int | None) -> None:
        if k is not None:
            warnings.warn(
                "Mechanism(k=...) is deprecated: k-RR's domain size is domain_size, as "
                "for the other mechanisms",
                DeprecationWarning,
                stacklevel=3,
            )
            if self.domain_size is not None and self.domain_size != k:
                raise InvalidParameterError(
                    f"k {k!r} and domain_size {self.domain_size!r} name the same number "
                    "(k is the deprecated spelling of domain_size)"
                )
            object.__setattr__(self, "domain_size", k)
        if self.kind not in MECHANISMS:
            raise InvalidParameterError(
                f"mechanism must be one of {', '.join(MECHANISMS)}, got {self.kind!r}"
            )
        check_int(self.n, "n", minimum=1)
        need: dict[str, tuple[str, ...]] = {
            "generic": ("epsilon0",),
            "krr": ("epsilon0", "domain_size"),
            "flip": ("q", "fake_users"),
            "poisson": ("report_probability", "domain_size", "blanket_messages"),
        }
        missing = [name for name in need[self.kind] if getattr(self, name) is None]
        if missing:
            raise InvalidParameterError(f"the {self.kind} mechanism needs {', '.join(missing)}")
        if self.epsilon0 is not None:
            check_epsilon(self.epsilon0, "epsilon0")
        if self.q is not None:
            check_flip_probability(self.q)
        if self.fake_users is not None:
            check_int(self.fake_users, "fake_users", minimum=0)
        if self.domain_size is not None:
            check_int(self.domain_size, "domain_size", minimum=2)
        if self.report_probability is not None:
            check_probability(self.report_probability, "report_probability", high=1.0 + 1e-12)
        if self.blanket_messages is not None:
            check_int(self.blanket_messages, "blanket_messages", minimum=0)
        check_probability(self.blanket_probability, "blanket_probability", high=1.0 + 1e-12)
        check_int(self.items, "items", minimum=1)
        if self.n_x0 is not None:
            check_int(self.n_x0, "n_x0", minimum=0, maximum=self.n - 1)

    def inputs(self) -> dict[str, Any]:
        """Return the parameters that are set (for reports)."""
        out: dict[str, Any] = {"mechanism": self.kind, "n": self.n}
        for name in (
            "epsilon0",
            "q",
            "fake_users",
            "domain_size",
            "report_probability",
            "blanket_messages",
            "n_x0",
        ):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.kind == "poisson":
            out["blanket_probability"] = self.blanket_probability
            out["items"] = self.items
        return out


@dataclass(frozen=True)
class Method:
    """One accounting method.

    Attributes:
        name: Identifier used by ``method=`` and the command line.
        mechanisms: Mechanism kinds it applies to.
        bound: What kind of number it returns.
        source: Citation.
        delta_fn: δ(ε) for a mechanism, as a :class:`Bound`.
        note: One line on what the number means.
        hint: A cheaper method whose ε(δ) lies near this one's (used to
            start the search for ε).
        deciding_fn: δ(ε) given the target the caller compares it with: it may
            stop refining once the comparison is decided, or refine less
            throughout (the value is still a certified bound of the same kind,
            only looser). Searches for ε and calibrations use it to propose an
            answer that they then settle on the public δ; ``None`` when the
            method has no such mode.
        curve_fn: A certified δ(·) curve built at one ε (the sum's blocks
            refined there and kept): a search for ε(δ) builds it once near the
            answer and reads ε off it. ``None`` when the method has none.
        guess_pair: A two-count pair whose Gaussian approximation
            (:mod:`shuffledp.accounting.numerics.gaussian_guess`) locates the
            method's answers, with no guarantee: searches for ε and ε₀ start
            there (for ε, polished on the pair's own lines when the pair is
            the method's δ and m·r ≥ 10⁵). Nothing reported depends on it,
            only the searches' time. ``None`` when the method has none.
    """

    name: str
    mechanisms: tuple[str, ...]
    bound: BoundKind
    source: str
    delta_fn: Callable[[float, Mechanism], Bound] = field(repr=False)
    note: str = ""
    hint: str | None = None
    deciding_fn: Callable[[float, Mechanism, float], Bound] | None = field(default=None, repr=False)
    curve_fn: Callable[[float, Mechanism], Callable[[float], float]] | None = field(
        default=None, repr=False
    )
    guess_pair: Callable[[Mechanism], TwoCountPair] | None = field(default=None, repr=False)

    def evaluate(
        self, epsilon: float, mechanism: Mechanism, *, target: float | None = None
    ) -> Bound:
        """δ(ε) for ``mechanism``; 0 for an upper or lower bound at ε ≥ ε₀.

        With ``target``, a method that has a deciding mode may return a looser
        (still certified) value when it is clearly above or below the target.

        An ε₀-LDP randomizer is (ε₀, 0)-DP before shuffling, so after it too:
        at ε ≥ ε₀ the true δ is 0 for every dataset, which every upper bound may
        report and which every lower bound must not exceed. A method that
        raises :class:`InvalidParameterError` for these parameters (its own
        range) gives NaN with the reason instead.
        """
        e0 = mechanism.epsilon0
        if e0 is not None and epsilon >= e0:
            if self.bound is BoundKind.UPPER:
                return Bound(0.0, True, "epsilon >= epsilon0: the local guarantee alone")
            if self.bound in (BoundKind.LOWER, BoundKind.EXACT):
                return Bound(0.0, True, "epsilon >= epsilon0: delta = 0 for every dataset")
        try:
            if target is not None and self.deciding_fn is not None:
                return self.deciding_fn(epsilon, mechanism, target)
            return self.delta_fn(epsilon, mechanism)
        except InvalidParameterError as exc:
            return Bound(math.nan, False, f"outside this method's range: {exc}")


def _ok(value: float) -> Bound:
    return Bound(value=value, certified=True)


def _eps0(m: Mechanism) -> float:
    assert m.epsilon0 is not None
    return m.epsilon0


def _poisson_item_delta(
    eps: float, m: Mechanism, fn: Callable[..., float], target: float | None = None
) -> float:
    # Thm 3 (segmented paper): s items cost (s·ε', s·e^{s·ε'}·δ'); at ε' = ε/s that is s·e^ε·δ'.
    assert m.report_probability is not None and m.domain_size is not None
    assert m.blanket_messages is not None
    extra: dict[str, float] = {}
    if target is not None:  # the item's δ that the group bound turns into the target
        extra["target"] = target if m.items == 1 else target / (m.items * math.exp(min(eps, 700.0)))
    item = fn(
        eps / m.items,
        m.report_probability,
        m.domain_size,
        m.blanket_messages,
        blanket_probability=m.blanket_probability,
        **extra,
    )
    if m.items == 1:
        return item
    return group_composition(eps / m.items, item, m.items)[1]


def _poisson_curve(eps: float, m: Mechanism) -> Callable[[float], float]:
    assert m.report_probability is not None and m.domain_size is not None
    assert m.blanket_messages is not None
    s = m.items
    item_curve = poisson_delta_curve(
        eps / s,
        m.report_probability,
        m.domain_size,
        m.blanket_messages,
        blanket_probability=m.blanket_probability,
    )
    if s == 1:
        return item_curve
    return lambda e: group_composition(e / s, item_curve(e / s), s)[1]


def _poisson_exact(eps: float, m: Mechanism, target: float | None = None) -> Bound:
    try:
        return _ok(_poisson_item_delta(eps, m, poisson_delta, target))
    except InvalidParameterError as exc:
        return Bound(math.nan, False, f"not computed: {exc}")


def _poisson_lemma3(eps: float, m: Mechanism) -> Bound:
    assert m.report_probability is not None and m.domain_size is not None
    if m.domain_size * m.report_probability < 1.0:
        return Bound(
            math.nan,
            False,
            f"Lemma 3's q = d*lambda must be >= 1, got {m.domain_size * m.report_probability:g} "
            f"(d={m.domain_size}, lambda={m.report_probability:g})",
        )
    return Bound(_poisson_item_delta(eps, m, poisson_delta_lemma3), False)


def _biswas(eps: float, m: Mechanism) -> Bound:
    if m.n_x0 is None:
        return Bound(math.nan, False, "needs n_x0, the number of other users holding x0")
    assert m.domain_size is not None
    if _eps0(m) > LOG_RANGE:
        return Bound(math.nan, False, f"computed for epsilon0 <= {LOG_RANGE:g}")
    return Bound(biswas2023_delta(eps, _eps0(m), m.domain_size, m.n, m.n_x0), False)


_NO_THIRD_VALUE = "needs k >= 3: with k = 2 no other user can hold a third value (see krr-splits)"


def _krr_homogeneous(eps: float, m: Mechanism) -> Bound:
    assert m.domain_size is not None
    if m.domain_size < 3:
        return Bound(math.nan, False, _NO_THIRD_VALUE)
    if m.n > _HOMOGENEOUS_MAX_N:
        return Bound(
            math.nan, False, f"computed for n <= {_HOMOGENEOUS_MAX_N} (a two-dimensional sum)"
        )
    return _ok(krr_delta_homogeneous(eps, _eps0(m), m.domain_size, m.n, rounding="down"))


def _krr_two_count(eps: float, m: Mechanism) -> Bound:
    assert m.domain_size is not None
    if m.domain_size < 3:
        return Bound(math.nan, False, _NO_THIRD_VALUE)
    return _ok(krr_delta_two_count_marginal(eps, _eps0(m), m.domain_size, m.n))


#: Tolerance of a pair's block sum in a deciding mode: the sum as it was reported
#: before the six-digit one (issue 17), a few lines at any n, within 0.2% of the exact.
_DECIDING_TOLERANCE = 2e-3


def _rough_pair_delta(
    pair: Callable[[Mechanism], TwoCountPair],
) -> Callable[[float, Mechanism, float], Bound]:
    """A two-count upper bound's deciding mode: its pair's block sum to 0.2%, still certified."""

    def rough(eps: float, m: Mechanism, target: float) -> Bound:
        return _ok(two_count_delta(pair(m), eps, tolerance=_DECIDING_TOLERANCE))

    return rough


def _krr_pair(m: Mechanism) -> TwoCountPair:
    """The counts of x₀ and x₁ among the n − 1 others' uniform reports and the victim's.

    krr-two-count's pair for k ≥ 3 (every other user on a third value); for
    k = 2 the same law with no third value (w₀ = 0), which the blanket bound's
    mixture averages around.
    """
    assert m.domain_size is not None
    if m.domain_size >= 3:
        return krr_two_count_pair(_eps0(m), m.domain_size, m.n)
    a, b = krr_probabilities(_eps0(m), m.domain_size)
    return TwoCountPair(blanket=m.n - 1, rate=min(1.0, 2.0 * b), w1=a, w2=b, w0=0.0)


def _krr_two_count_rough(eps: float, m: Mechanism, target: float) -> Bound:
    assert m.domain_size is not None
    if m.domain_size < 3:
        return Bound(math.nan, False, _NO_THIRD_VALUE)
    pair = krr_two_count_pair(_eps0(m), m.domain_size, m.n)
    return _ok(two_count_delta(pair, eps, rounding="down", tolerance=_DECIDING_TOLERANCE))


def _flip_lower(eps: float, m: Mechanism) -> Bound:
    # Without domain_size only datasets on two values are known to exist: use d = 2.
    value = flip_delta_lower_bound(eps, m.q or 0.0, m.fake_users or 0, m.n, m.domain_size or 2)
    if m.domain_size is None:
        return Bound(value, True, "splits between two values (pass domain_size for d >= 3)")
    return _ok(value)


def _krr_splits(eps: float, m: Mechanism) -> Bound:
    assert m.domain_size is not None
    if m.domain_size != 2:
        return Bound(math.nan, False, "k = 2 only (for k >= 3 see krr-homogeneous)")
    value = krr_binary_split_delta(eps, _eps0(m), m.n)
    if m.n <= ALL_SPLITS_UP_TO:
        return Bound(value, True, "all n splits: the exact worst case, rounded down")
    return Bound(value, True, "evenly spaced splits of the other users (a lower bound)")


_GENERIC = ("generic", "krr")
#: The homogeneous dataset's exact sum costs about n·b² cells; keep it interactive.
_HOMOGENEOUS_MAX_N = 5_000

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(
            "erlingsson2019",
            _GENERIC,
            BoundKind.UPPER,
            "Erlingsson, Feldman, Mironov, Raghunathan, Talwar & Thakurta, SODA 2019",
            lambda e, m: erlingsson2019_delta(e, _eps0(m), m.n),
            "closed form; eps0 < 1/2, n >= 1000, delta < 1/100",
        ),
        Method(
            "bbgn2019-hoeffding",
            _GENERIC,
            BoundKind.UPPER,
            "Balle, Bell, Gascon & Nissim, CRYPTO 2019 (privacy blanket, Hoeffding)",
            lambda e, m: bbgn2019_hoeffding_delta(e, _eps0(m), m.n),
            "generic blanket gamma = e^-eps0",
        ),
        Method(
            "bbgn2019-bennett",
            _GENERIC,
            BoundKind.UPPER,
            "Balle, Bell, Gascon & Nissim, CRYPTO 2019 (privacy blanket, Bennett)",
            lambda e, m: bbgn2019_bennett_delta(e, _eps0(m), m.n),
            "generic blanket gamma = e^-eps0; tail integrated soundly",
        ),
        Method(
            "bbgn2019-bennett-published",
            _GENERIC,
            BoundKind.REPRODUCTION,
            "Balle, Bell, Gascon & Nissim, CRYPTO 2019, as their reference code integrates Bennett",
            lambda e, m: Bound(bbgn2019_bennett_published_delta(e, _eps0(m), m.n).value, False),
            "below the exact delta of binary RR at large n; not a guarantee",
        ),
        Method(
            "fmt2021-closed",
            _GENERIC,
            BoundKind.UPPER,
            "Feldman, McMillan & Talwar, FOCS 2021 (closed form)",
            lambda e, m: fmt2021_closed_delta(e, _eps0(m), m.n),
            "eps0 <= ln(n/(16 ln(2/delta)))",
        ),
        Method(
            "fmt2021-numeric",
            _GENERIC,
            BoundKind.UPPER,
            "Feldman, McMillan & Talwar, FOCS 2021 (clones, numerical)",
            lambda e, m: _ok(two_count_delta(fmt2021_numeric_pair(_eps0(m), m.n), e)),
            "exact divergence of the clone pair, C ~ Bin(n-1, e^-eps0)",
            deciding_fn=_rough_pair_delta(lambda m: fmt2021_numeric_pair(_eps0(m), m.n)),
            guess_pair=lambda m: fmt2021_numeric_pair(_eps0(m), m.n),
        ),
        Method(
            "vr2024",
            _GENERIC,
            BoundKind.UPPER,
            "Wang et al., VLDB 2024 (variation-ratio reduction, generic parameters)",
            lambda e, m: _ok(two_count_delta(vr_generic_pair(_eps0(m), m.n), e)),
            "exact divergence, p = q = e^eps0, beta = tanh(eps0/2)",
            deciding_fn=_rough_pair_delta(lambda m: vr_generic_pair(_eps0(m), m.n)),
            guess_pair=lambda m: vr_generic_pair(_eps0(m), m.n),
        ),
        Method(
            "krr-blanket",
            ("krr",),
            BoundKind.UPPER,
            "this package: k-RR blanket with exact inner divergence"
            " (shuffledp.accounting.certificates.krr)",
            # The Mechanism checked ε₀, k and n, the public question ε: the kernels.
            lambda e, m: _ok(_krr_delta(e, _eps0(m), m.domain_size or 2, m.n)),
            "holds for every dataset",
            hint="krr-two-count",
            deciding_fn=lambda e, m, t: _ok(
                _krr_delta(e, _eps0(m), m.domain_size or 2, m.n, target=t)
            ),
            curve_fn=lambda e, m: _krr_delta_curve(e, _eps0(m), m.domain_size or 2, m.n),
            guess_pair=_krr_pair,
        ),
        Method(
            "krr-homogeneous",
            ("krr",),
            BoundKind.LOWER,
            "this package: exact delta of the dataset with all other users on one third value",
            _krr_homogeneous,
            "attained by a concrete dataset (often, not always, the worst one)",
            hint="krr-two-count",
        ),
        Method(
            "krr-two-count",
            ("krr",),
            BoundKind.LOWER,
            "counts of x0 and x1 on that dataset; equals Wang et al. (VLDB 2024) with k-RR"
            " parameters",
            _krr_two_count,
            "published as an upper bound, but it is a marginal of the histogram",
            deciding_fn=_krr_two_count_rough,
            guess_pair=_krr_pair,
        ),
        Method(
            "krr-splits",
            ("krr",),
            BoundKind.LOWER,
            "this package: exact delta of binary randomized response (k = 2), largest over the"
            " splits of the other users between x0 and x1",
            _krr_splits,
            "attained by a concrete dataset; the exact worst case when all splits are computed",
        ),
        Method(
            "biswas2023",
            ("krr",),
            BoundKind.REPRODUCTION,
            "Biswas, Jung & Palamidessi, FPS 2023 (Def. 11, Thm 1, as printed)",
            _biswas,
            "one marginal, one dataset, printed v_s; not a guarantee",
        ),
        Method(
            "flip-exact",
            ("flip",),
            BoundKind.UPPER,
            "this package: exact FLIP divergence with the n*k fake reports as blanket",
            lambda e, m: _ok(_flip_delta(e, m.q or 0.0, m.fake_users or 0, m.n)),
            "holds for every dataset",
        ),
        Method(
            "flip-lower",
            ("flip",),
            BoundKind.LOWER,
            "this package: exact delta of a concrete FLIP dataset pair",
            _flip_lower,
            "other users on a third value (d >= 3) or split between the two values (d = 2)",
        ),
        Method(
            "poisson-exact",
            ("poisson",),
            BoundKind.UPPER,
            "this package: exact divergence of Lemma 2's reduced view (segmented paper)",
            _poisson_exact,
            "counts absent and other messages; Thm 3 for several items",
            deciding_fn=_poisson_exact,
            curve_fn=_poisson_curve,
            hint="poisson-lemma3",
        ),
        Method(
            "poisson-lemma3",
            ("poisson",),
            BoundKind.REPRODUCTION,
            "Wang et al., segmented shuffle paper (Lemma 3 with Thm 2), as printed",
            _poisson_lemma3,
            "falls below the exact value of the same view; not a guarantee",
        ),
    )
}

#: The tightest certified upper bound for each mechanism.
BEST: dict[str, str] = {
    "generic": "vr2024",
    "krr": "krr-blanket",
    "flip": "flip-exact",
    "poisson": "poisson-exact",
}


def methods_for(kind: str) -> list[Method]:
    """Return the methods that apply to a mechanism kind, in registry order."""
    if kind not in MECHANISMS:
        raise InvalidParameterError(
            f"mechanism must be one of {', '.join(MECHANISMS)}, got {kind!r}"
        )
    return [m for m in METHODS.values() if kind in m.mechanisms]
