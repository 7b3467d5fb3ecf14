"""One seed, independent streams: ``child_seeds`` and the places that split a seed.

Two generators built from one integer draw the same numbers; a loader and a
randomizer fed that way are correlated (issue 17: a seeded segmented run
sampled each user's slot order and decided which slot to report with the same
uniforms, and the most popular item came out 1.46 times its frequency). These
tests check that every place hands its consumers different streams; the
statistical tests (tests/statistical/test_seeded_runs.py) check that seeded
runs are unbiased.
"""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp._rng import SEEDED_NOT_COVERED, child_seeds, make_rng
from shuffledp._validation import InvalidParameterError
from shuffledp.experiments.krr_vs_gaussian import experiment_streams


def _first(gen: np.random.Generator | None) -> np.ndarray:
    assert gen is not None
    return gen.random(8)


def test_children_of_an_integer_are_the_seed_sequence_children():
    children = child_seeds(7, 3)
    expected = [np.random.default_rng(c) for c in np.random.SeedSequence(7).spawn(3)]
    for child, ref in zip(children, expected, strict=True):
        np.testing.assert_array_equal(_first(child), ref.random(8))
    # Reproducible, pairwise different, and different from the root stream make_rng(7).
    again = child_seeds(7, 3)
    draws = [_first(c) for c in child_seeds(7, 3)]
    np.testing.assert_array_equal(_first(again[0]), draws[0])
    root = make_rng(7).random(8)
    for i, a in enumerate(draws):
        assert not np.array_equal(a, root)
        for b in draws[i + 1 :]:
            assert not np.array_equal(a, b)


def test_children_of_a_generator_and_of_none():
    parent = np.random.default_rng(3)
    kids = child_seeds(parent, 2)
    assert all(isinstance(k, np.random.Generator) and k is not parent for k in kids)
    assert not np.array_equal(_first(kids[0]), _first(kids[1]))
    # None stays None: each consumer keeps the default policy (OS entropy, CSPRNG shuffle).
    assert child_seeds(None, 3) == (None, None, None)


@pytest.mark.parametrize(("seed", "count"), [(-1, 2), (1, 0), (1, True)])
def test_child_seeds_rejects(seed, count):
    with pytest.raises(InvalidParameterError):
        child_seeds(seed, count)
    with pytest.raises(TypeError):
        child_seeds(1.5, 2)  # type: ignore[arg-type]


def test_krr_vs_gaussian_streams_are_distinct():
    mechanisms, synthetic, real = experiment_streams(2023)
    firsts = [mechanisms.random(8), synthetic.random(8), real.random(8), make_rng(2023).random(8)]
    for i, a in enumerate(firsts):
        for b in firsts[i + 1 :]:
            assert not np.array_equal(a, b)


def test_krr_vs_gaussian_samples_real_data_from_their_own_stream(monkeypatch, tmp_path):
    # The command line samples flights from the third stream, one child per size: never
    # from the mechanisms' stream (which config.seed feeds inside run_krr_vs_gaussian).
    import shuffledp.data.real as real
    import shuffledp.experiments.krr_vs_gaussian as experiment
    from shuffledp.cli import main
    from shuffledp.data.encoding import encode_values

    pytest.importorskip("matplotlib")
    seen: list[np.ndarray] = []

    def fake_flights(sample=None, seed=None):
        seen.append(make_rng(seed).random(4))
        values = np.arange(sample or 10) % 5
        return encode_values([f"d{v}" for v in values], [f"d{j}" for j in range(5)])

    def fake_run(config, output_dir, **kwargs):
        mechanisms = experiment.experiment_streams(config.seed)[0]
        seen.append(mechanisms.random(4))
        return {"files": [], "summary": []}

    monkeypatch.setattr(real, "load_flights_destinations", fake_flights)
    monkeypatch.setattr(experiment, "run_krr_vs_gaussian", fake_run)
    main(
        [
            "experiment",
            "krr-vs-gaussian",
            "--data",
            "flights",
            "--quick",
            "--seed",
            "5",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert len(seen) == 2  # one sample size in --quick, then the run
    sample_draws, mechanism_draws = seen
    expected_sample = np.random.default_rng(
        np.random.SeedSequence(5).spawn(3)[2].spawn(1)[0]
    ).random(4)
    np.testing.assert_array_equal(sample_draws, expected_sample)
    assert not np.array_equal(sample_draws, mechanism_draws)
    assert not np.array_equal(sample_draws, make_rng(5).random(4))


def test_segmented_run_states_a_seed_and_keeps_its_streams_apart():
    from shuffledp.protocols.segmented import run_segmented

    rng = np.random.default_rng(0)
    items = np.argsort(rng.random((400, 6)), axis=1)[:, :2].astype(np.int64)
    levels = np.zeros(400, dtype=np.int64)
    args = dict(levels=(1.0,), delta=1e-3, domain=6, blanket_rate=1.5, workers=1)
    _, seeded = run_segmented(items, levels, seed=3, **args)
    assert SEEDED_NOT_COVERED in seeded.not_covered
    assert all(SEEDED_NOT_COVERED in report.not_covered for report in seeded.privacy)
    _, again = run_segmented(items, levels, seed=3, **args)
    np.testing.assert_array_equal(seeded.statistic, again.statistic)  # reproducible
    _, unseeded = run_segmented(items, levels, **args)
    assert SEEDED_NOT_COVERED not in unseeded.not_covered


def test_experiment_streams_are_keyed_by_role():
    # The segmented and per-user experiments derive every stream from (seed, role, indices):
    # different roles never share numbers, and none is the root stream make_rng(seed).
    from shuffledp.experiments import per_user, segmented

    root = make_rng(2024).random(4)
    draws = [segmented._rng(2024, role, 0, 0, 0).random(4) for role in range(5)]
    draws += [per_user._rng(2024, tag).random(4) for tag in range(1, 7)]
    draws.append(root)
    for i, a in enumerate(draws):
        for b in draws[i + 1 :]:
            assert not np.array_equal(a, b)
