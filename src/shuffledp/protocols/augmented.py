"""Augmented shuffle protocols: users send their value, the shuffler adds the noise.

Murakami, Sei & Eriguchi, "Augmented Shuffle Protocols for Accurate and Robust
Frequency Estimation under Differential Privacy", arXiv 2504.07362 (2025): the
local-noise-free (LNF) framework with three dummy laws.

* ``"sageo"`` (SAGeo-Shuffle): the shuffler keeps each message with
  probability β ≥ 1 − e^{−ε/2} and adds SAGeo(ν, q_l, q_r) dummies per bin; at
  β = 1 that is the central discrete Laplace DLap(ε/2), shifted by ν and
  truncated at zero, with one message per user. ν is the smallest the exact
  accountant certifies (``calibration="exact"``) or the paper's closed form
  (``"paper"``, a reproduction whose δ is still certified exactly).
* ``"s1geo"`` (S1Geo-Shuffle): β = 1 − e^{−ε/2}, geometric dummies, pure ε-DP.
* ``"sbin"`` (SBin-Shuffle): Bin(M, 1/2) dummies with the smallest M certified.

Privacy (:mod:`shuffledp.accounting.certificates.augmented`) is the exact δ of the pair of
laws of the two counts a moving user touches, valid for every dataset. The
trust model differs from the other protocols: against the analyzer, privacy
rests on the shuffler adding the dummies and not colluding with it; against
the shuffler, on the encryption alone (it only sees ciphertexts).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, overload

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.accounting.certificates.augmented import (
    VARIANTS,
    DummyLaw,
    SAGeoLaw,
    SBinLaw,
    Variant,
    augmented_delta,
    calibrate_sageo_nu,
    calibrate_sbin_trials,
    check_beta,
    s1geo_law,
    sageo_law,
)
from shuffledp.accounting.reproductions.augmented_paper import paper_sageo_nu
from shuffledp.analyzers.augmented import AugmentedAnalyzer, augmented_count_stderr
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.central import discrete_laplace_std
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import PrivacyReport
from shuffledp.protocols.base import (
    CalibratedOnRun,
    CalibratedProtocol,
    DomainSpec,
    IntArray,
    certified_report,
    check_target,
)
from shuffledp.randomizers.augmented import AugmentedClient, AugmentedRandomizer

__all__ = [
    "AUGMENTED_ASSUMPTIONS",
    "AUGMENTED_CALIBRATIONS",
    "AUGMENTED_PRIVACY_METHOD",
    "AugmentedCalibration",
    "AugmentedProtocol",
    "calibrate_augmented",
]

#: Name of the accountant behind every augmented privacy report.
AUGMENTED_PRIVACY_METHOD = "augmented-exact-pair"

#: How the dummy parameter was chosen: the exact accountant's smallest, the
#: paper's closed form (SAGeo only; its δ is still certified exactly), or given.
AUGMENTED_CALIBRATIONS: tuple[str, ...] = ("exact", "paper")

Calibration = Literal["exact", "paper"]

#: What the guarantee takes for granted: the trust model of the augmented shuffle.
AUGMENTED_ASSUMPTIONS: tuple[str, ...] = (
    "the shuffler adds the dummy messages (and keeps each real message with probability "
    "beta) exactly as the protocol specifies and does not collude with the analyzer: the "
    "guarantee against the analyzer rests on the shuffler's dummies, and a shuffler that "
    "skips them or shares them leaves the users' values in the clear",
    "against the shuffler the users' values are protected by the encryption alone (each "
    "message is sealed to the analyzer's key and the dummies are sealed alike); no "
    "differential privacy holds against a shuffler that can decrypt",
)


@dataclass(frozen=True)
class AugmentedCalibration:
    """The augmented protocol's parameters for a target (ε, δ) and what they buy.

    Attributes:
        n: Number of users.
        domain_size: d.
        epsilon: Target ε.
        target_delta: Target δ.
        variant: ``"sageo"``, ``"s1geo"`` or ``"sbin"``.
        beta: The shuffler's sampling rate β.
        nu: SAGeo's shift ν (``None`` for SBin).
        q_left: SAGeo's q_l (``None`` for SBin).
        q_right: SAGeo's q_r (``None`` for SBin).
        trials: SBin's M (``None`` otherwise).
        delta: Certified δ at ε (≤ ``target_delta``), for every dataset.
        delta_lower: The exact δ of a concrete pair of datasets (the same pair,
            rounded down), or ``None`` when no dataset attains it (d = 2,
            n ≥ 2, β < 1).
        noise_mean: E[z], subtracted by the analyzer.
        noise_variance: Var z.
        per_bin_std: Standard error of every estimated count at a uniform
            histogram (h_j = n/d): √(Var z + β(1 − β)n/d)/β.
        dlap_std: Standard deviation of the central DLap(ε/2) on a count.
        method: ``"exact"``, ``"paper"``, ``"pure"`` (S1Geo) or ``"fixed"``.
        paper_nu: SAGeo's ν from the paper's closed form (a reproduction), else ``None``.
        paper_nu_delta: The certified δ at ε of ``paper_nu``, else ``None``.
        notes: What the calibration chose on the caller's behalf.
    """

    n: int
    domain_size: int
    epsilon: float
    target_delta: float
    variant: str
    beta: float
    nu: int | None
    q_left: float | None
    q_right: float | None
    trials: int | None
    delta: float
    delta_lower: float | None
    noise_mean: float
    noise_variance: float
    per_bin_std: float
    dlap_std: float
    method: str
    paper_nu: int | None = None
    paper_nu_delta: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def law(self) -> DummyLaw:
        """The dummy-count law."""
        if self.trials is not None:
            return SBinLaw(self.trials)
        assert self.nu is not None and self.q_left is not None and self.q_right is not None
        return SAGeoLaw(self.nu, self.q_left, self.q_right)

    @property
    def noise_std(self) -> float:
        """√Var z/β: the standard error of an empty bin's count (at β = 1, of every count)."""
        return math.sqrt(self.noise_variance) / self.beta

    @property
    def std_ratio(self) -> float:
        """``per_bin_std`` over the central DLap(ε/2)'s standard deviation."""
        return self.per_bin_std / self.dlap_std

    @property
    def expected_dummies(self) -> float:
        """d·E[z]: dummy messages the shuffler adds, on average."""
        return self.domain_size * self.noise_mean

    def privacy_report(self) -> PrivacyReport:
        """Return the certified guarantee of one execution, with the augmented trust model."""
        parameters: dict[str, Any] = {"variant": self.variant, "beta": self.beta}
        if self.trials is None:
            parameters.update(nu=self.nu, q_left=self.q_left, q_right=self.q_right)
        else:
            parameters["trials"] = self.trials
        return certified_report(
            self,
            AUGMENTED_PRIVACY_METHOD,
            parameters=parameters,
            notes=(
                "exact hockey-stick divergence of the two bin counts a moving user touches "
                "(its one message, kept with probability beta, plus the shuffler's dummies; "
                "the other users' messages are a post-processing), valid for every dataset "
                "and any n; lower_bound_delta is the same pair rounded down, the exact delta "
                "of a dataset whose other users hold neither value"
            ),
            assumptions=AUGMENTED_ASSUMPTIONS,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "method": self.method,
            "variant": self.variant,
            "epsilon": self.epsilon,
            "target_delta": self.target_delta,
            "beta": self.beta,
            "nu": self.nu,
            "q_left": self.q_left,
            "q_right": self.q_right,
            "trials": self.trials,
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "noise_mean": self.noise_mean,
            "noise_std": self.noise_std,
            "per_bin_std": self.per_bin_std,
            "dlap_std": self.dlap_std,
            "std_ratio": self.std_ratio,
            "messages_per_user": 1,
            "expected_dummies": self.expected_dummies,
            "paper_nu": self.paper_nu,
            "paper_nu_delta": self.paper_nu_delta,
        }


def check_variant(variant: str) -> Variant:
    """Return ``variant`` if it is a dummy law of the augmented protocols (``VARIANTS``).

    Raises:
        InvalidParameterError: Naming the parameter, the value and the variants allowed.
    """
    if variant not in VARIANTS:
        raise InvalidParameterError(
            f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}"
        )
    return variant  # type: ignore[return-value]


def calibrate_augmented(
    n: int,
    domain_size: int,
    epsilon: float,
    delta: float,
    *,
    variant: Variant = "sageo",
    beta: float | None = None,
    nu: int | None = None,
    trials: int | None = None,
    calibration: Calibration = "exact",
) -> AugmentedCalibration:
    """Choose the dummy law for a target (ε, δ), or certify a given one.

    Args:
        n: Number of users (the guarantee does not depend on it; the standard
            error at β < 1 does).
        domain_size: d ≥ 2.
        epsilon: Target ε (at most 1000).
        delta: Target δ in (0, 1).
        variant: ``"sageo"`` (default), ``"s1geo"`` or ``"sbin"``.
        beta: The shuffler's sampling rate: default 1 for SAGeo and SBin; SAGeo
            needs β ≥ 1 − e^{−ε/2}; S1Geo fixes β = 1 − e^{−ε/2} and takes none.
        nu: A fixed SAGeo shift to certify instead of calibrating.
        trials: A fixed SBin M to certify instead of calibrating.
        calibration: ``"exact"`` (smallest certified ν or M) or ``"paper"``
            (SAGeo's ν from the paper's closed form, then certified exactly).

    Raises:
        InvalidParameterError: On a bad parameter, a parameter the variant does
            not take, or a fixed ν or M whose certified δ exceeds the target.
    """
    n, d, epsilon, delta = check_target(n, domain_size, epsilon, delta)
    variant = check_variant(variant)
    if calibration not in AUGMENTED_CALIBRATIONS:
        raise InvalidParameterError(f"calibration must be 'exact' or 'paper', got {calibration!r}")
    if variant != "sageo" and nu is not None:
        raise InvalidParameterError(f"nu is SAGeo's shift; variant {variant!r} takes none")
    if variant != "sbin" and trials is not None:
        raise InvalidParameterError(f"trials is SBin's M; variant {variant!r} takes none")
    if variant != "sageo" and calibration == "paper":
        raise InvalidParameterError(
            f"calibration 'paper' is SAGeo's closed-form nu; variant {variant!r} has none"
        )
    notes: list[str] = []
    paper_nu: int | None = None
    paper_delta: float | None = None
    law: DummyLaw
    if variant == "s1geo":
        if beta is not None:
            raise InvalidParameterError(
                f"variant 's1geo' fixes beta = 1 - e^(-epsilon/2); got beta={beta!r}"
            )
        law, beta = s1geo_law(epsilon)
        method = "pure"
        notes.append(
            f"S1Geo: the shuffler keeps each message with probability beta = {beta:.6g} "
            "(1 - e^(-epsilon/2)) and adds geometric dummies: pure epsilon-DP"
        )
    elif variant == "sageo":
        beta = check_beta(1.0 if beta is None else beta, epsilon)
        paper_nu = paper_sageo_nu(epsilon, delta, beta)
        paper_delta = augmented_delta(epsilon, sageo_law(epsilon, beta, paper_nu), beta)
        if nu is not None:
            chosen, method = check_int(nu, "nu", minimum=0), "fixed"
        elif calibration == "paper":
            chosen, method = paper_nu, "paper"
            notes.append(
                f"nu = {chosen} from the paper's closed form (a reproduction), certified by "
                "the exact accountant"
            )
        else:
            chosen, method = calibrate_sageo_nu(epsilon, delta, beta), "exact"
        law = sageo_law(epsilon, beta, chosen)
    else:
        beta = check_beta(1.0 if beta is None else beta)
        if trials is not None:
            law, method = SBinLaw(check_int(trials, "trials", minimum=1)), "fixed"
        else:
            law, method = SBinLaw(calibrate_sbin_trials(epsilon, delta, beta)), "exact"
    certified = augmented_delta(epsilon, law, beta)
    if certified > delta:
        raise InvalidParameterError(
            f"the {variant} dummies ({_describe(law)}) give a certified delta of {certified:.3g} "
            f"at epsilon={epsilon:g}, above the target {delta:g}"
        )
    attained = d >= 3 or n == 1 or beta == 1.0
    lower = augmented_delta(epsilon, law, beta, rounding="down") if attained else None
    mean, variance = law.mean, law.variance
    sageo = law if isinstance(law, SAGeoLaw) else None
    return AugmentedCalibration(
        n=n,
        domain_size=d,
        epsilon=epsilon,
        target_delta=delta,
        variant=variant,
        beta=beta,
        nu=None if sageo is None else sageo.nu,
        q_left=None if sageo is None else sageo.q_left,
        q_right=None if sageo is None else sageo.q_right,
        trials=law.trials if isinstance(law, SBinLaw) else None,
        delta=certified,
        delta_lower=lower,
        noise_mean=mean,
        noise_variance=variance,
        per_bin_std=float(augmented_count_stderr(variance, beta, n / d)),
        dlap_std=discrete_laplace_std(epsilon),
        method=method,
        paper_nu=paper_nu,
        paper_nu_delta=paper_delta,
        notes=tuple(notes),
    )


def _describe(law: DummyLaw) -> str:
    if isinstance(law, SBinLaw):
        return f"M={law.trials}"
    return f"nu={law.nu}, q_left={law.q_left:.6g}, q_right={law.q_right:.6g}"


class AugmentedProtocol(CalibratedProtocol[AugmentedCalibration, AugmentedRandomizer]):
    """The augmented shuffle protocol: one plain message per user, dummies from the shuffler.

    The message path runs the client (:class:`~shuffledp.randomizers.augmented.AugmentedClient`),
    then the shuffler's sampling and dummies
    (:class:`~shuffledp.randomizers.augmented.AugmentedRandomizer`), and
    :meth:`~shuffledp.protocols.base.ShuffleProtocol.run` shuffles uniformly; the
    count path draws c_j = Bin(h_j, β) + z_j directly. Every message (kept or
    dummy) sets one bin; the privacy report states the augmented trust model.

    Args:
        calibration: From :func:`calibrate_augmented`.
        labels: The public domain's bin labels (``None``: bin indices only).
    """

    name: ClassVar[str] = "augmented"

    def __init__(
        self, calibration: AugmentedCalibration, *, labels: Iterable[Any] | None = None
    ) -> None:
        super().__init__(calibration, labels=labels)
        self.client = AugmentedClient(calibration.domain_size)
        self.randomizer = AugmentedRandomizer(
            calibration.domain_size, calibration.law, calibration.beta
        )
        self.analyzer = AugmentedAnalyzer(
            calibration.n,
            calibration.domain_size,
            calibration.beta,
            calibration.noise_mean,
            calibration.noise_variance,
        )

    @overload
    @classmethod
    def calibrated(
        cls,
        n: int,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        beta: float | None = None,
        variant: Variant = "sageo",
        nu: int | None = None,
        trials: int | None = None,
        calibration: Calibration = "exact",
    ) -> AugmentedProtocol: ...

    @overload
    @classmethod
    def calibrated(
        cls,
        n: None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        beta: float | None = None,
        variant: Variant = "sageo",
        nu: int | None = None,
        trials: int | None = None,
        calibration: Calibration = "exact",
    ) -> CalibratedOnRun[AugmentedProtocol]: ...

    @classmethod
    def calibrated(
        cls,
        n: int | None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        beta: float | None = None,
        variant: Variant = "sageo",
        nu: int | None = None,
        trials: int | None = None,
        calibration: Calibration = "exact",
    ) -> AugmentedProtocol | CalibratedOnRun[AugmentedProtocol]:
        """Return a protocol calibrated by :func:`calibrate_augmented` for a target (ε, δ).

        >>> AugmentedProtocol.calibrated(n=10_000, domain=100, epsilon=1.0, delta=1e-6,
        ...                              beta=1.0, variant="sageo").calibration.nu
        25

        Args:
            n: Number of users, or ``None`` to calibrate for the number of
                users in the data each run is given (a
                :class:`~shuffledp.protocols.base.CalibratedOnRun`; its runs
                report the calibration at that number).
            domain: The public domain: its size d, or its labels in bin order.
            epsilon: Target ε.
            delta: Target δ.
            beta: The shuffler's sampling rate (default 1; S1Geo fixes its own).
            variant: ``"sageo"``, ``"s1geo"`` or ``"sbin"``.
            nu: A fixed SAGeo shift to certify.
            trials: A fixed SBin M to certify.
            calibration: ``"exact"`` or ``"paper"`` (SAGeo).
        """
        if n is None:  # what can be checked before the data come: now
            check_epsilon(epsilon)
            check_delta(delta)
            check_variant(variant)
            if calibration not in AUGMENTED_CALIBRATIONS:
                raise InvalidParameterError(
                    f"calibration must be 'exact' or 'paper', got {calibration!r}"
                )
        return cls._on_domain(
            domain,
            n,
            lambda users, d: calibrate_augmented(
                users,
                d,
                epsilon,
                delta,
                variant=variant,
                beta=beta,
                nu=nu,
                trials=trials,
                calibration=calibration,
            ),
        )

    def randomize(self, values: IntArray, seed: SeedLike = None) -> MessageBatch:
        """Every user's message, then the shuffler's sampling and dummies (before the shuffle)."""
        return self.randomizer.augment(self.client.randomize(values), make_rng(seed))

    def statistic_from_messages(self, shuffled: ShuffledBatch) -> IntArray:
        """Messages per bin."""
        return self.analyzer.count_messages(shuffled.payload)

    def estimate(
        self, statistic: IntArray, domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """(c_j − E[z])/β with standard errors."""
        return self.analyzer.estimate(statistic, domain)

    def parameters(self) -> dict[str, Any]:
        """The variant, β, the dummy law's parameters and E[z]."""
        cal = self.calibration
        out: dict[str, Any] = {
            "variant": cal.variant,
            "beta": cal.beta,
            "calibration": cal.method,
            "noise_mean": cal.noise_mean,
        }
        if cal.trials is None:
            out.update(nu=cal.nu, q_left=cal.q_left, q_right=cal.q_right)
        else:
            out["trials"] = cal.trials
        return out
