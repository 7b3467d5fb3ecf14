"""Exact accounting for the augmented shuffle protocols: the shuffler adds the noise.

Source: T. Murakami, Y. Sei and R. Eriguchi, "Augmented Shuffle Protocols for
Accurate and Robust Frequency Estimation under Differential Privacy", arXiv
2504.07362 (2025): the local-noise-free (LNF) framework and its three
instances, SBin-Shuffle (binomial dummies), SAGeo-Shuffle (asymmetric
two-sided geometric dummies) and S1Geo-Shuffle (its pure-ε special case).

What the analyzer sees. Each of n users sends its value, encrypted to the
analyzer, and no noise. The shuffler keeps each message independently with
probability β, adds z_j dummy messages of value j for every bin j (z_j i.i.d.
from a public law f on {0, 1, …}) and shuffles. The analyzer decrypts and
counts: for every bin,

    c_j = Bin(h_j, β) + z_j,   independently over j,

where h_j is the number of users holding j.

The exact pair (replace-one neighbours). A victim moves from x to y. Bins
other than x and y have the same law under both datasets and are independent
of (c_x, c_y): they cancel. In (c_x, c_y), the other users' kept messages are
independent of the victim and have the same law under both datasets, so
adding them is a post-processing of the victim's kept message plus the
dummies. Hence for every dataset

    δ(ε) ≤ H_ε(P ‖ Q),  P = p₁ ⊗ f,  Q = f ⊗ p₁,  p₁ = (1 − β)·f + β·(f ∗ δ₁),

(P: the victim's message, kept with probability β, lands in x; Q: in y),
and H_ε(Q‖P) = H_ε(P‖Q) by swapping the coordinates. Equality holds for every
dataset whose other users hold neither x nor y, and for every dataset at
β = 1 (the other users' messages are then fixed counts), so the bound is the
exact worst case whenever such a dataset exists (d ≥ 3, or n = 1, or β = 1).

SAGeo (the certificate :func:`sageo_delta`). The dummy law with shift ν ≥ 0
and ratios q_l ∈ [0, 1), q_r ∈ (0, 1) is f(k) ∝ q_l^{ν−k} for 0 ≤ k < ν and
q_r^{k−ν} for k ≥ ν. Its LNF parameters for a target ε and sampling rate
β ≥ 1 − e^{−ε/2} are q_l = (e^{−ε/2} − 1 + β)/β and q_r = β/(e^{ε/2} − 1 + β);
at β = 1 both are e^{−ε/2} and f is DLap(ε/2) shifted by ν and truncated at
zero. Write P(a, b) − e^ε Q(a, b) = f(a)·f(b)·(g(a) − e^ε·g(b)) with
g(k) = (1 − β) + β·f(k − 1)/f(k). For SAGeo, g takes three values on three
blocks of the support: g₀ = 1 − β at k = 0, g_L = 1 − β + β·q_l on 1 ≤ k ≤ ν
and g_R = 1 − β + β/q_r on k > ν. So the two-dimensional sum over the whole
(infinite) support collapses, exactly, to nine block terms:

    H_ε(P‖Q) = Σ_{A, B ∈ {0, L, R}} F_A·F_B·(g_A − e^ε·g_B)₊,

with the block masses F₀ = q_l^ν/Z, F_L = (1 − q_l^ν)/((1 − q_l)·Z),
F_R = q_r/((1 − q_r)·Z) and Z = q_l(1 − q_l^ν)/(1 − q_l) + 1/(1 − q_r). No
truncation is involved. In exact arithmetic g_L = e^{−ε/2}, g_R = e^{ε/2} and
g₀ ≤ e^{−ε/2}, so at the design ε only the blocks B = 0 contribute: the δ
comes from the dummy count's zero (at β = 1, δ = F₀ = f(0) exactly).

Numerics. The laws are built at the design ε·(1 − 2⁻³⁰)
(:data:`DESIGN_MARGIN`): their interior ratios are then e^{ε(1 − 2⁻³⁰)}, which
the certificate can tell apart from e^ε in floating point (a block term whose
sign floating point cannot decide is charged in full); the noise's variance
moves by about 1e-9 of itself. Every block mass is computed within a relative
(4ν·|ln q_l| + 64)·u of the truth (u = 2⁻⁵³: q_l^ν = exp(−ν·|ln q_l|) carries
the conditioning ν·|ln q_l|·u, every other operation a few roundings), every
g within 3u, e^ε within u; each difference g_A − e^ε g_B is widened by
16u·(g_A + e^ε g_B) and each term by its masses' error, all to the safe side,
and the nine-term sum by 32u. Each term F_A·F_B·(g_A − e^ε g_B) is formed in
log space (at large ε a mass near 1e-218 meets a g near 1e+217, and the direct
product would underflow to 0), widened by 4096u for the three logarithms
(each within u·745) and the exponential; a term below e^{−690} is charged
1e-300, as is a q_l^ν below 1e-300 (subnormals lose relative precision).

SBin and other laws (:func:`augmented_delta_on_grid`). For a law without the
block structure, P = p₁ ⊗ f and Q = f ⊗ p₁ is a product pair, summed exactly
on a window of f by
:func:`shuffledp.accounting.numerics.hockey_stick.certified_hockey_stick_product`, with
the mass outside the window (2·dropped + f(hi), see the function) added. The
same function applied to SAGeo is an independent algorithm for
:func:`sageo_delta` (the tests compare them).

Calibration. :func:`calibrate_sageo_nu` returns the smallest integer ν ≥ 0
whose certificate meets the target, by evaluating the certificate at every
ν = 0, 1, 2, … in order (vectorized in blocks of 2²⁰) until the first that
passes: no monotonicity in ν is assumed. :func:`calibrate_sbin_trials` returns
the smallest number of trials M of Bin(M, 1/2) whose certificate meets the
target, by bisection: δ is non-increasing in M, because Bin(M + 1, 1/2) is
Bin(M, 1/2) plus an independent fair coin, the same for both datasets, added
to each bin (a post-processing); the search then steps down while M − 1 also
passes.

The paper's closed form
(:func:`shuffledp.accounting.reproductions.augmented_paper.paper_sageo_nu`) is
kept as a reproduction, never as a certificate.

The laws (:class:`SAGeoLaw`, :class:`SBinLaw`) and :func:`check_beta` are the
shuffler's own value types (:mod:`shuffledp.randomizers.augmented`), re-exported
here; what only a certificate needs of them is here: their pmf on a window with
a relative error bound (:func:`dummy_law_window`, :func:`dummy_law_pmf`).

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
    check_rounding,
)
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_pmf,
    binomial_window,
)
from shuffledp.accounting.numerics.hockey_stick import certified_hockey_stick_product, exp_or_inf
from shuffledp.accounting.numerics.search import smallest_passing_integer
from shuffledp.randomizers.augmented import (
    SBIN_MAX_TRIALS,
    DummyLaw,
    SAGeoLaw,
    SBinLaw,
    check_beta,
    minimum_beta,
)

__all__ = [
    "DESIGN_MARGIN",
    "MAX_EPSILON",
    "VARIANTS",
    "DummyLaw",
    "SAGeoLaw",
    "SBinLaw",
    "Variant",
    "augmented_delta",
    "augmented_delta_on_grid",
    "calibrate_sageo_nu",
    "calibrate_sbin_trials",
    "check_beta",
    "dummy_law_pmf",
    "dummy_law_window",
    "minimum_beta",
    "s1geo_beta",
    "s1geo_law",
    "sageo_delta",
    "sageo_law",
]

FloatArray = NDArray[np.float64]
Rounding = Literal["up", "down"]
Variant = Literal["sageo", "s1geo", "sbin"]
#: The dummy laws: asymmetric two-sided geometric, its pure-ε case, binomial.
VARIANTS: tuple[str, ...] = ("sageo", "s1geo", "sbin")

#: The laws are built at the design ε·(1 − DESIGN_MARGIN) (see the module docstring).
DESIGN_MARGIN = 2.0**-30
#: Largest ε the SAGeo laws are built for (e^{ε/2} stays far from overflow).
MAX_EPSILON = 1000.0

_U = 2.0**-53
#: A q_l^ν below this is replaced by it in upper bounds (no subnormal arithmetic).
_TINY = 1e-300
#: Values of ν evaluated per vectorized step of the exhaustive search.
_NU_BLOCK = 1 << 20
#: The exhaustive search refuses to scan more values of ν than this.
_MAX_NU = 10**8
#: Largest number of binomial trials the SBin search considers (what SBinLaw accepts).
_MAX_TRIALS = SBIN_MAX_TRIALS


def _design_epsilon(epsilon: float) -> float:
    return epsilon * (1.0 - DESIGN_MARGIN)


def check_law_epsilon(epsilon: float) -> float:
    """Check an ε for the augmented shuffle's dummy laws (at most :data:`MAX_EPSILON`)."""
    epsilon = check_epsilon(epsilon)
    if epsilon > MAX_EPSILON:
        raise InvalidParameterError(
            f"epsilon must be at most {MAX_EPSILON:g} for the augmented protocol's dummy laws, "
            f"got {epsilon!r}"
        )
    return epsilon


def _sageo_window(law: SAGeoLaw, tail: float) -> Window:
    """SAGeo's f on [lo, hi] with at most ``tail`` of its mass left out on each side.

    Beyond hi ≥ ν the mass is f(hi)·q_r/(1 − q_r); below lo ≤ ν it is at
    most f(lo)·q_l/(1 − q_l); both are computed and recorded (widened by
    1e-9 of themselves, far above their rounding) in ``dropped``. Entries
    are within a relative (4·L + 64)·u of the truth, L the largest
    |ln f| (on the window and at lo − 1) + ν·|ln q_l| + |ln Z| (each
    log-probability is a product and a difference of terms below L, each
    within a few units, and Z within (3ν|ln q_l| + 12)u).
    """
    z = law.normalizer
    q_r, q_l = law.q_right, law.q_left
    a_r = -math.log(q_r)
    log_z = math.log(z)
    need_r = math.log(q_r / ((1.0 - q_r) * tail)) - log_z
    hi = law.nu + max(0, math.ceil(need_r / a_r))
    if q_l > 0.0 and law.nu > 0:
        a_l = -math.log(q_l)
        need_l = math.log(q_l / ((1.0 - q_l) * tail)) - log_z
        lo = max(0, law.nu - max(0, math.ceil(need_l / a_l)))
    else:
        lo = law.nu if q_l == 0.0 else 0
    points = np.arange(lo, hi + 1)
    log_pmf = law.log_pmf(points)
    pmf = np.exp(log_pmf)
    widen = 1.0 + 1e-9
    dropped = float(pmf[-1]) * q_r / (1.0 - q_r) * widen
    if lo > 0 and q_l > 0.0:
        dropped += float(pmf[0]) * q_l / (1.0 - q_l) * widen
    # The scale covers lo − 1 too: the pair's sum evaluates f there (p₁(lo)).
    edge = law.log_pmf(np.array([lo - 1]))[0]
    largest = float(np.max(np.abs(log_pmf)))
    if math.isfinite(edge):
        largest = max(largest, abs(float(edge)))
    scale = largest + law.left_exponent + abs(log_z)
    pmf.setflags(write=False)
    return Window(lo, pmf, dropped, (4.0 * scale + 64.0) * _U)


def dummy_law_window(law: DummyLaw, tail: float = DEFAULT_TAIL) -> Window:
    """Return the dummy law's pmf on a window, the mass left out and a relative error bound.

    SAGeo: the window around ν with at most ``tail`` of the mass left out on
    each side (its error bound in :func:`_sageo_window`'s terms). SBin:
    Bin(M, 1/2) on a Bernstein window
    (:func:`~shuffledp.accounting.numerics.binomial.binomial_window`).

    Raises:
        InvalidParameterError: If ``law`` is not a SAGeoLaw or an SBinLaw.
    """
    if isinstance(law, SBinLaw):
        return binomial_window(law.trials, 0.5, tail)
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
    return _sageo_window(law, tail)


def dummy_law_pmf(law: DummyLaw, points: NDArray[np.integer]) -> FloatArray:
    """The dummy law's pmf at integer points, within :func:`dummy_law_window`'s error bound.

    SAGeo: :meth:`~shuffledp.randomizers.augmented.SAGeoLaw.pmf`. SBin:
    P[Bin(M, 1/2) = k] in Loader's saddle-point form
    (:func:`~shuffledp.accounting.numerics.binomial.binomial_pmf`), the form
    its window is computed in.

    Raises:
        InvalidParameterError: If ``law`` is not a SAGeoLaw or an SBinLaw.
    """
    if isinstance(law, SBinLaw):
        return binomial_pmf(np.asarray(points, dtype=np.float64), law.trials, 0.5)
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
    return law.pmf(points)


def sageo_law(epsilon: float, beta: float = 1.0, nu: int = 0) -> SAGeoLaw:
    """Return SAGeo's law for ε and β with shift ν, built at the design ε·(1 − 2⁻³⁰).

    q_l = (e^{−ε'/2} − 1 + β)/β = (β − (1 − e^{−ε'/2}))/β and
    q_r = β/(e^{ε'/2} − 1 + β) with ε' the design ε; at β = 1 both are
    e^{−ε'/2} (computed once).

    Raises:
        InvalidParameterError: If ε is out of range or β < 1 − e^{−ε/2}.
    """
    epsilon = check_law_epsilon(epsilon)
    beta = check_beta(beta, epsilon)
    nu = check_int(nu, "nu", minimum=0, maximum=_MAX_NU)
    return _sageo_law(epsilon, beta, nu)


def _sageo_law(epsilon: float, beta: float, nu: int) -> SAGeoLaw:
    """:func:`sageo_law` on checked inputs."""
    half = _design_epsilon(epsilon) / 2.0
    if beta == 1.0:
        q = math.exp(-half)
        return SAGeoLaw(nu, q, q)
    low = -math.expm1(-half)
    return SAGeoLaw(nu, max(0.0, (beta - low) / beta), beta / (math.expm1(half) + beta))


def s1geo_beta(epsilon: float) -> float:
    """Return S1Geo's sampling rate 1 − e^{−ε'/2} at the design ε' = ε·(1 − 2⁻³⁰)."""
    return -math.expm1(-_design_epsilon(check_law_epsilon(epsilon)) / 2.0)


def s1geo_law(epsilon: float) -> tuple[SAGeoLaw, float]:
    """Return S1Geo's (law, β): β = 1 − e^{−ε'/2}, z ~ Geo(1/(1 + e^{ε'/2})) (pure ε-DP).

    At the smallest β, q_l = 0 and q_r = β/(e^{ε'/2} − 1 + β) = 1/(1 + e^{ε'/2});
    with ν = 0 the law is P(k) = (1 − q_r)·q_r^k, k ≥ 0. The ratio of the
    pair's laws is g_R/g₀ = e^{ε'/2}/e^{−ε'/2} = e^{ε'} at most, so δ = 0 at
    every ε ≥ ε' (what :func:`sageo_delta` certifies).
    """
    epsilon = check_law_epsilon(epsilon)
    half = _design_epsilon(epsilon) / 2.0
    q_r = 1.0 / (1.0 + math.exp(half))
    return SAGeoLaw(0, 0.0, q_r), -math.expm1(-half)


def _g_values(law: SAGeoLaw, beta: float) -> tuple[float, float, float]:
    """(g₀, g_L, g_R) = (1 − β, 1 − β + β·q_l, 1 − β + β/q_r), each within 3u."""
    keep_out = 1.0 - beta
    return keep_out, keep_out + beta * law.q_left, keep_out + beta / law.q_right


def _block_masses(
    nu: NDArray[np.int64], q_left: float, q_right: float, rounding: Rounding
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(F₀, F_L, F_R) for every ν, rounded to the side ``rounding`` asks for."""
    nu_f = nu.astype(np.float64)
    if q_left > 0.0:
        x = nu_f * -math.log(q_left)
        power, rest = np.exp(-x), -np.expm1(-x)
        s_left = q_left * rest / (1.0 - q_left)
        one_minus_ql = 1.0 - q_left
    else:
        x = np.zeros_like(nu_f)
        power = np.where(nu == 0, 1.0, 0.0)
        rest = 1.0 - power
        s_left = np.zeros_like(nu_f)
        one_minus_ql = 1.0
    z = s_left + 1.0 / (1.0 - q_right)
    f0 = power / z
    fl = np.where(nu == 0, 0.0, rest / (one_minus_ql * z))
    fr = q_right / ((1.0 - q_right) * z)
    rel = (4.0 * x + 64.0) * _U
    if rounding == "up":
        factor = 1.0 + rel
        if q_left > 0.0:
            f0 = np.where(nu == 0, f0, np.maximum(f0, _TINY / z))
        return f0 * factor, fl * factor, fr * factor
    factor = 1.0 - rel
    f0 = np.where(power < _TINY, 0.0, f0)
    return f0 * factor, fl * factor, fr * factor


def _block_delta(
    epsilon: float,
    nu: NDArray[np.int64],
    q_left: float,
    q_right: float,
    beta: float,
    rounding: Rounding,
) -> FloatArray:
    """The nine-block sum of the module docstring for every ν, rounded to the safe side."""
    f0, fl, fr = _block_masses(nu, q_left, q_right, rounding)
    g = _g_values(SAGeoLaw(0, q_left, q_right), beta)
    e_eps = exp_or_inf(epsilon)
    with np.errstate(divide="ignore"):
        log_masses = (np.log(f0), np.log(fl), np.log(fr))
    total = np.zeros(nu.shape)
    for log_a, g_a in zip(log_masses, g, strict=True):
        for log_b, g_b in zip(log_masses, g, strict=True):
            scaled = 0.0 if g_b == 0.0 else e_eps * g_b
            if math.isinf(scaled):
                continue  # g_A − ∞ < 0
            diff = g_a - scaled
            err = 16.0 * _U * (g_a + scaled)
            bound = diff + err if rounding == "up" else diff - err
            if bound <= 0.0:
                continue
            # F_A·F_B·bound in log space: no intermediate underflow (at large ε a mass
            # near 1e-218 meets a g near 1e+217). Each log is within u·|log| ≤ 745u.
            log_term = log_a + log_b + math.log(bound)
            term = np.exp(log_term)
            if rounding == "up":
                term = term * (1.0 + 4096.0 * _U)
                # Below e^-690 the exponential loses relative precision: charge 1e-300.
                term = np.where(np.isfinite(log_term) & (log_term < -690.0), _TINY, term)
            else:
                term = np.where(log_term < -690.0, 0.0, term * (1.0 - 4096.0 * _U))
            total = total + term
    if rounding == "up":
        return np.minimum(1.0, total * (1.0 + 32.0 * _U))
    return np.maximum(0.0, total * (1.0 - 32.0 * _U))


def sageo_delta(
    epsilon: float, law: SAGeoLaw, beta: float = 1.0, *, rounding: Rounding = "up"
) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)) of the augmented pair with SAGeo dummies, exactly.

    The nine-block sum of the module docstring over the whole support, with
    the floating-point error charged to the safe side (``"up"``: a δ that holds
    for every dataset; ``"down"``: a lower bound on the exact δ, attained by
    any dataset whose other users hold neither value, or by every dataset at
    β = 1).

    Args:
        epsilon: ε > 0 at which to evaluate (the law may have been built for another).
        law: The dummy law.
        beta: The shuffler's sampling rate β in (0, 1].
        rounding: ``"up"`` or ``"down"``.
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    beta = check_beta(beta)
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw, got {type(law).__name__}")
    nu = np.array([law.nu], dtype=np.int64)
    return float(_block_delta(epsilon, nu, law.q_left, law.q_right, beta, rounding)[0])


def augmented_delta_on_grid(
    epsilon: float,
    law: DummyLaw,
    beta: float = 1.0,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)) of the augmented pair by the sum over a window.

    P = p₁ ⊗ f and Q = f ⊗ p₁ with p₁ = (1 − β)f + β·f(· − 1), both on the
    grid G = [lo, hi + 1], one point past f's window [lo, hi] so that p₁'s
    shifted part stays inside (f(lo − 1) and f(hi + 1) are evaluated
    directly). With ``dropped`` the window's left-out mass (both sides),
    f(∉G) ≤ dropped and p₁(∉G) = (1 − β)f(∉G) + β·f(∉[lo − 1, hi]) ≤ dropped, so
    outside G × G, P has at most 2·dropped, and so has Q; that is added
    (``"up"``) or charged e^ε times (``"down"``) by
    :func:`~shuffledp.accounting.numerics.hockey_stick.certified_hockey_stick_product`,
    with each entry within the window's relative error plus 8u.

    Args:
        epsilon: ε > 0.
        law: The dummy law (any: SAGeo, S1Geo or SBin).
        beta: The sampling rate β in (0, 1].
        rounding: ``"up"`` (upper bound) or ``"down"`` (lower bound).
        tail: Mass left out of f's window on each side.
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    beta = check_beta(beta)
    return _on_grid_delta(epsilon, law, beta, rounding, tail)


def _on_grid_delta(
    epsilon: float, law: DummyLaw, beta: float, rounding: Rounding, tail: float
) -> float:
    """:func:`augmented_delta_on_grid` on checked inputs: what the SBin search evaluates."""
    window = dummy_law_window(law, tail)
    inside = np.asarray(window.pmf, dtype=np.float64)
    before = dummy_law_pmf(law, np.array([window.lo - 1]))
    after = dummy_law_pmf(law, np.array([window.lo + len(inside)]))
    f = np.concatenate([inside, after])
    f_prev = np.concatenate([before, inside])
    p1 = (1.0 - beta) * f + beta * f_prev
    rel = window.rel_error + 16.0 * _U
    dropped = 2.0 * window.dropped * (1.0 + 1e-9)
    return certified_hockey_stick_product(
        p1, f, f, p1, epsilon, relative_error=rel, dropped=dropped, rounding=rounding, both=True
    )


def augmented_delta(
    epsilon: float,
    law: DummyLaw,
    beta: float = 1.0,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return the certified δ(ε) of the augmented protocol for every dataset.

    SAGeo and S1Geo: :func:`sageo_delta` (exact block sum, no truncation).
    SBin: :func:`augmented_delta_on_grid` (window sum with its left-out mass
    added). The neighbouring relation is replace-one; the argument is in the
    module docstring. With ``rounding="down"`` the result is a lower bound on
    the exact δ of the pair, which is that of a dataset whenever one exists
    with the other users outside the two values (d ≥ 3, n = 1 or β = 1).
    """
    rounding = check_rounding(rounding)
    if isinstance(law, SAGeoLaw):
        return sageo_delta(epsilon, law, beta, rounding=rounding)
    if isinstance(law, SBinLaw):
        return augmented_delta_on_grid(epsilon, law, beta, rounding=rounding, tail=tail)
    raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {type(law).__name__}")


def calibrate_sageo_nu(epsilon: float, delta: float, beta: float = 1.0) -> int:
    """Return the smallest integer ν ≥ 0 whose certified δ(ε) (:func:`augmented_delta`) is ≤ δ.

    The law is :func:`sageo_law` (ε, β, ν). Every ν = 0, 1, 2, … is evaluated
    in order, by the same block sum as the certificate (vectorized), until the
    first that meets the target; that ν is re-certified by the certificate's own
    sum on that one ν (what :func:`augmented_delta` computes for
    ``sageo_law(ε, β, ν)``, whose q_l and q_r do not depend on ν). At the design
    ε only the blocks at the zero count contribute and δ ≤ q_l^ν·(1 − q_r)·g_R, so
    the scan ends by ν = ⌈ln(δ/((1 − q_r)g_R))/ln q_l⌉ + 1. With q_l = 0 (β at
    its minimum) the law's ν only shifts it, and ν = 0 is returned if it meets the
    target.

    Raises:
        InvalidParameterError: On bad parameters, or if no ν meets the target
            within the search (ε so small that ν would exceed 1e8).
    """
    epsilon = check_law_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_beta(beta, epsilon)
    base = _sageo_law(epsilon, beta, 0)
    q_l, q_r = base.q_left, base.q_right
    if q_l == 0.0:
        limit = 0
    else:
        g_r = _g_values(base, beta)[2]
        need = math.log(delta / ((1.0 - q_r) * g_r)) / math.log(q_l)
        limit = max(0, math.ceil(need)) + 1
        if limit > _MAX_NU:
            raise InvalidParameterError(
                f"epsilon={epsilon:g} is too small for the SAGeo search: the shift nu would "
                f"exceed {_MAX_NU:g} dummies per bin at delta={delta:g}"
            )
    for start in range(0, limit + 1, _NU_BLOCK):
        nus = np.arange(start, min(limit, start + _NU_BLOCK - 1) + 1, dtype=np.int64)
        passing = np.flatnonzero(_block_delta(epsilon, nus, q_l, q_r, beta, "up") <= delta)
        for index in passing:
            nu = int(nus[index])
            one = np.array([nu], dtype=np.int64)
            if float(_block_delta(epsilon, one, q_l, q_r, beta, "up")[0]) <= delta:
                return nu
    raise InvalidParameterError(
        f"no shift nu meets delta={delta:g} at epsilon={epsilon:g}, beta={beta:g} "
        "(the certificate's floor is above the target)"
    )


def calibrate_sbin_trials(epsilon: float, delta: float, beta: float = 1.0) -> int:
    """Return the smallest M whose certified δ(ε) with Bin(M, 1/2) dummies is ≤ δ.

    Bisection on M (δ is non-increasing in M: the module docstring), then a
    step down while M − 1 also meets the target, so the answer's predecessor
    fails by the public certificate.

    Raises:
        InvalidParameterError: On bad parameters, or if even 1e9 trials do not meet the target.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_beta(beta)

    def passes(m: int) -> bool:
        # augmented_delta of Bin(m, 1/2) dummies, its inputs checked above.
        return _on_grid_delta(epsilon, SBinLaw(m), beta, "up", DEFAULT_TAIL) <= delta

    try:
        hi = smallest_passing_integer(passes, start=1, limit=int(_MAX_TRIALS))
    except ValueError:
        raise InvalidParameterError(
            f"no number of binomial dummies up to {_MAX_TRIALS:g} meets delta={delta:g} "
            f"at epsilon={epsilon:g}"
        ) from None
    while hi > 1 and passes(hi - 1):
        hi -= 1
    return hi
