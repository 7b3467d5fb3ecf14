"""What the segmented experiment runs: §6's settings and grids, and its configuration.

The paper's levels and level shares, the blanket-rate grids (the full one,
the low rates real data add, the ``--quick`` ones), our protocol's two
accountings and the baselines with what the experiment uses of them
(``_Baseline``), and :class:`SegmentedExperimentConfig` with :func:`check_grid`.

Imports nothing else of this package (every other module may import it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.baselines.base import ExecutionPath, SetFrequencyEstimate
from shuffledp.privacy import PrivacyReport


class _Baseline(Protocol):
    """What the experiment uses of a calibrated baseline.

    (:class:`shuffledp.baselines.base.SetFrequencyMechanism` declares ``name``
    as a settable attribute, which the frozen dataclasses of the baselines do
    not satisfy for mypy; this protocol asks only for what is used here.)
    """

    def run(
        self,
        user_items: Any,
        *,
        user_levels: Any = None,
        seed: Any = None,
        path: ExecutionPath = "message",
    ) -> SetFrequencyEstimate: ...

    def expected_error(
        self, frequencies: Any = None, *, include_sampling: bool = False
    ) -> float: ...

    def privacy_reports(self) -> tuple[PrivacyReport, ...]: ...


#: Data sources of :class:`SegmentedExperimentConfig`.
DATA_SOURCES: tuple[str, ...] = ("synthetic", "movies", "pizza")
#: The level ε of §6 (L490).
PAPER_LEVELS: tuple[float, ...] = (0.5, 1.0, 2.0)
#: The level shares of §6 (L492–494).
SHARE_SETTINGS: dict[str, tuple[float, ...]] = {
    "S1": (0.25, 0.50, 0.25),
    "S2": (0.50, 0.25, 0.25),
    "S3": (0.25, 0.25, 0.50),
}
#: Blanket rates: log-spaced over the paper's [0.1, 10] (L522), with each of 1–4 flanked by
#: a point just below and one just above (the exact δ jumps at integer m, where γ = 1 and
#: the total message count shows whether the victim sent anything).
BLANKET_GRID: tuple[float, ...] = (
    0.1,
    0.15,
    0.22,
    0.33,
    0.5,
    0.7,
    0.97,
    1.0,
    1.01,
    1.45,
    1.97,
    2.0,
    2.01,
    2.97,
    3.0,
    3.01,
    3.97,
    4.0,
    4.01,
    5.5,
    7.5,
    10.0,
)
#: Extra rates below 0.1 for the real data (small d: the best m is smaller than the paper's range).
LOW_GRID: tuple[float, ...] = (0.01, 0.015, 0.022, 0.033, 0.05, 0.07)
#: The ``--quick`` grid (synthetic data).
QUICK_GRID: tuple[float, ...] = (0.33, 0.97, 1.01, 2.01, 4.0, 4.01)
#: The ``--quick`` grid (real data).
QUICK_LOW_GRID: tuple[float, ...] = (0.022, 0.05, 0.1, 0.33, 1.0, 1.01)
#: How our protocol's λ_k are chosen.
ACCOUNTINGS: tuple[str, ...] = ("exact", "paper")
#: The baselines of §6 (L498–508), in the paper's order.
BASELINES: tuple[str, ...] = (
    "subexp-local",
    "subexp-shuffle",
    "mm-shuffle",
    "sepmm",
    "weighted-sepmm",
)

#: Our protocol's mechanism name in the rows.
OURS = "segmented"


@dataclass(frozen=True)
class SegmentedExperimentConfig:
    """What to run.

    Attributes:
        data: ``"synthetic"``, ``"movies"`` or ``"pizza"``.
        ns: Numbers of users.
        items_per_user: Values of s.
        shares: Share settings (keys of :data:`SHARE_SETTINGS`).
        blanket_grid: Blanket rates m of our protocol.
        levels: E_1 < … < E_K.
        synthetic_domain: d of the synthetic data.
        repetitions: Runs per setting (independent seeds).
        seed: Root of every :class:`numpy.random.SeedSequence`.
        dummy_setting: (n, s, shares) where the ``dummy`` variant also runs
            (exact accounting), or ``None``.
        blanket_gap: Compute, per (n, s, E_k), the smallest m certifying λ = 1
            against the smallest m a whole-set lower bound allows.
        workers: Processes for the calibrations (default: up to 2, one per core).
        quick: Whether this is the reduced ``--quick`` grid (recorded only).
    """

    data: str = "synthetic"
    ns: tuple[int, ...] = (5_000, 50_000)
    items_per_user: tuple[int, ...] = (4, 8)
    shares: tuple[str, ...] = ("S1", "S2", "S3")
    blanket_grid: tuple[float, ...] = BLANKET_GRID
    levels: tuple[float, ...] = PAPER_LEVELS
    synthetic_domain: int = 128
    repetitions: int = 50
    seed: int = 2024
    dummy_setting: tuple[int, int, str] | None = (5_000, 4, "S1")
    blanket_gap: bool = True
    workers: int | None = None
    quick: bool = False

    @classmethod
    def for_data(
        cls,
        data: str = "synthetic",
        *,
        quick: bool = False,
        seed: int = 2024,
        repetitions: int | None = None,
        blanket_grid: Sequence[float] | None = None,
        workers: int | None = None,
    ) -> SegmentedExperimentConfig:
        """The paper's grid for ``data`` (the package docstring), or its ``--quick`` reduction.

        Real data add :data:`LOW_GRID` below the paper's range (their d is
        small, and so is the best m). ``--quick``: the first n and s only, S1,
        :data:`QUICK_GRID` (:data:`QUICK_LOW_GRID` for real data), 5
        repetitions and no blanket-gap search.

        Raises:
            InvalidParameterError: On an unknown data source, a bad grid or repetitions.
        """
        if data not in DATA_SOURCES:
            raise InvalidParameterError(
                f"data must be one of {', '.join(DATA_SOURCES)}, got {data!r}"
            )
        ns, items = {
            "synthetic": ((5_000, 50_000), (4, 8)),
            "movies": ((5_000, 50_000), (2,)),
            "pizza": ((5_000, 21_350), (4,)),
        }[data]
        synthetic = data == "synthetic"
        config = cls(
            data=data,
            ns=ns,
            items_per_user=items,
            blanket_grid=BLANKET_GRID if synthetic else LOW_GRID + BLANKET_GRID,
            seed=seed,
            dummy_setting=(ns[0], items[0], "S1"),
        )
        if quick:
            config = replace(
                config,
                ns=ns[:1],
                items_per_user=items[:1],
                shares=("S1",),
                blanket_grid=QUICK_GRID if synthetic else QUICK_LOW_GRID,
                repetitions=5,
                blanket_gap=False,
                quick=True,
            )
        if repetitions is not None:
            config = replace(config, repetitions=check_int(repetitions, "repetitions", minimum=1))
        if blanket_grid is not None:
            config = replace(config, blanket_grid=check_grid(blanket_grid))
        if workers is not None:
            config = replace(config, workers=check_int(workers, "workers", minimum=1))
        return config

    def check(self) -> None:
        """Raise :class:`InvalidParameterError` on an inconsistent configuration."""
        if self.data not in DATA_SOURCES:
            raise InvalidParameterError(
                f"data must be one of {', '.join(DATA_SOURCES)}, got {self.data!r}"
            )
        check_int(self.repetitions, "repetitions", minimum=1)
        check_grid(self.blanket_grid)
        unknown = [s for s in self.shares if s not in SHARE_SETTINGS]
        if unknown or not self.shares:
            raise InvalidParameterError(
                f"shares must name some of {', '.join(SHARE_SETTINGS)}, got {list(self.shares)}"
            )
        if any(len(SHARE_SETTINGS[s]) != len(self.levels) for s in self.shares):
            raise InvalidParameterError("every share setting needs one share per level")
        if not self.ns or not self.items_per_user:
            raise InvalidParameterError("ns and items_per_user must not be empty")
        for n in self.ns:
            check_int(n, "n", minimum=len(self.levels))
        for s in self.items_per_user:
            check_int(s, "items_per_user", minimum=1)


def check_grid(grid: Iterable[float]) -> tuple[float, ...]:
    """Return the blanket grid sorted and deduplicated after checking every m is finite and > 0.

    Raises:
        InvalidParameterError: On an empty grid or a value that is not a finite number > 0.
    """
    values: list[float] = []
    for value in grid:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidParameterError(f"blanket rates must be numbers, got {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise InvalidParameterError(f"blanket rates must be finite numbers > 0, got {value!r}")
        values.append(float(value))
    if not values:
        raise InvalidParameterError("the blanket grid is empty")
    return tuple(sorted(set(values)))
