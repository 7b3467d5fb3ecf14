"""Baseline "Subexp, local" (segmented paper, §6): PrivSet's subset selection, pure ε-LDP.

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

Every user runs :class:`~shuffledp.baselines.privset.SubsetSelection` at the
liberal level (ε = 2 in the paper, L500) and sends its k-subset to the
analyzer directly. The guarantee is the randomizer's own: for any two sets x,
x′ of s items and any output Z, P[Z | x]/P[Z | x′] ≤ e^ε (PrivSet, INFOCOM
2018; the module docstring of :mod:`shuffledp.baselines.privset`), with
equality for some Z, so (ε, 0) is exact. It does not depend on n.
"""

from __future__ import annotations

from shuffledp._validation import check_epsilon, check_int
from shuffledp.baselines.base import check_shape
from shuffledp.baselines.privset import SubexpMechanism, SubsetSelection, optimal_subset_size
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

__all__ = ["calibrate_subexp_local"]


def calibrate_subexp_local(
    n: int,
    domain_size: int,
    items_per_user: int,
    *,
    epsilon: float = 2.0,
    padding: bool = False,
    subset_size: int | None = None,
) -> SubexpMechanism:
    """Return "Subexp, local" at ε: (ε, 0)-LDP for every user.

    Args:
        n: Number of users (for the error; the guarantee does not depend on it).
        domain_size: d.
        items_per_user: s.
        epsilon: Local ε (default 2, the paper's liberal level).
        padding: Whether sets may hold fewer than s items (PrivSet's s dummies).
        subset_size: k; ``None`` for the variance-optimal one
            (:func:`~shuffledp.baselines.privset.optimal_subset_size`).

    Raises:
        InvalidParameterError: On a bad parameter.
    """
    n = check_int(n, "n", minimum=1)
    d, s = check_shape(domain_size, items_per_user)
    epsilon = check_epsilon(epsilon)
    k = (
        subset_size
        if subset_size is not None
        else optimal_subset_size(d, s, epsilon, padding=padding)
    )
    randomizer = SubsetSelection(d, s, epsilon, k, padding)
    report = PrivacyReport(
        guarantee=ApproxDP(epsilon, 0.0),
        method="privset-ldp",
        bound=BoundKind.EXACT,
        n=n,
        neighbouring="replace-one user's whole set",
        parameters={"subset_size": k, "output_domain": randomizer.output_domain},
        notes=(
            "local model: every output's probability ratio between two sets is at most "
            "e^epsilon (PrivSet, Wang et al., INFOCOM 2018), attained"
        ),
        assumptions=("each row is one user's set of exactly s items (after padding)",),
    )
    return SubexpMechanism("subexp-local", randomizer, n, "local", report)
