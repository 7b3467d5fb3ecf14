"""The segmented protocol's parameters: λ per level and the blanket rate (Alg. 1 step 2, §5.2).

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in
the multi-message shuffle model", arXiv 2407.19639. For given privacy levels
:func:`optimize_parameters` picks the blanket rate m whose per-level λ, each
the largest the exact certificate allows
(:func:`shuffledp.accounting.certificates.segmented.calibrate_level`),
minimises §5.2's error bound, and states per level the certified δ, a lower
bound from a concrete dataset pair and, for comparison, what Eq. 7 would
have chosen (:mod:`shuffledp.accounting.reproductions.segmented_eq7`).

Group: the questions users ask (with :mod:`~shuffledp.accounting.api` and
:mod:`~shuffledp.accounting.calibration`); may import every other group.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.accounting.certificates.segmented import (
    Variant,
    blanket_tries,
    calibrate_level,
    check_variant,
    error_bound,
    group_delta,
    item_delta,
    level_delta,
    level_lower_bound,
)
from shuffledp.accounting.reproductions.segmented_eq7 import paper_report_probability

__all__ = [
    "DEFAULT_BLANKET_GRID",
    "LevelGuarantee",
    "SegmentedParameters",
    "calibrate_levels_along",
    "optimize_parameters",
]


@dataclass(frozen=True)
class LevelGuarantee:
    """One level's parameters and what they certify.

    Attributes:
        epsilon: E_k, the level's ε.
        users: n_k.
        share: n_k/n.
        report_probability: λ_k.
        delta: The certified δ at E_k for this level's users (at most the target).
        lower_bound_delta: δ of a concrete dataset pair (:func:`level_lower_bound`), or
            ``None`` when none is available (a level without users, or a domain too
            small for the construction).
        item_epsilon: ε′ = E_k/s of one slot.
        item_delta: The certified δ′ of one slot at ε′.
        paper_report_probability: λ that Eq. 7 with Lemma 3 would choose (a reproduction).
        paper_delta: The certified δ at E_k of that λ (how far Eq. 7 is from the truth).
    """

    epsilon: float
    users: int
    share: float
    report_probability: float
    delta: float
    lower_bound_delta: float | None
    item_epsilon: float
    item_delta: float
    paper_report_probability: float
    paper_delta: float

    def to_dict(self) -> dict[str, float | int | None]:
        """Return a JSON-serialisable dictionary."""
        return {
            "epsilon": self.epsilon,
            "users": self.users,
            "share": self.share,
            "lambda": self.report_probability,
            "delta": self.delta,
            "lower_bound_delta": self.lower_bound_delta,
            "item_epsilon": self.item_epsilon,
            "item_delta": self.item_delta,
            "paper_lambda": self.paper_report_probability,
            "paper_lambda_certified_delta": self.paper_delta,
        }


@dataclass(frozen=True)
class SegmentedParameters:
    """The protocol's parameters for given levels, and their guarantees.

    Attributes:
        n: Number of users.
        domain_size: d, the items of the public domain.
        message_domain: d′ = d plus one padding symbol when padding is on.
        items_per_user: s.
        delta: Target δ (every level).
        variant: ``"paper"`` or ``"dummy"``.
        blanket_rate: m, expected blanket messages per user.
        levels: One :class:`LevelGuarantee` per level, in level order.
        error_bound: §5.2's bound on Σ_j E(ŵ_j − w_j)².
        messages_per_user: Expected messages per user (blanket and data).
    """

    n: int
    domain_size: int
    message_domain: int
    items_per_user: int
    delta: float
    variant: str
    blanket_rate: float
    levels: tuple[LevelGuarantee, ...]
    error_bound: float
    messages_per_user: float

    @property
    def report_probabilities(self) -> tuple[float, ...]:
        """λ_k per level."""
        return tuple(level.report_probability for level in self.levels)

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-serialisable dictionary."""
        return {
            "n": self.n,
            "domain_size": self.domain_size,
            "message_domain": self.message_domain,
            "items_per_user": self.items_per_user,
            "delta": self.delta,
            "variant": self.variant,
            "blanket_rate": self.blanket_rate,
            "error_bound": self.error_bound,
            "messages_per_user": self.messages_per_user,
            "levels": [level.to_dict() for level in self.levels],
        }

    def __call__(self) -> dict[str, Any]:
        """Return :meth:`to_dict`: ``SegmentedProtocol.parameters()`` under the protocol contract.

        ``SegmentedProtocol.parameters`` is this object, and every
        :class:`~shuffledp.protocols.base.ShuffleProtocol` answers
        ``parameters()`` with its parameters for reports.
        """
        return dict(self.to_dict())


def _split(grid: tuple[float, ...], workers: int) -> list[tuple[float, ...]]:
    """Contiguous parts of the grid, one per worker (neighbours warm-start each other)."""
    parts = max(1, min(workers, len(grid) // 4))
    size = math.ceil(len(grid) / parts)
    return [grid[i : i + size] for i in range(0, len(grid), size)]


#: Relative precision of λ while the grid is searched; the chosen m is then refined to 1e-3.
_SEARCH_RTOL = 1e-2


def calibrate_levels_along(
    rates: Iterable[float],
    epsilons: Sequence[float],
    delta: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    variant: Variant,
    rtol: float = 1e-3,
) -> Iterator[tuple[float, tuple[float, ...]]]:
    """Yield (m, λ per level) for consecutive blanket rates m, each level warm-started.

    :func:`~shuffledp.accounting.certificates.segmented.calibrate_level` for every
    level at every rate, starting each search from the level's λ at the previous
    rate (neighbouring rates have nearby λ, so rates in order save most of the
    work). A λ of 0 (nothing certifies) starts the next search afresh.
    """
    previous: list[float | None] = [None] * len(epsilons)
    for m in rates:
        lams: list[float] = []
        for k, eps in enumerate(epsilons):
            lam = calibrate_level(
                eps,
                delta,
                message_domain=message_domain,
                items=items,
                n=n,
                blanket_rate=m,
                variant=variant,
                start=previous[k],
                rtol=rtol,
            )
            lams.append(lam)
            previous[k] = lam if lam > 0 else None
        yield m, tuple(lams)


def _grid_points(
    job: tuple[
        tuple[float, ...], tuple[float, ...], tuple[int, ...], float, int, int, Variant, float
    ],
) -> list[tuple[float, float, tuple[float, ...]]]:
    """(m, error bound, λ per level) for each blanket rate of one part of the grid."""
    rates, epsilons, counts, delta, d_msg, s, variant, rtol = job
    levels = calibrate_levels_along(
        rates,
        epsilons,
        delta,
        message_domain=d_msg,
        items=s,
        n=sum(counts),
        variant=variant,
        rtol=rtol,
    )
    return [(m, error_bound(m, lams, counts, items=s, variant=variant), lams) for m, lams in levels]


#: Blanket rates searched when none is given (20 points over the paper's range 0.1–10):
#: log-spaced below 1, and above 1 mostly just above an integer. At an integer rate with
#: γ = 1 the total message count shows whether the victim sent anything and the certified
#: λ collapses, while the best rate often sits just above an integer.
DEFAULT_BLANKET_GRID: tuple[float, ...] = (
    *(float(x) for x in np.round(np.geomspace(0.1, 0.9, 10), 4)),
    *(1.02, 1.5, 2.02, 2.5, 3.02, 4.02, 5.02, 6.5, 8.02, 10.02),
)


def optimize_parameters(
    levels: tuple[float, ...] | list[float],
    level_counts: tuple[int, ...] | list[int],
    delta: float,
    *,
    domain_size: int,
    items_per_user: int,
    padding: bool = False,
    variant: Variant = "paper",
    blanket_rate: float | None = None,
    blanket_grid: tuple[float, ...] | list[float] | None = None,
    with_paper: bool = True,
    workers: int | None = None,
) -> SegmentedParameters:
    """Alg. 1 step 2 (§5.2): λ_k per level and the blanket rate m minimizing the error bound.

    Each λ_k is the largest the exact accountant certifies for (E_k, δ) at
    that m (:func:`calibrate_level`). With ``blanket_rate`` given, m is fixed;
    otherwise every m of the grid is evaluated (δ is not monotone in m: it
    jumps where ⌈m⌉ does) and the one with the smallest bound is kept.

    Args:
        levels: E_1 < … < E_K.
        level_counts: n_k per level (exact or estimated), all ≥ 0.
        delta: Target δ of every level.
        domain_size: d.
        items_per_user: s.
        padding: Whether the message domain includes the padding symbol.
        variant: ``"paper"`` or ``"dummy"``.
        blanket_rate: A fixed m, or ``None`` to search ``blanket_grid``.
        blanket_grid: Rates to search (default: :data:`DEFAULT_BLANKET_GRID`, 20 rates from
            0.1 to 10).
        with_paper: Also compute what Eq. 7 would choose (for reports).
        workers: Processes that share the grid (default: one per core; 1 runs
            in this process).

    Raises:
        InvalidParameterError: On bad levels or counts, or when no λ > 0 is
            certified for some level at every m searched.
    """
    epsilons = tuple(check_epsilon(e, "level epsilon") for e in levels)
    if not epsilons:
        raise InvalidParameterError("levels must name at least one epsilon")
    if any(b <= a for a, b in itertools.pairwise(epsilons)):
        raise InvalidParameterError(f"levels must be strictly increasing, got {list(levels)}")
    counts = tuple(check_int(c, "level count", minimum=0) for c in level_counts)
    if len(counts) != len(epsilons):
        raise InvalidParameterError(
            f"level_counts has {len(counts)} entries for {len(epsilons)} levels"
        )
    n = sum(counts)
    if n < 1:
        raise InvalidParameterError("level_counts must sum to at least one user")
    delta = check_delta(delta)
    d = check_int(domain_size, "domain_size", minimum=2)
    s = check_int(items_per_user, "items_per_user", minimum=1)
    variant = check_variant(variant)
    d_msg = d + (1 if padding else 0)
    grid = (
        (blanket_rate,)
        if blanket_rate is not None
        else tuple(blanket_grid if blanket_grid is not None else DEFAULT_BLANKET_GRID)
    )
    chunks = _split(grid, workers if workers is not None else (os.cpu_count() or 1))
    # Search the grid with λ to 1%, then refine the chosen m's λ to 0.1% (every λ is
    # certified either way; only the choice of m uses the coarser values).
    search_rtol = _SEARCH_RTOL if len(grid) > 1 else 1e-3
    jobs = [(chunk, epsilons, counts, delta, d_msg, s, variant, search_rtol) for chunk in chunks]
    if len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=len(jobs)) as pool:
            results = [point for part in pool.map(_grid_points, jobs) for point in part]
    else:
        results = _grid_points(jobs[0])
    best: tuple[float, float, tuple[float, ...]] | None = None
    for m_point, bound_point, lams_point in results:
        if best is None or bound_point < best[1]:
            best = (m_point, bound_point, lams_point)
    assert best is not None
    m, bound, lams = best
    if not math.isfinite(bound) or any(lam <= 0 for lam, c in zip(lams, counts, strict=True) if c):
        raise InvalidParameterError(
            f"no report probability is certified for every level at delta={delta:g} "
            f"with blanket rates {list(grid)}; raise the blanket rate or delta"
        )
    if search_rtol > 1e-3:
        lams = tuple(
            calibrate_level(
                eps,
                delta,
                message_domain=d_msg,
                items=s,
                n=n,
                blanket_rate=m,
                variant=variant,
                start=lam,
                failing=min(1.0, lam * (1.0 + search_rtol)),
            )
            if 0.0 < lam < 1.0
            else lam
            for eps, lam in zip(epsilons, lams, strict=True)
        )
        bound = error_bound(m, lams, counts, items=s, variant=variant)
    potential, gamma = blanket_tries(n, m)
    out = []
    for level_index, (eps, count, lam) in enumerate(zip(epsilons, counts, lams, strict=True)):
        item_eps = eps / s
        # The certificate as reported (no target): what calibrate_level settled on.
        per_item = item_delta(
            item_eps,
            lam,
            message_domain=d_msg,
            potential_blanket=potential,
            blanket_probability=gamma,
            variant=variant,
        )
        certified = group_delta(per_item, item_eps, s)
        # The pair: one user of this level changes its set, the others keep their levels
        # (none when the level has no user).
        lower = (
            level_lower_bound(
                eps,
                lam,
                message_domain=d_msg,
                items=s,
                n=n,
                blanket_rate=m,
                variant=variant,
                padding=padding,
                others=[
                    (other_lam, other - (1 if k == level_index else 0))
                    for k, (other_lam, other) in enumerate(zip(lams, counts, strict=True))
                ],
            )
            if count
            else None
        )
        paper_lam = (
            paper_report_probability(eps, delta, message_domain=d_msg, items=s, n=n, blanket_rate=m)
            if with_paper
            else math.nan
        )
        paper_delta = (
            level_delta(
                eps, paper_lam, message_domain=d_msg, items=s, n=n, blanket_rate=m, variant=variant
            )
            if with_paper and paper_lam > 0
            else math.nan
        )
        out.append(
            LevelGuarantee(
                epsilon=eps,
                users=count,
                share=count / n,
                report_probability=lam,
                delta=certified,
                lower_bound_delta=lower,
                item_epsilon=item_eps,
                item_delta=per_item,
                paper_report_probability=paper_lam,
                paper_delta=paper_delta,
            )
        )
    lam_total = sum(c * lam for c, lam in zip(counts, lams, strict=True))
    data_messages = s * lam_total / n if variant == "paper" else float(s)
    return SegmentedParameters(
        n=n,
        domain_size=d,
        message_domain=d_msg,
        items_per_user=s,
        delta=delta,
        variant=variant,
        blanket_rate=m,
        levels=tuple(out),
        error_bound=bound,
        messages_per_user=m + data_messages,
    )
