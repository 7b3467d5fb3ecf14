"""Privacy guarantees and the reports that state how they were obtained."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from shuffledp._validation import check_epsilon, check_int

__all__ = ["TRUSTED_SHUFFLER", "ApproxDP", "BoundKind", "PrivacyReport"]

#: What every shuffle-model guarantee of a local randomizer rests on: the statement a
#: protocol's report, a command's release and a library run all make, word for word.
TRUSTED_SHUFFLER = "the shuffler is trusted to hide who sent each message and in which order"


@dataclass(frozen=True)
class ApproxDP:
    """An (ε, δ)-differential-privacy guarantee.

    As in Def. II.1 of Cheu & Zhilyaev, "Differentially private histograms in
    the shuffle model from fake users", IEEE S&P 2022, arXiv 2104.02739.

    Attributes:
        epsilon: ε > 0.
        delta: δ in [0, 1).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        if not (0.0 <= float(self.delta) < 1.0):
            raise ValueError(f"delta must be in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "delta", float(self.delta))


class BoundKind(str, enum.Enum):
    """What a reported δ (or ε) is, relative to the mechanism's true value.

    * ``UPPER``: a guarantee that holds for every pair of neighbouring datasets.
    * ``EXACT``: the true value for every dataset (the supremum is attained).
    * ``LOWER``: the exact value for one concrete pair of neighbouring datasets,
      so the mechanism's true δ is at least this.
    * ``REPRODUCTION``: a published formula reproduced as printed; not a
      guarantee and never used to certify privacy.
    """

    UPPER = "upper"
    EXACT = "exact"
    LOWER = "lower"
    REPRODUCTION = "reproduction"


@dataclass(frozen=True)
class PrivacyReport:
    """A privacy statement together with the way it was proven.

    Attributes:
        guarantee: The (ε, δ) the protocol satisfies.
        method: Name of the accountant or bound that produced ``guarantee``.
        bound: What kind of number ``guarantee.delta`` is (see :class:`BoundKind`).
        n: Number of users the guarantee is computed for.
        neighbouring: The neighbouring relation (``"replace-one"``: two datasets
            of the same size that differ in one user's value).
        lower_bound_delta: δ of a concrete worst-case-like pair of neighbouring
            datasets at the same ε, when known; shows how tight ``guarantee`` is.
        parameters: Protocol parameters the guarantee depends on.
        notes: Free-text remarks (how the bound was obtained, the source of a formula).
        assumptions: What the guarantee takes for granted about the input, e.g.
            that each row is one user, or that the shuffler is trusted.
        not_covered: What the release shows that the guarantee does NOT cover
            (e.g. a domain derived from the data); empty when everything is covered.
    """

    guarantee: ApproxDP
    method: str
    bound: BoundKind
    n: int
    neighbouring: str = "replace-one"
    lower_bound_delta: float | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    assumptions: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_int(self.n, "n", minimum=1)
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        object.__setattr__(self, "not_covered", tuple(self.not_covered))

    @property
    def covers_release(self) -> bool:
        """Whether everything the release shows is covered by the guarantee."""
        return not self.not_covered

    def with_context(
        self, *, assumptions: Sequence[str] = (), not_covered: Sequence[str] = ()
    ) -> PrivacyReport:
        """Return a copy with more assumptions and uncovered items appended (each once)."""
        return replace(
            self,
            assumptions=tuple(dict.fromkeys((*self.assumptions, *assumptions))),
            not_covered=tuple(dict.fromkeys((*self.not_covered, *not_covered))),
        )

    @property
    def epsilon(self) -> float:
        """The ε of the guarantee."""
        return self.guarantee.epsilon

    @property
    def delta(self) -> float:
        """The δ of the guarantee."""
        return self.guarantee.delta

    def compose(
        self,
        *others: PrivacyReport,
        delta: float | None = None,
        epsilon: float | None = None,
        same_users: bool = False,
    ) -> PrivacyReport:
        """Deprecated: use :func:`shuffledp.compose` (``shuffledp.compose(report, *others)``).

        The guarantee types do not depend on the accountant; this method only
        forwards to the package's one composition entry point and will be
        removed in 0.4.
        """
        import warnings

        import shuffledp

        warnings.warn(
            "PrivacyReport.compose is deprecated and will be removed in shuffledp 0.4; "
            "use shuffledp.compose(report, *others)",
            DeprecationWarning,
            stacklevel=2,
        )
        return shuffledp.compose(self, *others, delta=delta, epsilon=epsilon, same_users=same_users)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "method": self.method,
            "bound": self.bound.value,
            "n": self.n,
            "neighbouring": self.neighbouring,
            "lower_bound_delta": self.lower_bound_delta,
            "parameters": dict(self.parameters),
            "notes": self.notes,
            "assumptions": list(self.assumptions),
            "not_covered": list(self.not_covered),
            "covers_release": self.covers_release,
        }
