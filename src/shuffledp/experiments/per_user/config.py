"""What the per-user experiment runs: data sets, releases, constants and its configuration.

:data:`DATA_SETS` (``--data``), the releases of the ε₁ sweep (``SWEEP_RELEASES``),
of the baselines (:data:`BASELINES`, with the copy each releases) and of Thm 1's
attack (``ATTACK_RELEASES``), the groupings of the ε′ part (``GROUPINGS``),
:data:`PAPER_MAX_GROUP`, the sweep's ε₁ fractions, :class:`PerUserExperimentConfig`
and ``_rng``, the independent stream of (seed, tags) every part draws from.

Imports nothing else of this package (every other module may import it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.protocols.per_user import Release
from shuffledp.randomizers.laplace import Neighbouring, check_c, check_neighbouring

#: Data sets of ``--data``.
DATA_SETS: tuple[str, ...] = ("synthetic", "movielens")
#: The sweep compares these two releases (the package docstring, part 1).
SWEEP_RELEASES: tuple[Release, ...] = ("t", "r")
#: Baselines of part 2: (release, copy released by the baselines).
BASELINES: tuple[tuple[Release, str], ...] = (
    ("t", "t"),
    ("r", "r"),
    ("laplace-ldp", "t"),
    ("laplace-ldp", "r"),
    ("laplace-full", "z"),
    ("uniform-shuffle", "t"),
    ("oracle", "t"),
)
#: Releases attacked in part 4.
ATTACK_RELEASES: tuple[Release, ...] = ("single", "t")
#: Largest group given to paper_per_user_epsilon, which builds |G|² × d arrays (~1 GB at d = 20).
PAPER_MAX_GROUP = 2500
#: Groupings of part 3: the run's k-means groups, and the true clusters (synthetic only).
GROUPINGS = ("k-means", "true clusters")

_SWEEP_FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
_QUICK_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.6, 0.8)


@dataclass(frozen=True)
class PerUserExperimentConfig:
    """What to run (defaults: the full synthetic experiment).

    The synthetic defaults were chosen so that, at ε = 4 and c = 0.1, k-means on
    W recovers the clusters for the middle of the ε₁ range and not at its low
    end (measured, n = 20,000: ARI of the groups against the clusters ≈ 0.14
    at ε₁ = 0.4, 0.88 at 1.2, ≥ 0.97 from 2.0 on): ten centres at least
    1.5 apart in L1 (of at most 2), users' distributions 0.2 from their
    centre in expected L1 (about 0.35 once the ~50 counts are sampled).

    Attributes:
        data: ``"synthetic"`` or ``"movielens"``.
        n: Synthetic users (MovieLens has its own 671).
        d: Synthetic classes (MovieLens: 20 genres).
        clusters: K: the generator's clusters and the shuffler's k-means G.
        separation: Synthetic minimum L1 distance between cluster centres (Thm 4's c·R).
        radius: Synthetic expected L1 distance of a user's distribution from its centre.
        total: Mean per-user total (1 + Poisson(total − 1)).
        centre_concentration: Dirichlet concentration of the centre proposals.
        epsilon: ε, the total per-user budget.
        c: Def. 1's c of parts 1, 2, 4 and 5.
        c_sweep: The c values of part 3 (ε′ depends strongly on c: ε₀ = ε₂(1 + ρ/Δ), Δ = 2c).
        delta: δ of ε′ and of Thm 3–4's log(n/δ).
        fractions: ε₁/ε values of the sweep, each in (0, 1).
        repetitions: Runs per setting (independent noise, k-means and shuffle seeds).
        top_k: k of the top-k precision.
        epsilon_prime_users: Size of the fixed random sample of users for ε′ (part 3).
        paper_users: Users of that sample (its first ones) given the paper's App. C number.
        thm3_users: Size of the fixed random sample of users for Thm 3 (part 5).
        separation_users: Users whose data-level R_i (Thm 4) is computed.
        n_init: k-means restarts of the shuffler.
        neighbouring: The reading of Def. 1 every release is calibrated for:
            ``"moved-items"`` (Laplace scale 2c/ε, the default) or ``"l1-distance"`` (c/ε).
        workers: Processes for the ε′ computations (one job per c and grouping).
        seed: Root seed: data, noise, k-means, shuffles and samples derive from it.
        quick: Whether this is the reduced ``--quick`` configuration (recorded only).
    """

    data: str = "synthetic"
    n: int = 20_000
    d: int = 20
    clusters: int = 10
    separation: float = 1.5
    radius: float = 0.2
    total: int = 50
    centre_concentration: float = 0.3
    epsilon: float = 4.0
    c: float = 0.1
    c_sweep: tuple[float, ...] = (0.1, 0.5, 1.0)
    delta: float = 1e-6
    fractions: tuple[float, ...] = _SWEEP_FRACTIONS
    repetitions: int = 5
    top_k: int = 3
    epsilon_prime_users: int = 2000
    paper_users: int = 3
    thm3_users: int = 2000
    separation_users: int = 500
    n_init: int = 3
    neighbouring: Neighbouring = "moved-items"
    workers: int = 2
    seed: int = 2024
    quick: bool = False

    def __post_init__(self) -> None:
        if self.data not in DATA_SETS:
            raise InvalidParameterError(
                f"data must be one of {', '.join(DATA_SETS)}, got {self.data!r}"
            )
        check_int(self.n, "n", minimum=2)
        check_int(self.d, "d", minimum=2)
        check_int(self.clusters, "clusters", minimum=1)
        check_int(self.total, "total", minimum=1)
        check_epsilon(self.epsilon)
        check_c(self.c)
        if not self.c_sweep:
            raise InvalidParameterError("c_sweep must not be empty")
        for value in self.c_sweep:
            check_c(value, "c_sweep")
        check_delta(self.delta)
        if not self.fractions or any(not (0.0 < f < 1.0) for f in self.fractions):
            raise InvalidParameterError(
                f"fractions must be numbers in (0, 1) (epsilon1 / epsilon), got {self.fractions!r}"
            )
        check_int(self.repetitions, "repetitions", minimum=1)
        check_int(self.top_k, "top_k", minimum=1, maximum=self.d)
        check_int(self.epsilon_prime_users, "epsilon_prime_users", minimum=1)
        check_int(self.paper_users, "paper_users", minimum=0)
        check_int(self.thm3_users, "thm3_users", minimum=1)
        check_int(self.separation_users, "separation_users", minimum=1)
        check_int(self.n_init, "n_init", minimum=1)
        check_int(self.workers, "workers", minimum=1)
        check_int(self.seed, "seed", minimum=0)
        check_neighbouring(self.neighbouring)

    @classmethod
    def for_data(
        cls,
        data: str,
        *,
        quick: bool = False,
        seed: int = 2024,
        repetitions: int | None = None,
        workers: int | None = None,
    ) -> PerUserExperimentConfig:
        """The configuration of ``--data DATA`` with or without ``--quick``.

        Synthetic: n = 20,000 (quick 2,000), d = 20, K = 10, 5 repetitions
        (quick 2). MovieLens: its 671 users, K = 6, 5 repetitions (quick 2).
        Quick runs use 6 ε₁ fractions and smaller samples for ε′ and Thm 3.
        """
        if data not in DATA_SETS:
            raise InvalidParameterError(f"data must be one of {', '.join(DATA_SETS)}, got {data!r}")
        options: dict[str, Any] = {"data": data, "seed": seed, "quick": quick}
        if data == "movielens":
            options.update(clusters=6, epsilon_prime_users=671, thm3_users=671)
            options.update(separation_users=671, paper_users=5)
        if quick:
            options.update(
                n=2_000,
                repetitions=2,
                fractions=_QUICK_FRACTIONS,
                epsilon_prime_users=16,
                paper_users=4,
                thm3_users=2_000 if data == "synthetic" else 671,
                separation_users=300,
            )
        if repetitions is not None:
            options["repetitions"] = repetitions
        if workers is not None:
            options["workers"] = workers
        return cls(**options)


def _rng(seed: int, *tags: int) -> np.random.Generator:
    """An independent stream for (seed, tags): same tags, same stream (common random numbers)."""
    return np.random.default_rng(np.random.SeedSequence([seed, *tags]))
