"""Composition of several releases on the same users: the total (ε, δ).

A user who takes part in several releases (two histograms of the same people,
a daily release, …) loses privacy in each. :func:`compose` states one
guarantee for all of them:

* **PLD composition** (tight). Each report's certificate comes from a pair of
  output laws that *dominates* the mechanism for every dataset
  (:func:`dominating_pair`; see :mod:`shuffledp.accounting.composition.pld`). The product
  of dominating pairs dominates the composition (Zhu, Dong & Wang,
  AISTATS 2022, Thm 10), and its privacy loss distribution is the convolution
  of the releases' PLDs (Meiser & Mohammadi, CCS 2018; Koskela, Jälkö &
  Honkela, AISTATS 2020), computed with Google's ``dp-accounting`` (extra
  ``pld``), rounded pessimistically. A report from another method enters
  through the pair that dominates every (ε, δ)-DP mechanism (Kairouz, Oh &
  Viswanath, ICML 2015), which still beats basic composition.
* **Basic composition** (Σεᵢ, Σδᵢ): valid for any mix of guarantees
  (Dwork & Roth 2014, Thm 3.16).

Both are computed; the tighter one at the target is reported, and ``method``
says which (``"pld-composition"`` or ``"basic-composition"``).

:func:`reports_from_json` rebuilds reports from every release the package
writes (``run`` of each protocol, the analyzer service's releases, ``demo``,
``simulate``, ``account compose --json``, or their ``privacy`` objects), so
that saved releases can be composed; :func:`populations_from_json` reads what
each release records about its users.

**Re-derived guarantees.** No stated (ε, δ) is taken on trust: every input
whose method has a certificate here is recomputed from the parameters it
records (:mod:`shuffledp.accounting.composition.rederive`; a composed report by
composing its components again), kept when the certificate implies it, taken
at the certificate's value within floating-point noise, and refused otherwise.
A method without a certificate here enters at its stated guarantee only as the
caller's own claim (a :class:`PrivacyReport` passed in Python, or a file read
with ``accept_stated=True``), which the total's assumptions state.

**The same users.** Composition states a total for people who are in several
releases. Releases are taken to cover the same users only when they record the
same number of users ``n``, the same domain, the same user column and the same
input (file, or service task), as far as they record them
(:class:`Population`); releases that differ are an error unless the caller
asserts that they cover the same people (``same_users=True``, ``--same-users``).
The composed report states which of the two it was.

**A personalized release** (``run segmented``: one guarantee per privacy level)
enters at its weakest level, (maxₖ εₖ, maxₖ δₖ), which covers every user whatever
their level (:func:`weakest_level`).

**Where it is written.** This module is the entry point and re-exports the
three modules that do the work: :mod:`~shuffledp.accounting.composition.inputs`
(what each release brings: its dominating pair, its users, its weakest level),
:mod:`~shuffledp.accounting.composition.total` (:func:`compose` and the
arithmetic) and :mod:`~shuffledp.accounting.composition.release_documents`
(reading releases back).

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``.
"""

from __future__ import annotations

from shuffledp.accounting.composition.inputs import (
    FLIP_CERTIFICATE_METHOD,
    KRR_CERTIFICATE_METHOD,
    ONE_ROW_PER_USER,
    Population,
    dominating_pair,
    weakest_level,
)
from shuffledp.accounting.composition.release_documents import (
    populations_from_json,
    reports_from_json,
)
from shuffledp.accounting.composition.total import (
    BASIC_COMPOSITION_METHOD,
    PLD_COMPOSITION_METHOD,
    basic_composition,
    compose,
)

__all__ = [
    "BASIC_COMPOSITION_METHOD",
    "FLIP_CERTIFICATE_METHOD",
    "KRR_CERTIFICATE_METHOD",
    "ONE_ROW_PER_USER",
    "PLD_COMPOSITION_METHOD",
    "Population",
    "basic_composition",
    "compose",
    "dominating_pair",
    "populations_from_json",
    "reports_from_json",
    "weakest_level",
]
