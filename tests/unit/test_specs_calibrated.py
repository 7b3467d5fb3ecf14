"""A spec's ``calibrated``: one calibration gives the spec and the protocol it makes.

``run flip|krr|correlated|augmented`` execute the protocol of
``XSpec.calibrated(...)`` and ``task create`` records its spec, so for every
option the command line offers the test checks that:

- the protocol is the one ``XProtocol.calibrated(...)`` (what ``run`` built
  before the specs) builds: the same calibration object, field for field
  (the method, the target δ and the notes included);
- the spec is ``XSpec.calibrate(...)``'s and holds the protocol's parameters;
- the spec alone rebuilds the same certificate (``spec.protocol``);
- the certificate is computed once: the calibration and each certificate
  function run as often as on the protocol's own path, never again through the
  spec (counted by wrappers around the functions the calibration looks up).
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import shuffledp.accounting.certificates.augmented as augmented_certificates
import shuffledp.accounting.certificates.correlated as correlated_certificates
import shuffledp.protocols.augmented as augmented_protocols
import shuffledp.protocols.correlated as correlated_protocols
import shuffledp.protocols.flip as flip_protocols
import shuffledp.protocols.krr as krr_protocols
from shuffledp.privacy import BoundKind
from shuffledp.protocols.augmented import AugmentedProtocol
from shuffledp.protocols.base import CalibratedProtocol
from shuffledp.protocols.correlated import CorrelatedProtocol
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.specs import (
    SPECS,
    AugmentedSpec,
    CorrelatedSpec,
    FlipSpec,
    KRRSpec,
    ProtocolSpec,
)
from shuffledp.specs.base import Calibrated

N = 3000
LABELS = ("Lyon", "Nice", "Paris", "Rome")
EPSILON, DELTA = 1.0, 1e-6

#: Every spec with the protocol class ``run`` used to calibrate directly.
PROTOCOLS: dict[type[ProtocolSpec], type[Any]] = {
    FlipSpec: FlipProtocol,
    KRRSpec: KRRProtocol,
    CorrelatedSpec: CorrelatedProtocol,
    AugmentedSpec: AugmentedProtocol,
}

#: The options of each ``run`` command, as the command passes them (``run correlated``
#: always passes its --slack, default 0.1): defaults, each flag, and flags together.
CASES: list[tuple[type[ProtocolSpec], dict[str, Any]]] = [
    (FlipSpec, {}),
    (FlipSpec, {"fake_users": 3}),
    (FlipSpec, {"fake_users": 0}),
    (FlipSpec, {"calibration": "paper"}),
    (FlipSpec, {"calibration": "paper", "fake_users": 5000}),
    (KRRSpec, {}),
    (KRRSpec, {"estimator": "simplex"}),
    (KRRSpec, {"epsilon0": 2.0}),
    (KRRSpec, {"epsilon0": 2.0, "estimator": "raw"}),
    (CorrelatedSpec, {"slack": 0.1}),
    (CorrelatedSpec, {"slack": 0.3}),
    (CorrelatedSpec, {"slack": 0.1, "min_honest": 0.9}),
    (CorrelatedSpec, {"slack": 0.1, "min_honest": 2000}),
    (CorrelatedSpec, {"slack": 0.1, "neighbours": "add-remove"}),
    (CorrelatedSpec, {"slack": 0.1, "neighbours": "add-remove", "min_honest": 0.5}),
    (AugmentedSpec, {}),
    (AugmentedSpec, {"beta": 0.9}),
    (AugmentedSpec, {"nu": 40}),
    (AugmentedSpec, {"variant": "s1geo"}),
    (AugmentedSpec, {"variant": "sbin"}),
    (AugmentedSpec, {"variant": "sbin", "trials": 3000, "beta": 0.8}),
    (AugmentedSpec, {"calibration": "paper", "beta": 0.95}),
]


def _case_id(case: tuple[type[ProtocolSpec], dict[str, Any]]) -> str:
    spec_type, options = case
    return spec_type.name + "".join(f"-{name}={value}" for name, value in options.items())


IDS = [_case_id(case) for case in CASES]


def _calibrated(spec_type: type[ProtocolSpec], options: dict[str, Any]) -> Calibrated[Any, Any]:
    result: Calibrated[Any, Any] = spec_type.calibrated_with(N, LABELS, EPSILON, DELTA, options)
    return result


def _spec_fields_of(
    protocol: CalibratedProtocol[Any, Any], spec_type: type[ProtocolSpec]
) -> dict[str, Any]:
    """The spec's fields as the protocol holds them (``calibration`` is the method)."""
    calibration = protocol.calibration
    out: dict[str, Any] = {}
    for name in spec_type.fields:
        if name == "calibration":
            out[name] = calibration.method
        elif name == "estimator":  # k-RR's estimator is the protocol's, not the calibration's
            out[name] = protocol.estimator  # type: ignore[attr-defined]
        else:
            out[name] = getattr(calibration, name)
    return out


@pytest.mark.parametrize(("spec_type", "options"), CASES, ids=IDS)
def test_the_protocol_is_the_one_run_built_and_the_spec_holds_its_parameters(
    spec_type: type[ProtocolSpec], options: dict[str, Any]
) -> None:
    result = _calibrated(spec_type, options)
    protocol_type = PROTOCOLS[spec_type]
    before = protocol_type.calibrated(N, list(LABELS), EPSILON, DELTA, **options)

    assert type(result.spec) is spec_type and type(result.protocol) is protocol_type
    assert result.protocol.calibration == before.calibration  # method, target δ, notes, δ...
    assert (result.protocol.n, result.protocol.labels) == (N, LABELS)
    assert result.protocol.parameters() == before.parameters()
    if isinstance(before, KRRProtocol):
        assert result.protocol.estimator == before.estimator
    assert result.spec == spec_type.calibrate(N, LABELS, EPSILON, DELTA, **options)
    assert {name: getattr(result.spec, name) for name in spec_type.fields} == _spec_fields_of(
        result.protocol, spec_type
    )


@pytest.mark.parametrize(("spec_type", "options"), CASES, ids=IDS)
def test_the_spec_alone_rebuilds_the_certificate_of_its_protocol(
    spec_type: type[ProtocolSpec], options: dict[str, Any]
) -> None:
    result = _calibrated(spec_type, options)
    reported = result.protocol.privacy_report()
    rebuilt = result.spec.protocol(N, LABELS, EPSILON, DELTA).privacy_report()
    assert (rebuilt.guarantee, rebuilt.method, rebuilt.bound) == (
        reported.guarantee,
        reported.method,
        reported.bound,
    )
    assert rebuilt.lower_bound_delta == reported.lower_bound_delta
    assert reported.bound in (BoundKind.UPPER, BoundKind.EXACT) and reported.delta <= DELTA


#: The module bindings each calibration looks up: the calibration itself, then every
#: certificate function it (or a rebuild from the spec) calls, at the protocol module and
#: at the certificate module (what the specs' ``calibration_at`` imports when it runs).
WATCHED: dict[type[ProtocolSpec], tuple[tuple[ModuleType, str], ...]] = {
    FlipSpec: (
        (flip_protocols, "calibrate_flip"),
        (flip_protocols, "flip_delta"),
        (flip_protocols, "flip_delta_lower_bound"),
        (flip_protocols, "flip_parameters"),
    ),
    KRRSpec: (
        (krr_protocols, "calibrate_krr"),
        (krr_protocols, "krr_delta"),
        (krr_protocols, "krr_delta_lower_bound"),
        (krr_protocols, "krr_parameters"),
    ),
    CorrelatedSpec: (
        (correlated_protocols, "calibrate_correlated"),
        (correlated_protocols, "_correlated_delta"),
        (correlated_protocols, "correlated_delta"),
        (correlated_certificates, "correlated_delta"),
    ),
    AugmentedSpec: (
        (augmented_protocols, "calibrate_augmented"),
        (augmented_protocols, "augmented_delta"),
        (augmented_certificates, "augmented_delta"),
    ),
}

#: The calibration function of each spec (called exactly once per calibration).
CALIBRATION = {
    FlipSpec: "protocols.calibrate_flip",
    KRRSpec: "protocols.calibrate_krr",
    CorrelatedSpec: "protocols.calibrate_correlated",
    AugmentedSpec: "protocols.calibrate_augmented",
}


def _count_calls(monkeypatch: pytest.MonkeyPatch, spec_type: type[ProtocolSpec]) -> Counter[str]:
    calls: Counter[str] = Counter()

    def counting(key: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return function(*args, **kwargs)

        return wrapper

    for module, name in WATCHED[spec_type]:
        key = f"{module.__name__.rsplit('.', 2)[-2]}.{name}"  # protocols.x or certificates.x
        monkeypatch.setattr(module, name, counting(key, getattr(module, name)))
    return calls


@pytest.mark.parametrize(("spec_type", "options"), CASES, ids=IDS)
def test_the_certificate_is_computed_once(
    monkeypatch: pytest.MonkeyPatch, spec_type: type[ProtocolSpec], options: dict[str, Any]
) -> None:
    _calibrated(spec_type, options)  # the searches' caches warm, as on the paths compared
    calls = _count_calls(monkeypatch, spec_type)
    protocol_type = PROTOCOLS[spec_type]

    protocol_type.calibrated(N, list(LABELS), EPSILON, DELTA, **options)
    before = calls.copy()
    calls.clear()
    spec_type.calibrated_with(N, LABELS, EPSILON, DELTA, options)
    through_calibrated = calls.copy()
    calls.clear()
    spec_type.calibrate(N, LABELS, EPSILON, DELTA, **options)
    through_calibrate = calls.copy()

    name = CALIBRATION[spec_type]
    assert before[name] == 1 and sum(before.values()) > 1  # a certificate was counted
    assert through_calibrated == before
    assert through_calibrate == before


@pytest.mark.parametrize("spec_type", list(PROTOCOLS))
def test_calibrate_takes_the_options_of_calibrated_and_no_other(
    spec_type: type[ProtocolSpec],
) -> None:
    """``calibrate`` (one, in the base class) is ``calibrated(...).spec``: what the spec's
    ``calibrated`` takes, by name, is all it takes."""
    calibrated = getattr(spec_type, "calibrated")  # noqa: B009 (not on ProtocolSpec)
    signature = inspect.signature(calibrated)
    keywords = [
        name
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert spec_type.calibration_options() == tuple(keywords)
    assert "calibrate" not in vars(spec_type)  # no per-spec copy to drift
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_option'"):
        spec_type.calibrate(N, LABELS, EPSILON, DELTA, no_such_option=1)
    assert SPECS[spec_type.name] is spec_type


@pytest.mark.parametrize(("min_honest", "n"), [(1, N), (0.0001, N), (None, 1), (2, N)])
def test_a_correlated_spec_may_count_on_one_user(min_honest: int | float | None, n: int) -> None:
    """A run may count on one user's noise shares (n = 1, or --min-honest 1): the spec
    holds it, and its certificate is the protocol's, within the target. A task holds at
    least 2 (its min_batch_users: check_task)."""
    made = CorrelatedSpec.calibrated(n, LABELS, EPSILON, DELTA, min_honest=min_honest)
    m = made.protocol.calibration.min_honest
    assert made.spec.min_honest == m == (2 if min_honest == 2 else 1)
    report = made.spec.protocol(n, LABELS, EPSILON, DELTA).privacy_report()
    assert report.delta == made.protocol.privacy_report().delta <= DELTA
    assert CorrelatedSpec.from_dict(made.spec.to_dict()) == made.spec
