"""Per-user histograms with cluster-then-shuffle, measured (per-user histograms paper, §3, Thm 1–4).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

Every user holds counts H over d public classes; the protocol
(:class:`~shuffledp.protocols.per_user.PerUserHistograms`, Alg. 1) sends two
Laplace copies, groups the users by k-means on the first (W, budget ε₁) and
releases the second shuffled within the groups. This experiment measures, on
synthetic clustered users (:func:`~shuffledp.data.synthetic_users.clustered_users`)
or on the 671 MovieLens users' genre histograms
(:func:`~shuffledp.data.movielens.load_movielens_genres`):

1. ``eps1_sweep.csv`` / ``.png``: ε₁ as a fraction of ε, releases ``t`` (shuffled
   T, the package's default) and ``r`` (Alg. 1 as printed, shuffled
   R = a·W + (1 − a)·T with App. D's min-variance a): mean per-user L1 error
   ‖Ĥ_i − H̄_i‖₁ of the raw release and of its projection on the simplex
   (clip at 0 and renormalize: post-processing the server may apply),
   top-k precision, group purity, the adjusted Rand index of the groups
   against the true clusters, and the group count. The empirical optimum is
   the ε₁ of least mean raw L1 of ``t`` (the *chosen* ε₁ of every later
   part); Thm 4's recommended ε₁ = 4d·log(n/δ)/R (R = separation/c) is
   reported next to it.
2. ``baselines.csv`` / ``.png``: at the chosen ε₁ (fresh seeds, not the
   sweep's): ``t``, ``r``, ``laplace-ldp`` (each user's own copy, T and R),
   ``laplace-full`` (one Lap copy with the whole ε), ``uniform-shuffle`` and
   ``oracle`` (shuffled within the true clusters). Every release is
   (ε, 0, c)-hDP per user (the report's guarantee, recorded per row).
3. ``epsilon_prime.csv`` / ``.png``: ε′ per user for the ``t`` release
   (:func:`~shuffledp.accounting.per_user_epsilons.per_user_epsilons`, conditional on
   the run's grouping; an analysis number, never a release's guarantee) for
   every c of the c sweep (one ``t`` run per c at the chosen ε₁), on a fixed
   random sample of users (computing it for everyone is slow). For synthetic
   data also with the true clusters as groups (a what-if that separates the
   cost of a noisy grouping from the clusters' spread, ε₀ = ε₂(1 + ρ/Δ), Δ = 2c).
   The paper's App. C number
   (:func:`~shuffledp.accounting.reproductions.per_user_appendix_c.paper_per_user_epsilon`, a
   reproduction) is given for a smaller sub-sample: it builds |G|² × d
   arrays, so for groups above ``PAPER_MAX_GROUP`` (:mod:`.config`) it is not called;
   when the closed form's range condition fails even at ε₀ = ε₂ and
   |Q| = |G| (then it fails for every Q ⊆ G) its value is ε, and
   ``paper_method`` says which.
4. ``attack.csv``: Thm 1's adversary
   (:func:`~shuffledp.accounting.certificates.per_user.regroup_attack`) on release
   ``single`` (Alg. 2: one copy of the whole ε both groups and is released)
   and on ``t``. The adversary applies the shuffler's public pre-processing
   (clip and renormalize) and k-means with the public G.
5. ``thm3.csv`` / ``.png``: Thm 3's per-user bound (Eq. 4) against the
   measured error, for ``t`` and ``r`` at the chosen ε₁.
6. ``summary.json``: the configuration, the headline numbers and the time per part.

Everything but the ε′ jobs runs with one BLAS/OpenMP thread (k-means on a
few thousand points is faster so); the ε′ jobs (one per c and grouping) run
in up to ``workers`` processes. Seeds derive from ``seed``: the same seed
per repetition across ε₁ values (common random numbers), and ``t`` and ``r``
of the sweep share one run (the same W, T, groups and permutation).

Decisions (stated in the CSVs too):

* Top-k precision: the fraction of the estimate's k largest classes that are
  among the true top k, where a class tied with the k-th largest true share
  counts as a true top-k class.
* Purity: a group is pure when all its members share one true cluster; a
  singleton group counts as pure. MovieLens has no true clusters: purity,
  the ARI against the truth and ``oracle`` are reported as unavailable.
* Thm 3's noise term: the paper's 2dc·log(n/δ)/√(ε₁² + ε₂²) is d·σ·log(n/δ)
  with σ² = a²b₁² + (1 − a)²b₂² for its scale b = 2c/ε. The bound here uses
  σ of the scale and the copy actually released (at the default scale 2c/ε:
  the paper's term for ``r``, 2dc·log(n/δ)/ε₂ for ``t``; half these with
  ``neighbouring="l1-distance"``). A second,
  expectation-only version replaces log(n/δ)·σ by the exact E|noise| of a
  coordinate (the triangle inequality of App. D needs nothing more).
* Thm 4 is stated with log(n/δ) (App. E writes log(1/δ)); for synthetic data
  R = separation/c (the generator's centre separation), and the data-level
  R_i = min_j ‖H̄_i − H̄_j‖₁/c over users j of other clusters is reported as
  well (for MovieLens the clusters are k-means on the true histograms, an
  analysis-only quantity).

Modules: :mod:`.config` (data sets, releases, constants,
:class:`PerUserExperimentConfig` and the seed's streams), :mod:`.data`
(:class:`PerUserData`, :func:`load_data`), :mod:`.metrics` (the per-user
measures), :mod:`.theorems` (Thm 3's bound and Thm 4's ε₁ against the data),
:mod:`.epsilon_prime` (the ε′ jobs in worker processes and the amplification
ceiling), :mod:`.runs` (:func:`run_per_user_experiment`: the parts that run the
protocol), :mod:`.tables` (the CSVs and ``summary.json``) and :mod:`.plots`
(the figures). This package re-exports their public names.
"""

from shuffledp.experiments.per_user.config import DATA_SETS, PerUserExperimentConfig
from shuffledp.experiments.per_user.config import _rng as _rng  # imported by tests
from shuffledp.experiments.per_user.data import PerUserData, load_data
from shuffledp.experiments.per_user.metrics import mean_l1_to_groups, top_k_precision
from shuffledp.experiments.per_user.runs import _t_and_r as _t_and_r  # imported by tests
from shuffledp.experiments.per_user.runs import run_per_user_experiment
from shuffledp.experiments.per_user.tables import (
    ATTACK_FIELDS,
    BASELINE_FIELDS,
    EPSILON_PRIME_FIELDS,
    SWEEP_FIELDS,
    THM3_FIELDS,
)
from shuffledp.experiments.per_user.theorems import thm4_epsilon1

__all__ = [
    "ATTACK_FIELDS",
    "BASELINE_FIELDS",
    "DATA_SETS",
    "EPSILON_PRIME_FIELDS",
    "SWEEP_FIELDS",
    "THM3_FIELDS",
    "PerUserData",
    "PerUserExperimentConfig",
    "load_data",
    "mean_l1_to_groups",
    "run_per_user_experiment",
    "thm4_epsilon1",
    "top_k_precision",
]
