"""The segmented paper's §6 experiments, redone with two accountings and verdicts.

Wang et al., "Segmented private data aggregation in the multi-message shuffle
model", arXiv 2407.19639, §6 (Figs 2–6) and §6.4. Users hold sets of s items; levels
E = (0.5, 1, 2) are assigned at random, independently of the data, in the
shares S1 = 25/50/25 %, S2 = 50/25/25 %, S3 = 25/25/50 % (exact counts by
largest remainder); δ = 0.01/n. For every blanket rate m of a grid our
protocol (Alg. 2, count-level path:
:meth:`~shuffledp.randomizers.poisson.PoissonSetRandomizer.sample_counts` and
the pooled estimator of :mod:`shuffledp.analyzers.segmented`) runs with λ_k
from two accountings:

* ``exact``: :func:`~shuffledp.accounting.certificates.segmented.calibrate_level`, the
  largest λ_k the exact per-slot accountant certifies for (E_k, δ) (certified);
* ``paper``: :func:`~shuffledp.accounting.reproductions.segmented_eq7.paper_report_probability`,
  Eq. 7 with Lemma 3's pair and Thm 3's group bound (a reproduction). For
  these λ_k the experiment also records what the exact accountant certifies
  (:func:`~shuffledp.accounting.certificates.segmented.level_delta` at E_k) and how far
  Lemma 3's per-slot δ′ lies below the exact per-slot δ′ at the same λ.

λ_k(m) depends on (n, s, E_k, m, d′) only, so it is computed once per (n, s, m)
(in worker processes, warm-started along m) and reused across the shares.
The baselines (:mod:`shuffledp.baselines`) run once per (n, s, shares) with
their own calibrated parameters, on the count path; Subexp and MM ignore the
levels, so their runs are shared by the three share settings.

Metric (§6): Σ_j (ŵ_j − w_j)² with w the *empirical* frequency of the n users'
(kept) items in that repetition: the error of the mechanism on the data set,
not of the data set around a population. Each repetition draws a fresh data
set (synthetic) or subsample (real data), fresh levels and fresh mechanism
randomness, from a :class:`numpy.random.SeedSequence` keyed by the setting and
the repetition; all mechanisms of one repetition see the same data and levels.
The best m is chosen from the measured means (an oracle choice, as in the
paper's figures), so it is slightly optimistic.

Data (``data``):

* ``synthetic``: d = 128, each user s ∈ {4, 8} distinct uniform items,
  n ∈ {5,000, 50,000} (§6, L488);
* ``movies``: ggplot2movies' genres (d = 7), s = 2 with padding (94 % of the
  58,788 films have at most two genres; mean 1.11), random subsamples of
  n = 5,000 and 50,000 films;
* ``pizza``: gt's pizza orders (d = 32), s = 4 with padding (97 % of the
  orders hold at most four pizzas), n = 5,000 and all 21,350 orders.

Sets larger than s keep a random s-subset (:func:`~shuffledp.data.movies.fixed_size_items`),
so for real data the estimand is the frequency of the kept items.

Also measured: the ``dummy`` variant against the paper's at the same (E_k, δ)
for one setting, and (full runs) the blanket gap: per (n, s, E_k), the
smallest m certifying λ = 1 (MM's shape, §5.2's m_k) against the smallest m
a whole-set dataset pair needs (:func:`whole_set_lower_delta`).

Verdicts: a setting is judged in or out of a claim's band only beyond
:data:`Z` standard errors (the two error-reduction bands do not overlap),
settings are tallied per n, and a claim the run cannot test (one n; a grid
that stops inside the claim's band, as ``--quick``'s does) is ``untested``,
with the reason. Eq. 7's λ is *not certified* where the exact accountant's
bound, for Lemma 2's view that hands the adversary the other users' data
messages, exceeds the target; there the δ of a concrete dataset pair in the
real protocol (:func:`~shuffledp.accounting.certificates.segmented.level_lower_bound`)
is recorded, and only that lower bound above the target would show the λ
not private. Every integer m in the grid's range also gets its λ (for the λ
figure only: λ jumps there).

Outputs: ``segmented_<data>.csv`` (one row per setting × mechanism ×
accounting × m), ``segmented_<data>_summary.json`` (verdict inputs and
verdicts) and the figures of :mod:`shuffledp.experiments.segmented.plots`.

Modules: :mod:`.config` (§6's settings and grids, :class:`SegmentedExperimentConfig`),
:mod:`.data` (the data sources), :mod:`.calibration` (λ_k under both
accountings, the blanket gap, :func:`whole_set_lower_delta`), :mod:`.runs`
(:func:`run_segmented_experiment`: the simulations and the rows),
:mod:`.verdicts` (the claims and their verdicts), :mod:`.tables` (the CSV and
the summary JSON) and :mod:`.plots` (the figures). This package re-exports
their public names.
"""

from shuffledp.experiments.segmented.calibration import whole_set_lower_delta
from shuffledp.experiments.segmented.config import (
    ACCOUNTINGS,
    BASELINES,
    BLANKET_GRID,
    DATA_SOURCES,
    LOW_GRID,
    PAPER_LEVELS,
    QUICK_GRID,
    QUICK_LOW_GRID,
    SHARE_SETTINGS,
    SegmentedExperimentConfig,
)
from shuffledp.experiments.segmented.runs import _rng as _rng  # imported by tests
from shuffledp.experiments.segmented.runs import run_segmented_experiment
from shuffledp.experiments.segmented.tables import FIELDS
from shuffledp.experiments.segmented.verdicts import REDUCTION_BANDS, Z
from shuffledp.experiments.segmented.verdicts import _verdicts as _verdicts  # imported by tests

__all__ = [
    "ACCOUNTINGS",
    "BASELINES",
    "BLANKET_GRID",
    "DATA_SOURCES",
    "FIELDS",
    "LOW_GRID",
    "PAPER_LEVELS",
    "QUICK_GRID",
    "QUICK_LOW_GRID",
    "REDUCTION_BANDS",
    "SHARE_SETTINGS",
    "SegmentedExperimentConfig",
    "Z",
    "run_segmented_experiment",
    "whole_set_lower_delta",
]
