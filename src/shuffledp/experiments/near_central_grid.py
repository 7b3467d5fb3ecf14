"""The near-central experiment's records: its grid, one measured row, what it compares.

:class:`NearCentralConfig` (the grid), :class:`NearCentralRow` (one (protocol,
n, ε) measurement) and the names of the protocols and central mechanisms, shared
by the runs (:mod:`shuffledp.experiments.near_central`, which re-exports them)
and the figures (:mod:`shuffledp.experiments.near_central_plots`), so that
neither imports the other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["CENTRAL", "PROTOCOLS", "SHUFFLED", "NearCentralConfig", "NearCentralRow"]

SHUFFLED: tuple[str, ...] = ("flip", "krr", "correlated", "augmented")
CENTRAL: tuple[str, ...] = (
    "central_laplace",
    "central_discrete_laplace",
    "central_analytic_gaussian",
)
PROTOCOLS: tuple[str, ...] = SHUFFLED + CENTRAL


@dataclass(frozen=True)
class NearCentralRow:
    """One (protocol, n, ε) measurement (the benchmark's JSON row).

    Attributes:
        protocol: Protocol or central mechanism.
        n: Users.
        epsilon: ε of the target (ε, δ).
        per_bin_std: Measured per-bin standard deviation of the error (counts).
        per_bin_std_se: Its standard error (from the spread over runs).
        analytic_std: The per-bin standard deviation the mechanism's law gives
            (the root mean square over bins for k-RR, whose error varies by bin).
        ratio_to_central_dlap: ``analytic_std`` over the central DLap(ε/2)'s.
        measured_ratio_to_central_dlap: ``per_bin_std`` over the central DLap(ε/2)'s.
        messages_per_user: Messages per user, measured where the message path
            ran, else expected.
        certified_delta: The δ the package certifies at ε (central: the
            mechanism's own δ).
        calibration_seconds: Seconds to calibrate.
        message_path_seconds: Seconds of one message-path run (None for the
            central mechanisms).
        path: Path of the repetitions (``message``, ``count`` or ``central``).
        repetitions: Runs measured.
    """

    protocol: str
    n: int
    epsilon: float
    per_bin_std: float
    per_bin_std_se: float
    analytic_std: float
    ratio_to_central_dlap: float
    measured_ratio_to_central_dlap: float
    messages_per_user: float
    certified_delta: float
    calibration_seconds: float
    message_path_seconds: float | None
    path: str
    repetitions: int

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return asdict(self)


@dataclass(frozen=True)
class NearCentralConfig:
    """The grid of the experiment.

    Attributes:
        sizes: Numbers of users (at ε = ``epsilon``).
        epsilons: ε values (at n = ``sweep_n``).
        epsilon: ε of the sweep over n.
        delta: δ everywhere.
        d: Bins.
        sweep_n: n of the sweep over ε.
        message_path_up_to: The message path runs up to this n; above, the
            count path (the same law).
        repetitions: Runs per row (message path).
        count_repetitions: Runs per row (count path and central mechanisms).
        protocols: Which protocols and central mechanisms.
        seed: The root seed.
    """

    sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    epsilons: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    epsilon: float = 1.0
    delta: float = 1e-6
    d: int = 100
    sweep_n: int = 100_000
    message_path_up_to: int = 100_000
    repetitions: int = 20
    count_repetitions: int = 60
    protocols: tuple[str, ...] = field(default=PROTOCOLS)
    seed: int = 2026

    @classmethod
    def quick(cls, seed: int = 2026) -> NearCentralConfig:
        """A reduced grid: two sizes, three ε, fewer runs (about a minute)."""
        return cls(
            sizes=(10_000, 100_000),
            epsilons=(0.5, 1.0, 2.0),
            sweep_n=10_000,
            message_path_up_to=10_000,
            repetitions=8,
            count_repetitions=20,
            seed=seed,
        )
