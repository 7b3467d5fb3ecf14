"""The analyzer's check that an augmented batch carries the shuffler's dummies.

An honest augmented shuffler forwards a batch of n submissions holding
T = R + Z messages: R ~ Bin(n, β) of the users' messages survive the
β-sampling (R = n at β = 1) and Z = z_1 + … + z_d dummies, z_j i.i.d. from
the task's law (SAGeo, S1Geo or SBin: :mod:`shuffledp.accounting.certificates.augmented`).
A batch forwarded without dummies (a broken shuffler, or whoever holds the
forward token posting the users' messages alone) is published with the usual
(ε, δ) although its counts are the users' values in the clear. The analyzer
therefore refuses a batch of n users with fewer than L(n) messages, L(n) the
largest integer with P[T < L(n)] ≤ :data:`DUMMY_CHECK_TAIL` (10⁻³⁰) under the
honest law (:func:`fewest_honest_messages`).

What the check costs. Nothing in privacy: the analyzer decides from what it
received (the batch's message count), so the release is a post-processing of
its view and keeps the certified (ε, δ). An honest batch is refused with
probability at most 10⁻³⁰ (it would then wait in the shuffler's outbox).

What it catches. A batch of the users' messages alone (T ≤ n) is refused
whenever L(n) > n, i.e. whenever an honest batch has no dummy at all with
probability at most 10⁻³⁰; at β = 1 that is P[Z = 0] = f(0)^d ≤ 10⁻³⁰. For
SAGeo at ε = 1, δ = 10⁻⁶ (f(0) ≈ 9.1·10⁻⁷) that holds from d = 5 on (at d = 5,
P[Z = 0] = 6.3·10⁻³¹ and L(n) = n + 1; at d = 8, 4.8·10⁻⁴⁹); for every SBin
task (2⁻ᵈᴹ); never for S1Geo, whose dummies are few (f(0) ≈ 0.62). The check
trusts the batch's stated ``n_users``: a batch that understates its users by
L(n) − n passes it. It catches a shuffler that forwards without dummies, not
one that hides it.

How L(n) is computed (:func:`honest_lower_tail`), always as an upper bound on
P[T ≤ k] so that L(n) is never above the true quantile:

* exactly, while the answer is at most :data:`EXACT_LIMIT`: the law of z on
  {0, …, K}, its d-fold convolution by repeated squaring and the convolution
  with Bin(n, β), each truncated at K (a sum of non-negative indices: entries
  up to K are exact), then the cumulative sums. Every quantity is a sum of
  non-negative terms, so its relative rounding error is at most the sum of
  its inputs' plus (K + 2)·u per convolution (u = 2⁻⁵³); the law's entries
  are within the relative error of :meth:`SAGeoLaw.window` (or, for SBin,
  Z ~ Bin(dM, 1/2) directly, from ``lgamma``). The bound multiplies the sum by
  1 + 2·(that total) and adds 10⁻²⁸⁰ for values that underflow;
* by Chernoff's bound beyond it (large d): for every s > 0,
  P[T ≤ k] ≤ exp(s·k + n·ln(1 − β + β·e^{−s}) + d·ln E[e^{−s·z}]), minimized
  over s (every s tried gives a valid bound), compared with half the tail
  to cover the rounding of its logarithms, as
  :mod:`shuffledp.accounting.certificates.message_bounds` does.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.accounting.certificates.augmented import DummyLaw, SAGeoLaw, SBinLaw
from shuffledp.accounting.certificates.message_bounds import MESSAGE_TAIL_PROBABILITY
from shuffledp.accounting.numerics.search import smallest_passing_integer
from shuffledp.service.task import Task, TaskError
from shuffledp.specs import AugmentedSpec

__all__ = [
    "DUMMY_CHECK_TAIL",
    "EXACT_LIMIT",
    "chernoff_log_lower_tail",
    "fewest_honest_messages",
    "honest_lower_tail",
    "task_fewest_messages",
]

#: An honest batch has fewer messages than the check's bound with at most this probability.
DUMMY_CHECK_TAIL = MESSAGE_TAIL_PROBABILITY
#: Largest message count up to which the lower tail is summed exactly (beyond: Chernoff).
EXACT_LIMIT = 4096
_U = 2.0**-53
#: Added to every exact tail for values that underflow (far below any tail asked for).
_UNDERFLOW = 1e-280

Method = Literal["exact", "chernoff"]


def _binomial_lower(trials: int, p: float, top: int) -> tuple[NDArray[np.float64], float]:
    """Bin(trials, p) on {0, …, top} from ``lgamma`` and its relative error bound."""
    k = np.arange(min(top, trials) + 1, dtype=np.float64)
    if p == 1.0:
        out = np.zeros(top + 1)
        if trials <= top:
            out[trials] = 1.0
        return out, 0.0
    log_c = np.array(
        [math.lgamma(trials + 1) - math.lgamma(i + 1) - math.lgamma(trials - i + 1) for i in k]
    )
    log_p, log_q = math.log(p), math.log1p(-p)
    log_pmf = log_c + k * log_p + (trials - k) * log_q
    scale = 3.0 * math.lgamma(trials + 1) + trials * (abs(log_p) + abs(log_q)) + 1.0
    out = np.zeros(top + 1)
    out[: k.size] = np.exp(log_pmf)
    return out, 16.0 * scale * _U


def _law_lower(law: DummyLaw, top: int) -> tuple[NDArray[np.float64], float]:
    """The dummy law on {0, …, top} and its relative error bound (as :meth:`SAGeoLaw.window`)."""
    if isinstance(law, SBinLaw):
        return _binomial_lower(law.trials, 0.5, top)
    if not isinstance(law, SAGeoLaw):
        raise InvalidParameterError(f"law must be a SAGeoLaw or an SBinLaw, got {law!r}")
    log_pmf = law.log_pmf(np.arange(top + 1))
    finite = log_pmf[np.isfinite(log_pmf)]
    exponent = law.nu * -math.log(law.q_left) if law.q_left > 0.0 and law.nu > 0 else 0.0
    scale = float(np.max(np.abs(finite))) + exponent + abs(math.log(law.normalizer))
    return np.exp(log_pmf), (4.0 * scale + 64.0) * _U


def _truncated(a: NDArray[np.float64], b: NDArray[np.float64], top: int) -> NDArray[np.float64]:
    out: NDArray[np.float64] = np.convolve(a, b)[: top + 1]
    return out


def honest_lower_tail(
    law: DummyLaw, domain_size: int, beta: float, n_users: int, top: int
) -> NDArray[np.float64]:
    """Upper bounds on P[T ≤ k] for k = 0, …, ``top``, summed exactly (module docstring).

    T = R + Z: R ~ Bin(``n_users``, β) of the users' messages kept, Z the sum of
    ``domain_size`` i.i.d. dummy counts.
    """
    d = check_int(domain_size, "domain_size", minimum=1)
    n = check_int(n_users, "n_users", minimum=0)
    top = check_int(top, "top", minimum=0)
    if isinstance(law, SBinLaw):  # the sum of d Bin(M, 1/2) is Bin(dM, 1/2)
        z, error = _binomial_lower(d * law.trials, 0.5, top)
    else:  # the d-fold convolution of the law, by repeated squaring
        base, base_error = _law_lower(law, top)
        partial: NDArray[np.float64] | None = None
        error, power = 0.0, d
        while power:
            if power & 1:
                if partial is None:
                    partial, error = base, base_error
                else:
                    partial = _truncated(partial, base, top)
                    error += base_error + (top + 2) * _U
            power >>= 1
            if power:
                base = _truncated(base, base, top)
                base_error = 2.0 * base_error + (top + 2) * _U
        assert partial is not None
        z = partial
    kept, kept_error = _binomial_lower(n, beta, top)
    total = _truncated(kept, z, top)
    error += kept_error + (top + 2) * _U  # the convolution
    error += (top + 1) * _U  # the cumulative sums
    if error > 1e-6:
        raise InvalidParameterError(f"the exact lower tail loses its precision (error {error:g})")
    upper: NDArray[np.float64] = np.cumsum(total) * (1.0 + 2.0 * error) + _UNDERFLOW
    return upper


def _log_mgf_dummies(law: DummyLaw, s: float) -> float:
    """The log-MGF ln E[e^{−s·z}] of one bin's dummy count, at −s < 0."""
    if isinstance(law, SBinLaw):
        return law.trials * (math.log1p(math.exp(-s)) - math.log(2.0))
    log_z = math.log(law.normalizer)
    right = -s * law.nu - math.log1p(-law.q_right * math.exp(-s))
    if law.q_left == 0.0 or law.nu == 0:
        return right - log_z
    k = np.arange(law.nu, dtype=np.float64)
    left = (law.nu - k) * math.log(law.q_left) - s * k
    terms = np.append(left, right)
    peak = float(np.max(terms))
    return peak + math.log(float(np.sum(np.exp(terms - peak)))) - log_z


def chernoff_log_lower_tail(
    law: DummyLaw, domain_size: int, beta: float, n_users: int, count: int
) -> float:
    """Chernoff's bound on ln P[T ≤ ``count``] (module docstring), minimized over s > 0."""

    def exponent(s: float) -> float:
        kept = -s * n_users if beta == 1.0 else n_users * math.log1p(beta * math.expm1(-s))
        return s * count + kept + domain_size * _log_mgf_dummies(law, s)

    grid = np.logspace(-6, 2.5, 240)
    values = [exponent(float(s)) for s in grid]
    best = int(np.argmin(values))
    lo, hi = float(grid[max(0, best - 1)]), float(grid[min(grid.size - 1, best + 1)])
    from scipy.optimize import minimize_scalar

    found = minimize_scalar(exponent, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    return float(min(float(found.fun), values[best], 0.0))


@functools.lru_cache(maxsize=4096)
def fewest_honest_messages(
    law: DummyLaw, domain_size: int, beta: float, n_users: int, tail: float = DUMMY_CHECK_TAIL
) -> tuple[int, Method]:
    """L(n): the largest integer with P[T < L] ≤ ``tail`` for an honest batch of n users.

    Returns L and how it was computed (``"exact"`` up to :data:`EXACT_LIMIT`,
    else ``"chernoff"``). A batch with fewer than L messages is refused.
    """
    if not 0.0 < tail < 1.0:
        raise InvalidParameterError(f"tail must be in (0, 1), got {tail!r}")
    top = 64
    while top <= EXACT_LIMIT:
        upper = honest_lower_tail(law, domain_size, beta, n_users, top)
        above = np.flatnonzero(upper > tail)
        if above.size:  # the first k whose tail bound passes: P[T ≤ L - 1] ≤ tail
            return int(above[0]), "exact"
        top *= 2
    log_target = math.log(tail / 2.0)

    def too_likely(k: int) -> bool:
        return chernoff_log_lower_tail(law, domain_size, beta, n_users, k) > log_target

    return smallest_passing_integer(too_likely, start=0), "chernoff"


def task_fewest_messages(task: Task, n_users: int) -> int:
    """L(``n_users``) for an augmented task (:func:`fewest_honest_messages`).

    Raises:
        TaskError: If the task is not an augmented one.
    """
    spec = task.spec
    if not isinstance(spec, AugmentedSpec):
        raise TaskError(f"a {task.protocol} task has no dummies to check")
    if spec.beta == 1.0:  # T = n + Z: one bound on Z serves every n
        dummies, _ = fewest_honest_messages(spec.dummy_law(), task.domain_size, 1.0, 0)
        return n_users + dummies
    fewest, _ = fewest_honest_messages(spec.dummy_law(), task.domain_size, spec.beta, n_users)
    return fewest
