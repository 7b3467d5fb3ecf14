"""Baseline "Subexp, shuffle" (segmented paper, §6): PrivSet's randomizer, one shuffled message.

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

Every user sends one k-subset from :class:`~shuffledp.baselines.privset.SubsetSelection`
at a local ε₀ through a uniform shuffle; all users get the strictest level
(ε = 0.5, δ = 0.01/n in the paper, L502). The randomizer is ε₀-LDP with
respect to the user's whole set, so any amplification bound for ε₀-LDP
randomizers applies: ε₀ is the largest that the generic variation-ratio bound
certifies (Wang et al., VLDB 2024, with p = q = e^{ε₀}, β = tanh(ε₀/2):
method ``vr2024`` of :func:`shuffledp.accounting.calibrate`,
``mechanism="generic"``). Mechanism-specific variation-ratio parameters are
not used: this package's checks contradict that reduction (DESIGN.md).
"""

from __future__ import annotations

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.accounting import calibrate
from shuffledp.accounting import delta as generic_delta
from shuffledp.baselines.base import check_shape, default_delta
from shuffledp.baselines.privset import SubexpMechanism, SubsetSelection, optimal_subset_size
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

__all__ = ["calibrate_subexp_shuffle"]

#: The generic accountant's method: the tightest certified upper bound for ε₀-LDP randomizers.
GENERIC_METHOD = "vr2024"


def calibrate_subexp_shuffle(
    n: int,
    domain_size: int,
    items_per_user: int,
    *,
    epsilon: float = 0.5,
    delta: float | None = None,
    padding: bool = False,
    subset_size: int | None = None,
) -> SubexpMechanism:
    """Return "Subexp, shuffle" certified (ε, δ)-DP for every user after the shuffle.

    Args:
        n: Number of users (exactly these many must run it).
        domain_size: d.
        items_per_user: s.
        epsilon: Central ε (default 0.5).
        delta: Target δ (default 0.01/n).
        padding: Whether sets may hold fewer than s items.
        subset_size: k; ``None`` for the variance-optimal one at ε₀.

    Raises:
        InvalidParameterError: On a bad parameter, or when no ε₀ > 0 is certified.
    """
    n = check_int(n, "n", minimum=1)
    d, s = check_shape(domain_size, items_per_user)
    epsilon = check_epsilon(epsilon)
    target = check_delta(default_delta(n) if delta is None else delta)
    local = calibrate(epsilon, target, n=n, mechanism="generic", method=GENERIC_METHOD)
    eps0 = local.value
    # The certificate at the calibrated ε₀, evaluated in full (no target to stop early);
    # both numbers are certified upper bounds, the smaller is reported.
    full = generic_delta(epsilon, n=n, mechanism="generic", method=GENERIC_METHOD, epsilon0=eps0)
    candidates = [r.delta for r in (local.result, full) if r.certified and r.delta is not None]
    certified = min(candidates) if candidates else float("inf")
    if not certified <= target:  # pragma: no cover - calibrate returns a passing ε₀
        raise InvalidParameterError(f"epsilon0={eps0:g} is not certified for delta={target:g}")
    k = subset_size if subset_size is not None else optimal_subset_size(d, s, eps0, padding=padding)
    randomizer = SubsetSelection(d, s, eps0, k, padding)
    report = PrivacyReport(
        guarantee=ApproxDP(epsilon, certified),
        method=GENERIC_METHOD,
        bound=BoundKind.UPPER,
        n=n,
        neighbouring="replace-one user's whole set",
        parameters={
            "epsilon0": eps0,
            "target_delta": target,
            "subset_size": k,
            "output_domain": randomizer.output_domain,
        },
        notes=(
            "generic amplification of an epsilon0-LDP randomizer (variation-ratio reduction, "
            "Wang et al., VLDB 2024, p = q = e^epsilon0, beta = tanh(epsilon0/2)); the "
            "subset-selection randomizer is epsilon0-LDP (PrivSet, INFOCOM 2018)"
        ),
        assumptions=(
            "each row is one user's set of exactly s items (after padding)",
            "a trusted uniform shuffler; exactly n users take part",
        ),
    )
    return SubexpMechanism("subexp-shuffle", randomizer, n, "shuffle", report)
