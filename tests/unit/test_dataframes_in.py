"""A data engineer's inputs (issue 24 §2): DataFrames, any iterable domain, missing values,
case and spaces, integer labels, and an n that follows from the data."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shuffledp import DataError, FlipProtocol, InvalidParameterError, KRRProtocol
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.data import encode_values, load_histogram, load_values
from shuffledp.protocols.augmented import AugmentedProtocol
from shuffledp.protocols.base import CalibratedOnRun
from shuffledp.protocols.correlated import CorrelatedProtocol

sys.path.insert(0, str(Path(__file__).parent))
from _bruteforce import all_pairs, krr_channel

OS = ["android", "ios"]


@pytest.fixture
def frame() -> pd.DataFrame:
    """800 users: an OS column written carelessly, an integer code column, a user id."""
    rng = np.random.default_rng(7)
    raw = rng.choice(["Android", " android", "ANDROID ", "android", "iOS", "IOS", "ios"], 800)
    code = rng.integers(1, 4, size=800)
    return pd.DataFrame({"user": np.arange(800), "os": raw, "code": code})


def _by_hand(raw: pd.Series, domain: list[str]) -> np.ndarray:
    """Bin indices computed here, without the package: strip, casefold, look up."""
    index = {label: i for i, label in enumerate(domain)}
    return np.array([index[v.strip().casefold()] for v in raw], dtype=np.int64)


# -- DataFrames in -------------------------------------------------------------------------


def test_run_takes_a_frame_and_a_column(frame):
    protocol = FlipProtocol.calibrated(len(frame), [1, 2, 3], 1.0, 1e-6)
    indices = frame["code"].to_numpy() - 1  # label "1" is bin 0
    plain = FlipProtocol.calibrated(len(frame), 3, 1.0, 1e-6).run(indices, path="count", seed=4)
    table = pa.Table.from_pandas(frame)
    for values, column in [
        (frame, "code"),  # the KeyError: 0
        (frame[["code"]], None),  # a one-column frame (the KeyError: 0 too)
        (table, "code"),
        (table.select(["code"]), None),
        (table.to_batches()[0], "code"),
    ]:
        run = protocol.run(values, column=column, path="count", seed=4)
        np.testing.assert_array_equal(run.statistic, plain.statistic)
        assert list(run.estimate.domain) == ["1", "2", "3"]


def test_a_frame_needs_one_column_named(frame):
    protocol = FlipProtocol.calibrated(len(frame), OS, 1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match=r"a DataFrame with 3 columns \('user', 'os',"):
        protocol.run(frame)
    with pytest.raises(InvalidParameterError, match=r"with column=NAME"):
        protocol.run(frame)
    with pytest.raises(InvalidParameterError, match=r"column 'OS' is not in the DataFrame"):
        protocol.run(frame, column="OS")
    with pytest.raises(InvalidParameterError, match=r"column='os' names a column .* a Series"):
        protocol.run(frame["os"], column="os")
    twice = pd.concat([frame["os"], frame["os"]], axis=1)
    with pytest.raises(InvalidParameterError, match="2 columns named 'os'"):
        protocol.run(twice, column="os")


def test_load_values_reads_a_frame_with_every_option(frame, tmp_path):
    users = frame.assign(os=frame["os"].where(frame.index % 9 != 4))  # some missing values
    users = pd.concat([users, users.iloc[:50]])  # 50 users with two rows
    with pytest.raises(DataError, match=r"missing.*drop_missing=True"):
        load_values(users, "os", domain=OS, normalize_labels=True)
    loaded = load_values(
        users, "os", domain=OS, normalize_labels=True, drop_missing=True,
        user_column="user", per_user="first",
    )  # fmt: skip
    kept = users.dropna(subset=["os"]).drop_duplicates("user")
    np.testing.assert_array_equal(loaded.indices, _by_hand(kept["os"], OS))
    assert loaded.missing_dropped == users["os"].isna().sum()
    assert loaded.rows_read == len(users)
    # The same frame written to Parquet reads the same.
    path = tmp_path / "users.parquet"
    users.to_parquet(path)
    from_file = load_values(
        path, "os", domain=OS, normalize_labels=True, drop_missing=True,
        user_column="user", per_user="first",
    )  # fmt: skip
    np.testing.assert_array_equal(from_file.indices, loaded.indices)
    counted = load_histogram(pa.Table.from_pandas(frame), "code", domain=pd.Index([1, 2, 3]))
    np.testing.assert_array_equal(counted.histogram, np.bincount(frame["code"] - 1))


def test_load_values_on_a_frame_names_what_is_wrong(frame):
    with pytest.raises(DataError, match=r"column 'os' of the DataFrame \(index 0\)"):
        load_values(frame, "os", domain=["Android", "iOS"])
    shifted = frame.set_index(frame["user"] + 1000)
    with pytest.raises(DataError, match=r"\(position 0, index label 1000\)"):
        load_values(shifted, "os", domain=["Android", "iOS"])
    with pytest.raises(InvalidParameterError, match="column 'city' is not in the DataFrame"):
        load_values(frame, "city", domain=OS)
    # In a frame, a missing value is a null; "NA" is text (a file's cells use na_values).
    text = pd.DataFrame({"x": ["NA", "a", "NA"]})
    assert load_values(text, "x", domain=["NA", "a"]).indices.tolist() == [0, 1, 0]
    with pytest.raises(DataError, match="missing"):
        load_values(text, "x", domain=["a", "b"], na_values=["NA"])


# -- the domain: any ordered collection of labels --------------------------------------------


def test_any_iterable_of_labels_is_a_domain(frame):
    counts = frame["os"].str.strip().str.casefold().value_counts()
    cases = [
        (pd.Index(OS), OS),
        (counts.index, list(counts.index)),
        (pd.Categorical(frame["os"].str.strip().str.casefold()).categories, OS),
        (pd.array(OS, dtype="string[pyarrow]"), OS),  # an ArrowStringArray
        (np.array(OS), OS),
        (pa.array(OS), OS),
        (pa.chunked_array([OS[:1], OS[1:]]), OS),
        ((label for label in OS), OS),
        (dict.fromkeys(OS).keys(), OS),
        (pd.Index([1, 2, 3]), ["1", "2", "3"]),
    ]
    for domain, labels in cases:
        protocol = FlipProtocol.calibrated(len(frame), domain, 1.0, 1e-6)
        assert protocol.labels == tuple(labels), type(domain)
        assert all(type(label) is str for label in protocol.labels)
    run = protocol.run(frame, column="code", path="count", seed=1)  # and the run's domain
    assert list(run.estimate.domain) == ["1", "2", "3"]
    assert encode_values(frame["code"], pd.Index([1, 2, 3])).domain == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        (pd.Series(OS).value_counts(), r"a pandas Series.*value_counts\(\).*\.index"),
        (pd.DataFrame({"a": OS}), "a pandas DataFrame"),
        (set(OS), "a set, which has no order"),
        ({"android": 1, "ios": 2}, r"a mapping \(dict\): give list\(mapping\)"),
        (pd.Index([1.0, 2.0]), r"got 1.0 \(float\).*1.0 and 1 would be one label"),
        (pd.Index(["a", None]), r"missing value \((None|nan)\) at position 1"),
        (pd.Index(["a", np.nan]), r"missing value \(nan\) at position 1"),
        (pd.array(["a", None], dtype="string"), r"missing value \(<NA>\)"),
        ([1, "1"], r"repeats the label\(s\) '1'"),  # an integer and its text: one label
        ([True, False], r"got True \(bool\)"),
        ("ab", "got the string 'ab'"),
        (pa.array(["a", None]), r"missing value \(None\)"),
    ],
)
def test_what_is_not_a_domain_is_refused(domain, message):
    with pytest.raises(InvalidParameterError, match=message):
        FlipProtocol.calibrated(100, domain, 1.0, 1e-6)


# -- missing values ------------------------------------------------------------------------


def test_missing_values_are_refused_or_dropped_and_counted_for_the_operator(frame):
    values = frame["os"].str.strip().str.casefold().where(frame.index % 23 != 5)
    missing = int(values.isna().sum())
    n = len(values) - missing
    protocol = FlipProtocol.calibrated(n, OS, 1.0, 1e-6)
    with pytest.raises(DataError, match=rf"{missing} value\(s\) in the input are missing"):
        protocol.run(values)
    with pytest.raises(DataError, match=r"drop them with drop_missing=True"):
        protocol.run(values)
    run = protocol.run(values, drop_missing=True, path="count", seed=2)
    assert run.estimate.n == n and run.privacy.n == n
    assert run.missing_dropped == missing
    assert any(f"{missing} missing value(s)" in note for note in run.operator_notes)
    statements = [*run.release_notes, *run.privacy.not_covered, *run.privacy.assumptions]
    assert any("drop_missing=True" in s for s in run.release_notes)
    assert any("n counts only users with a value" in s for s in run.privacy.not_covered)
    assert not any(str(missing) in s for s in statements)  # the count is the operator's only
    # Stated whenever asked, so that a release does not tell whether anything was missing.
    complete = FlipProtocol.calibrated(len(frame), OS, 1.0, 1e-6)
    full = complete.run(frame["os"], drop_missing=True, normalize_labels=True, path="count", seed=2)
    assert full.missing_dropped == 0 and full.privacy.not_covered == run.privacy.not_covered
    with pytest.raises(InvalidParameterError, match="drop_missing must be True or False"):
        protocol.run(values, drop_missing="yes")


def test_a_frame_of_nothing_but_missing_values_is_an_error():
    with pytest.raises(DataError, match="no user is left in the input: all 3 values are missing"):
        encode_values([None, None, np.nan], OS, drop_missing=True)


# -- case and surrounding spaces -------------------------------------------------------------


def test_normalize_labels_matches_case_and_spaces(frame):
    protocol = FlipProtocol.calibrated(len(frame), ["Android", "iOS"], 1.0, 1e-6)
    with pytest.raises(
        DataError, match=r"differ from a domain label only by case or surrounding spaces, such as"
    ):
        protocol.run(frame, column="os")
    run = protocol.run(frame, column="os", normalize_labels=True, path="count", seed=9)
    by_hand = _by_hand(frame["os"], OS)  # bin 0 is "Android", bin 1 "iOS"
    plain = FlipProtocol.calibrated(len(frame), 2, 1.0, 1e-6)
    np.testing.assert_array_equal(run.statistic, plain.run(by_hand, path="count", seed=9).statistic)
    assert list(run.estimate.domain) == ["Android", "iOS"]  # the declared labels
    assert any("normalize_labels=True" in note for note in run.release_notes)
    assert all("normaliz" not in item for item in run.privacy.not_covered)  # a rule, covered


def test_normalize_labels_refuses_what_it_would_merge(frame):
    with pytest.raises(InvalidParameterError, match=r"'Android' and 'android ' are the same"):
        encode_values(["x"], ["Android", "android ", "ios"], normalize_labels=True)
    with pytest.raises(InvalidParameterError, match=r"other='IOS' is the domain label 'ios'"):
        encode_values(["x"], OS, other="IOS", normalize_labels=True)
    indices = np.zeros(len(frame), dtype=np.int64)
    protocol = FlipProtocol.calibrated(len(frame), OS, 1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="normalize_labels=True matches labels"):
        protocol.run(indices, normalize_labels=True)
    # Two labels that differ only by case: matched exactly they are two bins, and the hint
    # does not suggest the option that would refuse them.
    with pytest.raises(DataError) as error:
        encode_values(["a", "B"], ["A", "a", "b"])
    assert "vs 'b'" in str(error.value) and "normalize_labels" not in str(error.value)


def test_normalized_other_and_na_texts():
    enc = encode_values([" Oslo", "android", "ANDROID "], OS, other="other", normalize_labels=True)
    assert enc.domain == [*OS, "other"] and enc.indices.tolist() == [2, 0, 0]
    assert enc.mapped_to_other == 1
    from shuffledp.data.encoding import BinEncoder

    encoder = BinEncoder(OS, na_values=["N/A"], normalize_labels=True)
    codes = encoder.encode(np.array(["n/a ", "IOS", "N/A"], dtype=object))
    assert codes.tolist() == [-1, 1, -1] and encoder.missing == 2


# -- integer labels and bin indices -------------------------------------------------------


def test_values_are_says_what_integers_are(frame):
    codes = frame["code"].to_numpy()  # the labels 1, 2, 3
    protocol = FlipProtocol.calibrated(len(frame), [1, 2, 3], 1.0, 1e-6)
    with pytest.raises(DataError, match=r"ambiguous.*values_are='labels'.*values_are='indices'"):
        protocol.run(codes)
    as_labels = protocol.run(codes, values_are="labels", path="count", seed=5)
    as_indices = protocol.run(codes - 1, values_are="indices", path="count", seed=5)
    np.testing.assert_array_equal(as_labels.statistic, as_indices.statistic)
    with pytest.raises(DataError, match="outside the domain"):
        protocol.run(codes, values_are="indices")  # 3 is no position of 3 bins
    with pytest.raises(InvalidParameterError, match="values_are must be 'indices', 'labels'"):
        protocol.run(codes, values_are="index")


# -- an n that follows from the data ---------------------------------------------------------


def test_calibrated_for_the_data_certifies_at_the_users_it_ran_on():
    """k-RR with n=None, checked against an independent brute force at the data's n."""
    epsilon, delta = 1.0, 0.05
    protocol = KRRProtocol.calibrated(None, ["a", "b", "c"], epsilon, delta)
    assert isinstance(protocol, CalibratedOnRun)
    values = ["a", None, "c", "b", None, "a"]  # six rows, four users with a value
    with pytest.raises(DataError, match="drop_missing=True"):
        protocol.run(values)
    run = protocol.run(values, drop_missing=True, seed=1)
    assert run.privacy.n == run.estimate.n == 4
    epsilon0 = run.privacy.parameters["epsilon0"]
    assert run.privacy.epsilon == epsilon and run.privacy.delta <= delta  # the user's target
    # Independent check: every dataset of 4 users over 3 values, every move of one user.
    worst = max(all_pairs(4, 3, krr_channel(3, epsilon0), epsilon).values())
    assert worst <= run.privacy.delta + 1e-12
    lower = run.privacy.lower_bound_delta
    assert lower is not None and lower <= worst + 1e-12
    # Why it matters: the epsilon0 calibrated for the 6 rows is not private for 4 users.
    rows = KRRProtocol.calibrated(6, ["a", "b", "c"], epsilon, delta).calibration.epsilon0
    assert rows > epsilon0
    assert max(all_pairs(4, 3, krr_channel(3, rows), epsilon).values()) > delta


@pytest.mark.parametrize(
    "build",
    [
        lambda n: FlipProtocol.calibrated(n, OS, 1.0, 1e-6),
        lambda n: FlipProtocol.from_parameters(q=0.02, fake_users=50, n=n, domain=OS, delta=1e-6),
        lambda n: KRRProtocol.from_parameters(epsilon0=2.0, n=n, domain=OS, epsilon=1.0),
        lambda n: AugmentedProtocol.calibrated(n, OS, 1.0, 1e-6, beta=0.9),
        lambda n: CorrelatedProtocol.calibrated(n, OS, 1.0, 1e-6, min_honest=0.5),
    ],
)
def test_every_protocol_built_for_the_data_equals_the_one_built_for_its_n(build, frame):
    values = frame["os"].str.strip().str.casefold()
    on_run = build(None)
    run = on_run.run(values, path="count", seed=3)
    fixed = build(len(values))
    same = fixed.run(values, path="count", seed=3)
    assert run.privacy == same.privacy  # the same certificate, at the data's n
    assert run.privacy.n == len(values)
    np.testing.assert_array_equal(run.statistic, same.statistic)
    counted = on_run.run_counts(np.bincount(_by_hand(values, OS)), seed=3)
    np.testing.assert_array_equal(counted.statistic, run.statistic)
    assert on_run.for_users(len(values)) is on_run.for_users(len(values))  # built once
    with pytest.raises(AttributeError, match=r"depends on n.*for_users\(n\)\.calibration"):
        on_run.calibration  # noqa: B018


def test_flip_for_the_data_reports_the_certificate_at_its_n(frame):
    on_run = FlipProtocol.calibrated(n=None, domain=OS, epsilon=1.0, delta=1e-6)
    for users in (37, 800):
        run = on_run.run(frame["os"].str.strip().str.casefold()[:users], path="count", seed=1)
        q, k = run.privacy.parameters["q"], run.privacy.parameters["fake_users"]
        assert run.privacy.n == users
        assert run.privacy.delta == flip_delta(1.0, q, k, users) <= 1e-6


def test_a_protocol_for_the_data_checks_its_arguments_before_the_data_come():
    with pytest.raises(InvalidParameterError, match="epsilon"):
        FlipProtocol.calibrated(None, OS, -1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="delta"):
        KRRProtocol.calibrated(None, OS, 1.0, 2.0)
    with pytest.raises(InvalidParameterError, match="estimator"):
        KRRProtocol.calibrated(None, OS, 1.0, 1e-6, estimator="median")
    with pytest.raises(InvalidParameterError, match="exactly one of epsilon"):
        FlipProtocol.from_parameters(q=0.1, fake_users=10, n=None, domain=OS)
    with pytest.raises(InvalidParameterError, match="min_honest"):
        CorrelatedProtocol.calibrated(None, OS, 1.0, 1e-6, min_honest=1.5)
    with pytest.raises(InvalidParameterError, match="variant"):
        AugmentedProtocol.calibrated(None, OS, 1.0, 1e-6, variant="sgeo")
    with pytest.raises(InvalidParameterError, match="repeats"):
        FlipProtocol.calibrated(None, ["a", "a"], 1.0, 1e-6)
    # min_honest above the data's n: refused when the data come, not assumed
    protocol = CorrelatedProtocol.calibrated(None, OS, 1.0, 1e-6, min_honest=50)
    with pytest.raises(InvalidParameterError, match=r"min_honest must be .* from 1 to n=20"):
        protocol.run(["ios"] * 20, path="count")


def test_a_fixed_n_protocol_says_how_to_follow_the_data():
    protocol = FlipProtocol.calibrated(10, OS, 1.0, 1e-6)
    with pytest.raises(DataError, match=r"calibrated for n=10 users but got 9 values.*n=None"):
        protocol.run(["ios"] * 9)
