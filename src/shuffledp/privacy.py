"""Privacy guarantees and the reports that state how they were obtained."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from shuffledp._validation import check_epsilon, check_int

__all__ = ["ApproxDP", "BoundKind", "PrivacyReport"]


@dataclass(frozen=True)
class ApproxDP:
    """An (ε, δ)-differential-privacy guarantee (Def. II.1 of the FLIP paper).

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
        notes: Free-text remarks (assumptions, the source of a formula).
    """

    guarantee: ApproxDP
    method: str
    bound: BoundKind
    n: int
    neighbouring: str = "replace-one"
    lower_bound_delta: float | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    notes: str = ""

    def __post_init__(self) -> None:
        check_int(self.n, "n", minimum=1)

    @property
    def epsilon(self) -> float:
        """The ε of the guarantee."""
        return self.guarantee.epsilon

    @property
    def delta(self) -> float:
        """The δ of the guarantee."""
        return self.guarantee.delta

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
        }
