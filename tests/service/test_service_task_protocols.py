"""Tasks of the correlated and augmented protocols: documents, certificates, message bounds, CLI."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import nbinom

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.augmented import (
    SAGeoLaw,
    SBinLaw,
    augmented_delta,
    sageo_law,
)
from shuffledp.accounting.certificates.correlated import CorrelatedNoise, correlated_delta
from shuffledp.accounting.certificates.message_bounds import (
    calibration_target,
    correlated_log_tail_bound,
    correlated_max_messages,
    honest_cap_delta,
    max_dummies_per_batch,
    max_dummies_per_bin,
    with_cap_delta,
)
from shuffledp.cli import main
from shuffledp.protocols.correlated import calibrate_correlated
from shuffledp.schemas import validate
from shuffledp.service.analyzer import batch_body_bytes, batch_message_bounds
from shuffledp.service.task import (
    Task,
    TaskError,
    build_protocol,
    build_randomizer,
    create_task,
    load_task,
)

DOMAIN = ["a", "b", "c", "d", "e"]


@pytest.fixture(scope="module")
def correlated_task():
    return create_task("correlated", DOMAIN, 1.0, 1e-6, 200)


@pytest.fixture(scope="module")
def augmented_tasks():
    return {
        "sageo": create_task("augmented", DOMAIN, 1.0, 1e-6, 200),
        "sageo-beta": create_task("augmented", DOMAIN, 1.0, 1e-6, 200, beta=0.7),
        "s1geo": create_task("augmented", DOMAIN, 1.0, 1e-6, 200, variant="s1geo"),
        "sbin": create_task("augmented", DOMAIN, 1.0, 1e-6, 200, variant="sbin"),
    }


def _exact_correlated_tail(d: int, m: int, noise: CorrelatedNoise, size: int = 1 << 14):
    """P[X + 2Y ≥ c] for c < size, X ~ NB(2d/m, α), Y ~ NB(d·r/m, q), summed exactly."""
    grid = np.arange(size)
    two_sided = nbinom.pmf(grid, 2 * d / m, 1 - noise.alpha)
    flood = np.zeros(size)
    flood[0::2] = nbinom.pmf(grid[: size // 2], d * noise.flood_r / m, 1 - noise.flood_q)
    total = np.convolve(two_sided, flood)[:size]
    return np.cumsum(total[::-1])[::-1]


def test_correlated_task_is_calibrated_for_min_batch_users_honest_users(correlated_task):
    task, _ = correlated_task
    reference = calibrate_correlated(200, 5, 1.0, 1e-6, min_honest=200)
    assert (task.spec.alpha, task.spec.flood_r, task.spec.flood_q) == (
        reference.alpha,
        reference.flood_r,
        reference.flood_q,
    )
    assert task.parameters["min_honest"] == task.min_batch_users == 200
    assert task.spec.neighbours == "replacement" and task.spec.slack == 0.1
    assert task.message_domain_size == 10
    doc = json.loads(task.to_json())
    validate(doc, "task")
    assert Task.from_dict(doc) == task
    # the certificate at any number of users is the accountant's at the task's noise
    noise = CorrelatedNoise(task.spec.alpha, task.spec.flood_r, task.spec.flood_q)
    expected = correlated_delta(1.0, noise)
    for n in (200, 201, 1000):
        report = build_protocol(task, n).privacy_report()
        assert report.delta == expected <= 1e-6
        assert report.parameters["min_honest"] == 200
    randomizer = build_randomizer(task)
    assert randomizer.share_shapes == (1 / 200, task.spec.flood_r / 200)


def test_correlated_message_bound_is_a_far_tail(correlated_task):
    task, _ = correlated_task
    noise = task.correlated_noise()
    cap = task.max_messages_per_submission
    assert cap == correlated_max_messages(5, noise, 200)
    above = _exact_correlated_tail(5, 200, noise)
    assert above[-1] < 1e-40  # the grid holds the tail
    # an honest client sends 1 + S messages: P[1 + S > cap] = P[S ≥ cap] ≤ 1e-30 ...
    assert above[cap] <= 1e-30
    # ... and the Chernoff bound is not far above the exact 1e-30 point
    exact = 1 + int(np.argmax(above <= 1e-30))
    assert exact <= cap <= 1.15 * exact
    # Chernoff's bound is above the exact tail wherever we look
    for c in (50, 200, 1000, 2000):
        assert math.exp(correlated_log_tail_bound(c, 5, noise, 200)) >= above[c]


def test_augmented_tasks_hold_the_dummy_law_and_its_certificate(augmented_tasks):
    for name, (task, _) in augmented_tasks.items():
        doc = json.loads(task.to_json())
        validate(doc, "task")
        assert Task.from_dict(doc) == task, name
        assert task.max_messages_per_submission == 1 and task.message_domain_size == 5
        law = task.dummy_law()
        report = build_protocol(task, 200).privacy_report()
        assert report.delta == augmented_delta(1.0, law, task.spec.beta) <= 1e-6, name
        assert any("encryption alone" in a for a in report.assumptions)
    sageo, _ = augmented_tasks["sageo"]
    assert sageo.dummy_law() == sageo_law(1.0, 1.0, sageo.spec.nu) and sageo.spec.beta == 1.0
    assert augmented_tasks["sageo-beta"][0].spec.beta == 0.7
    s1geo, _ = augmented_tasks["s1geo"]
    assert s1geo.calibration == "pure" and s1geo.spec.nu == 0 and s1geo.spec.q_left == 0.0
    assert build_protocol(s1geo, 200).privacy_report().delta == 0.0
    sbin, _ = augmented_tasks["sbin"]
    assert isinstance(sbin.dummy_law(), SBinLaw) and "nu" not in sbin.parameters


@pytest.mark.parametrize("name", ["sageo", "sageo-beta", "s1geo"])
def test_dummy_bound_is_a_far_tail(augmented_tasks, name):
    task, _ = augmented_tasks[name]
    law = task.dummy_law()
    assert isinstance(law, SAGeoLaw)
    for tail in (1e-6, 1e-31):
        c = max_dummies_per_bin(law, tail)
        above = float(np.sum(law.pmf(np.arange(c + 1, c + 4000))))
        just_below = float(np.sum(law.pmf(np.arange(c, c + 4000))))
        assert above <= tail < just_below or c == law.nu
    assert task.max_dummies_per_batch() == 5 * max_dummies_per_bin(law, 1e-30 / 5)


def test_sbin_dummies_never_exceed_their_trials(augmented_tasks):
    task, _ = augmented_tasks["sbin"]
    assert task.max_dummies_per_batch() == max_dummies_per_batch(5, task.dummy_law()) == 5 * 148


def test_batch_bounds_per_protocol(correlated_task, augmented_tasks):
    task, _ = correlated_task
    assert batch_message_bounds(task, 300) == (300, 300 * task.max_messages_per_submission)
    sageo, _ = augmented_tasks["sageo"]
    assert batch_message_bounds(sageo, 300) == (300, 300 + sageo.max_dummies_per_batch())
    beta, _ = augmented_tasks["sageo-beta"]
    assert batch_message_bounds(beta, 300) == (0, 300 + beta.max_dummies_per_batch())
    # the analyzer's default body limit holds such a batch
    assert batch_body_bytes(sageo, 300) >= 4 * (300 + sageo.max_dummies_per_batch()) * 53 // 3


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"min_honest": 100}, "min_honest must equal its min_batch_users"),
        ({"alpha": 1.5}, "alpha"),
        ({"flood_q": "x"}, "must be a number"),
        ({"neighbours": "swap"}, "neighbours"),
    ],
)
def test_tampered_correlated_documents_are_refused(correlated_task, change, fragment):
    doc = json.loads(correlated_task[0].to_json())
    doc["parameters"].update(change)
    with pytest.raises(TaskError, match=fragment):
        Task.from_dict(doc)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"variant": "gauss"}, "variant"),
        ({"beta": 0.1}, "beta"),
        ({"q_right": 1.0}, "q_right"),
        ({"nu": None}, "nu is null"),
    ],
)
def test_tampered_augmented_documents_are_refused(augmented_tasks, change, fragment):
    doc = json.loads(augmented_tasks["sageo"][0].to_json())
    doc["parameters"].update(change)
    with pytest.raises(TaskError, match=fragment):
        Task.from_dict(doc)
    doc = json.loads(augmented_tasks["sageo"][0].to_json())
    del doc["parameters"]["nu"]
    with pytest.raises(TaskError, match="needs the parameters nu"):
        Task.from_dict(doc)
    doc = json.loads(augmented_tasks["sageo"][0].to_json())
    doc["max_messages_per_submission"] = 2
    with pytest.raises(TaskError, match="exactly one message"):
        Task.from_dict(doc)


def test_create_task_refuses_what_the_protocols_do_not_take():
    with pytest.raises(ValueError, match="exact accountant only"):
        create_task("correlated", DOMAIN, 1.0, 1e-6, 100, calibration="paper")
    with pytest.raises(ValueError, match="beta"):
        create_task("augmented", DOMAIN, 1.0, 1e-6, 100, beta=0.2)
    with pytest.raises(ValueError, match="trials"):
        create_task("augmented", DOMAIN, 1.0, 1e-6, 100, trials=10)


# -- task create on the command line --------------------------------------------------------


def _create(tmp_path, capsys, *extra: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    argv = [
        "task", "create", "--domain", ",".join(DOMAIN), "--epsilon", "1", "--delta", "1e-6",
        "--min-batch-users", "200", "--out", str(tmp_path / "task.json"),
        "--key-out", str(tmp_path / "analyzer.key"), *extra,
    ]  # fmt: skip
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_creates_correlated_and_augmented_tasks(tmp_path, capsys):
    code, _, err = _create(tmp_path / "c", capsys, "--protocol", "correlated", "--slack", "0.2")
    assert code == 0, err
    task = load_task(tmp_path / "c" / "task.json")
    validate(json.loads((tmp_path / "c" / "task.json").read_text()), "task")
    assert task.protocol == "correlated" and task.spec.slack == 0.2
    assert f"at most {task.max_messages_per_submission} message(s)" in err
    code, _, err = _create(
        tmp_path / "a", capsys, "--protocol", "augmented", "--variant", "sbin", "--trials", "400"
    )
    assert code == 0, err
    task = load_task(tmp_path / "a" / "task.json")
    assert task.spec.trials == 400 and task.calibration == "fixed"
    assert "sealed dummies per batch" in err


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--protocol", "krr", "--variant", "sbin"], "--variant is an option of --protocol"),
        (["--protocol", "augmented", "--slack", "0.2"], "--slack is an option of --protocol"),
        (["--protocol", "correlated", "--calibration", "paper"], "calibrated by exact only"),
        (["--protocol", "krr", "--calibration", "paper"], "does not apply to the krr protocol"),
        (["--protocol", "correlated", "--slack", "-1"], "--slack"),
        (["--protocol", "augmented", "--beta", "0.1"], "--beta"),
        (["--protocol", "augmented", "--variant", "s1geo", "--beta", "0.5"], "--beta"),
        (["--protocol", "augmented", "--nu", "3", "--variant", "sbin"], "--nu"),
        (["--protocol", "augmented", "--variant", "sbin", "--calibration", "paper"], "paper"),
        (["--protocol", "augmented", "--nu", "1"], "above the target"),
    ],
)
def test_cli_bad_protocol_options(tmp_path, capsys, extra, fragment):
    code, out, err = _create(tmp_path, capsys, *extra)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, err
    assert fragment in lines[0] and "Traceback" not in err
    assert not (tmp_path / "task.json").exists() and not (tmp_path / "analyzer.key").exists()


# -- what the message bounds cost the guarantee ---------------------------------------------


def test_honest_cap_delta_is_one_plus_e_to_the_epsilon_times_two_tails_per_party():
    assert honest_cap_delta(1.0, 0) == 0.0
    for eps, parties in ((1.0, 500), (0.01, 2), (20.0, 10**12)):
        exact = Fraction(1 + math.exp(eps)) * parties * 2 * Fraction(1, 10**30)
        cost = honest_cap_delta(eps, parties)
        assert (
            exact * (1 - Fraction(1, 10**13)) <= Fraction(cost) <= exact * (1 + Fraction(1, 10**9))
        )
    assert honest_cap_delta(800.0, 1) == 1.0  # e^800 overflows: the cost is everything
    with pytest.raises(InvalidParameterError, match=r"parties must be .* got -1"):
        honest_cap_delta(1.0, -1)
    with pytest.raises(InvalidParameterError, match="epsilon must be a finite number > 0"):
        honest_cap_delta(0.0, 3)


def test_every_protocol_names_the_parties_that_could_exceed_a_bound(
    correlated_task, augmented_tasks
):
    flip, _ = create_task("flip", DOMAIN, 1.0, 1e-6, 300)
    krr, _ = create_task("krr", DOMAIN, 1.0, 1e-6, 300)
    assert flip.capped_parties() == 300 and krr.capped_parties() == 0
    assert correlated_task[0].capped_parties() == 200
    parties = {name: task.capped_parties() for name, (task, _) in augmented_tasks.items()}
    assert parties == {"sageo": 1, "sageo-beta": 1, "s1geo": 1, "sbin": 0}


def test_tasks_are_calibrated_so_the_certificate_plus_the_bounds_cost_meets_delta(
    correlated_task, augmented_tasks
):
    flip, _ = create_task("flip", DOMAIN, 1.0, 1e-6, 300)
    certified = {
        "flip": (flip, build_protocol(flip, 300).privacy_report().delta),
        "correlated": (
            correlated_task[0],
            correlated_delta(1.0, correlated_task[0].correlated_noise()),
        ),
    }
    for name, (task, _) in augmented_tasks.items():
        certified[name] = (task, augmented_delta(1.0, task.dummy_law(), task.spec.beta))
    for name, (task, delta) in certified.items():
        total = Fraction(delta) + Fraction(task.cap_delta())
        assert total <= Fraction(task.delta), name


@pytest.mark.parametrize("protocol", ["flip", "correlated", "augmented"])
def test_a_delta_the_bounds_alone_spend_is_refused_naming_delta(protocol):
    # (1 + e)·1000·2e-30 = 7.4e-27 for 1000 clients; the augmented draw alone: 7.4e-30.
    delta = 5e-27 if protocol != "augmented" else 5e-30
    with pytest.raises(InvalidParameterError, match=r"^delta=5e-\d+ is not above what the message"):
        create_task(protocol, DOMAIN, 1.0, delta, 1000)


def test_the_calibration_target_is_the_largest_whose_release_stays_within_delta():
    """Brute force over floats: a reserve near δ leaves the certificate's rounding no room."""
    rng = np.random.default_rng(20261126)
    deltas = 10.0 ** rng.uniform(-300, -0.5, 4000)
    shares = np.concatenate([rng.uniform(1 / 3, 1, 2000), 10.0 ** rng.uniform(-30, -1, 2000)])
    for delta, share in zip(deltas, shares, strict=True):
        cost = float(delta * share)
        if not cost < delta:
            continue
        target = calibration_target(float(delta), cost)
        assert 0 < target and with_cap_delta(target, cost) <= delta
        assert with_cap_delta(math.nextafter(target, math.inf), cost) > delta
    assert calibration_target(1e-6, 0.0) == 1e-6 and with_cap_delta(1e-6, 0.0) == 1e-6


def test_a_release_of_a_task_calibrated_without_the_reserve_says_it_is_above_target():
    """Tasks of shuffledp 0.2 spent all of δ: the release states the true δ and why."""
    from shuffledp.service.release import build_release
    from shuffledp.service.store_protocols import AggregateTotals

    task, _ = create_task("flip", DOMAIN, 1.0, 1e-6, 300)
    certified = build_protocol(task, 300).privacy_report().delta
    old = dataclasses.replace(task, delta=certified)  # calibrated for all of its target
    totals = AggregateTotals(
        counts=np.full(5, 300, dtype=np.int64),
        n_users=300,
        n_messages=1500,
        n_batches=1,
        smallest_batch_users=300,
        pending_batches=0,
    )
    for document, above in ((task, False), (old, True)):
        privacy = build_release(document, totals)["privacy"]
        assert (privacy["delta"] > document.delta) is above
        assert ("above the task's target" in privacy["notes"]) is above
        assert "for the message bounds" in privacy["notes"]


@pytest.mark.parametrize("protocol", ["flip", "augmented"])
def test_a_release_takes_the_bounds_cost_off_its_lower_bound(protocol, augmented_tasks):
    """The run R can be (1 + e^ε)·N·p less private than M too: its lower bound drops as much."""
    from shuffledp.service.release import build_release
    from shuffledp.service.store_protocols import AggregateTotals

    if protocol == "flip":
        task, _ = create_task("flip", DOMAIN, 1.0, 1e-6, 300)
        lower = build_protocol(task, 300).privacy_report().lower_bound_delta
    else:
        task, _ = augmented_tasks["sageo"]
        lower = task.spec.calibration_at(300, 5, 1.0, task.delta).privacy_report().lower_bound_delta
    assert lower is not None and lower > 0
    totals = AggregateTotals(
        counts=np.full(5, 300, dtype=np.int64),
        n_users=300,
        n_messages=1500,
        n_batches=1,
        smallest_batch_users=300,
        pending_batches=0,
    )
    released = build_release(task, totals)["privacy"]["lower_bound_delta"]
    cost = Fraction(1 + math.exp(1.0)) * task.capped_parties() * 2 * Fraction(1, 10**30)
    assert task.capped_parties() > 0
    assert Fraction(released) <= Fraction(lower) - cost * (1 - Fraction(1, 10**9))
    assert released >= lower - 1.001 * float(cost) - 2 * math.ulp(lower)
